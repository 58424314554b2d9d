"""``trainrt report RUN_DIR``: PNG pictures of a run from its TensorBoard events and ``run_summary.json``.

Writes into ``<run_dir>/report/``: ``episode.png`` (episode length and return), ``rewards.png`` (per-term
episode returns), ``losses.png``, ``throughput.png`` (env steps/s against wall-clock time and env steps)
and, when ``trainrt eval`` results exist (``<run_dir>/eval/``), ``eval.png`` (the newest results' tables).
"""

from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainrt.hotpath import cold_path
from trainrt.viz.video import VIZ_INSTALL_HINT

REPORT_DIR_NAME = "report"
_TENSORBOARD_DIR_NAME = "tensorboard"
_SUMMARY_FILE_NAME = "run_summary.json"
_EVAL_FILES_SHOWN = 3


@cold_path
def read_scalars(run_dir: str | os.PathLike) -> dict[str, list[tuple[int, float]]]:
    """Tag -> [(step, value)] of every scalar in ``<run_dir>/tensorboard`` (empty without events)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder = Path(run_dir) / _TENSORBOARD_DIR_NAME
    if not folder.is_dir():
        return {}
    scalars: dict[str, list[tuple[int, float]]] = {}
    for events in sorted({p.parent for p in folder.rglob("events.out.tfevents.*")}):
        accumulator = EventAccumulator(str(events), size_guidance={"scalars": 0})
        accumulator.Reload()
        for tag in accumulator.Tags().get("scalars", []):
            scalars.setdefault(tag, []).extend((e.step, e.value) for e in accumulator.Scalars(tag))
    return {tag: sorted(points) for tag, points in scalars.items()}


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError as err:
        raise RuntimeError(f"trainrt report needs matplotlib: {VIZ_INSTALL_HINT}") from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _grid(plt: Any, count: int, title: str) -> tuple[Any, list[Any]]:
    cols = min(count, 3)
    rows = math.ceil(count / cols)
    figure, axes = plt.subplots(
        rows, cols, figsize=(4.2 * cols, 2.9 * rows), squeeze=False, layout="constrained"
    )
    figure.suptitle(title)
    flat = [a for row in axes for a in row]
    for extra in flat[count:]:
        extra.set_visible(False)
    return figure, flat[:count]


def _plot_tags(
    plt: Any, scalars: dict[str, list[tuple[int, float]]], tags: list[str], title: str, path: Path
) -> bool:
    tags = [t for t in tags if scalars.get(t)]
    if not tags:
        return False
    figure, axes = _grid(plt, len(tags), title)
    for axis, tag in zip(axes, tags):
        steps, values = zip(*scalars[tag])
        axis.plot(steps, values, linewidth=1.3)
        axis.set_title(tag, fontsize=9)
        axis.set_xlabel("iteration", fontsize=8)
        axis.grid(alpha=0.3)
        axis.tick_params(labelsize=7)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def _plot_throughput(plt: Any, summary: dict[str, Any], path: Path) -> bool:
    iterations = summary.get("iterations") or []
    if not iterations:
        return False
    wall, steps, rate = [], [], []
    elapsed, total = 0.0, 0
    for timing in iterations:
        elapsed += timing["wall_time_sec"]
        total += timing["env_steps"]
        wall.append(elapsed)
        steps.append(total)
        rate.append(timing["env_steps"] / timing["wall_time_sec"] if timing["wall_time_sec"] > 0 else 0.0)
    figure, (by_time, by_steps) = plt.subplots(1, 2, figsize=(10, 3.4))
    tail = summary.get("tail_env_steps_per_sec")
    figure.suptitle(
        f"env steps/s ({summary.get('algo')} {summary.get('task')}, {summary.get('num_envs')} envs"
        + (f"; tail {tail:,.0f}/s)" if tail else ")")
    )
    by_time.plot(wall, rate, linewidth=1.0)
    by_time.set_xlabel("training wall-clock (s)")
    by_steps.plot(steps, rate, linewidth=1.0)
    by_steps.set_xlabel("env steps")
    for axis in (by_time, by_steps):
        axis.set_ylabel("env steps/s")
        axis.grid(alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


def _eval_tables(run_dir: Path) -> list[str]:
    """The console tables of the newest ``trainrt eval`` results (``<run_dir>/eval/eval_<iteration>.json``, and
    ``eval_onnx_<iteration>.json`` of an exported ONNX policy, its table titled so)."""
    from trainrt.runner.evaluate import EVAL_DIR_NAME, format_eval_table

    def iteration(path: Path) -> int:
        digits = path.stem.rsplit("_", 1)[-1]
        return int(digits) if digits.isdigit() else -1

    files = sorted((run_dir / EVAL_DIR_NAME).glob("eval_*.json"), key=iteration)[-_EVAL_FILES_SHOWN:]
    tables = []
    for file in files:
        try:
            tables.append(format_eval_table(json.loads(file.read_text())))
        except (OSError, ValueError, KeyError, TypeError) as err:
            tables.append(f"{file.name}: unreadable ({type(err).__name__}: {err})")
    return tables


def _plot_eval(plt: Any, tables: list[str], path: Path) -> bool:
    if not tables:
        return False
    text = "\n\n".join(tables)
    lines = text.splitlines()
    width = max(len(line) for line in lines)
    figure = plt.figure(figsize=(max(4.0, 0.075 * width + 0.6), max(2.0, 0.17 * len(lines) + 0.6)))
    figure.text(0.02, 0.98, text, family="monospace", fontsize=8, va="top", ha="left")
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


@cold_path
def write_report(
    run_dir: str | os.PathLike,
    output: str | os.PathLike | None = None,
    *,
    log: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write the run's PNGs (see the module docstring) and return their paths.

    Raises ``FileNotFoundError`` when ``run_dir`` is not a run directory, ``ValueError`` when it holds
    nothing to plot yet. An unreadable ``run_summary.json`` is reported to ``log`` (stderr by default) and
    the rest is plotted without it.
    """
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir} is a file, not a run directory")
    summary_path = run_dir / _SUMMARY_FILE_NAME
    summary: dict[str, Any] = {}
    unreadable = None
    if summary_path.is_file():
        try:
            summary = json.loads(summary_path.read_text())
        except OSError as err:
            unreadable = f"{summary_path} cannot be read: {err}"
        except ValueError as err:
            unreadable = f"{summary_path}: not valid JSON (empty or truncated): {err}"
    scalars = read_scalars(run_dir)
    if not scalars and not summary.get("iterations"):
        raise ValueError(
            unreadable
            or f"{run_dir} has no TensorBoard scalars ({_TENSORBOARD_DIR_NAME}/) and no {_SUMMARY_FILE_NAME} "
            "iterations: nothing to plot (train with training.tensorboard=true)"
        )
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    if unreadable is not None:
        say(f"{unreadable}; plotting without it (no throughput.png)")
    plt = _pyplot()
    folder = Path(output) if output is not None else run_dir / REPORT_DIR_NAME
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    title = f"{summary.get('algo', '')} {summary.get('task', '')}".strip() or run_dir.name
    plots = [
        (
            "episode.png",
            ["Train/mean_episode_length", "Episode/length", "Train/mean_reward", "Train/num_episodes"],
            f"episodes: {title}",
            "no episode statistics logged yet",
        ),
        (
            "rewards.png",
            sorted(t for t in scalars if t.startswith("Episode/rew_")),
            "episode return per reward term",
            "no episode has ended yet (no Episode/rew_* scalars)",
        ),
        (
            "losses.png",
            sorted(t for t in scalars if t.startswith("Loss/")),
            "losses",
            "no update has run yet (no Loss/* scalars)",
        ),
    ]
    for name, tags, heading, missing in plots:
        if _plot_tags(plt, scalars, tags, heading, folder / name):
            written.append(folder / name)
        else:
            say(f"{name} not written: {missing}")
    if _plot_throughput(plt, summary, folder / "throughput.png"):
        written.append(folder / "throughput.png")
    if _plot_eval(plt, _eval_tables(run_dir), folder / "eval.png"):
        written.append(folder / "eval.png")
    return written
