"""What ``trainrt report`` plots, read from a run directory and prepared as plain series (no plotting here).

Sources: the TensorBoard scalars the run logged every ``training.log_every`` iterations (``Train/*``,
``Episode/*``, ``Metrics/*``, ``Loss/*``, ``Perf/*``), ``run_summary.json`` (every iteration's timing) and the
``trainrt eval`` results in ``<run_dir>/eval/``. Each ``*_series`` function returns what one figure draws,
so tests check the numbers without looking at pixels.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainrt.hotpath import cold_path
from trainrt.runner.run_log import TENSORBOARD_DIR_NAME
from trainrt.runner.summary import SUMMARY_FILE_NAME

EVAL_FILES_COMPARED = 3
"""The newest evaluations of a run drawn side by side in ``eval.png``."""

Scalars = dict[str, list[tuple[int, float]]]


@dataclass(frozen=True)
class Series:
    """One curve: ``x`` and ``y`` of equal length, and its legend or panel label."""

    label: str
    x: list[float]
    y: list[float]

    @property
    def smoothed(self) -> list[float]:
        """``y`` as a trailing mean (see ``smooth``)."""
        return smooth(self.y)


@dataclass
class RunInputs:
    """Everything a report reads from one run directory."""

    run_dir: Path
    scalars: Scalars
    summary: dict[str, Any]
    evals: list[tuple[str, dict[str, Any]]]
    """(label, result) of the newest evaluations, oldest first."""
    notes: list[str] = field(default_factory=list)
    """Problems met while reading (an unreadable summary or eval file), to be told to the user."""

    @property
    def title(self) -> str:
        """``<algo> <task>`` from the summary, else the directory's name."""
        name = f"{self.summary.get('algo', '')} {self.summary.get('task', '')}".strip()
        return name or self.run_dir.name

    def iteration_label(self) -> str:
        """The x label of per-iteration plots, with the env steps of one iteration when known."""
        iterations = self.summary.get("iterations") or []
        if iterations and iterations[-1].get("env_steps"):
            return f"iteration ({iterations[-1]['env_steps']:,} env steps each)"
        return "iteration"


def smooth(values: list[float], window: int | None = None) -> list[float]:
    """Trailing mean over ``window`` points (default: a twentieth of the points, at least 1; the first
    points average what exists so far). Non-finite values are skipped within a window (NaN when a window
    holds none)."""
    if window is None:
        window = max(1, len(values) // 20)
    finite = [v if math.isfinite(v) else 0.0 for v in values]
    sums, counts = [0.0], [0]  # prefix sums: linear in the points whatever the window
    for v, f in zip(values, finite):
        sums.append(sums[-1] + f)
        counts.append(counts[-1] + math.isfinite(v))
    out = []
    for i in range(1, len(values) + 1):
        start = max(0, i - window)
        count = counts[i] - counts[start]
        out.append((sums[i] - sums[start]) / count if count else math.nan)
    return out


@cold_path
def read_scalars(run_dir: str | os.PathLike) -> Scalars:
    """Tag -> [(step, value)] of every scalar in ``<run_dir>/tensorboard``, sorted by step (empty without
    events). A step logged twice (a resumed run's repeated iteration) keeps the newest file's value."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    folder = Path(run_dir) / TENSORBOARD_DIR_NAME
    if not folder.is_dir():
        return {}
    by_step: dict[str, dict[int, float]] = {}
    for events in sorted(folder.rglob("events.out.tfevents.*"), key=lambda p: (p.stat().st_mtime, p.name)):
        accumulator = EventAccumulator(str(events), size_guidance={"scalars": 0})
        accumulator.Reload()
        for tag in accumulator.Tags().get("scalars", []):
            by_step.setdefault(tag, {}).update((e.step, e.value) for e in accumulator.Scalars(tag))
    return {tag: sorted(points.items()) for tag, points in by_step.items()}


@cold_path
def read_run(run_dir: str | os.PathLike) -> RunInputs:
    """The scalars, summary and newest evaluations of ``run_dir``; FileNotFoundError when it is not a
    directory. An unreadable summary or eval file becomes a note, not an error."""
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    if not run_dir.is_dir():
        raise FileNotFoundError(f"{run_dir} is a file, not a run directory")
    notes: list[str] = []
    summary: dict[str, Any] = {}
    path = run_dir / SUMMARY_FILE_NAME
    if path.is_file():
        try:
            summary = json.loads(path.read_text())
        except OSError as err:
            notes.append(f"{path} cannot be read: {err}; plotting without it")
        except ValueError as err:
            notes.append(f"{path}: not valid JSON (empty or truncated): {err}; plotting without it")
    return RunInputs(run_dir, read_scalars(run_dir), summary, _read_evals(run_dir, notes), notes)


def _read_evals(run_dir: Path, notes: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """(label, result) of the newest ``EVAL_FILES_COMPARED`` readable ``eval/eval_*.json``, oldest first."""
    from trainrt.runner.evaluate import EVAL_DIR_NAME, ONNX_EVAL_PREFIX

    def iteration(path: Path) -> tuple[int, str]:
        digits = path.stem.rsplit("_", 1)[-1]
        return (int(digits) if digits.isdigit() else -1, path.name)

    found = []
    for file in sorted((run_dir / EVAL_DIR_NAME).glob("eval_*.json"), key=iteration):
        try:
            result = json.loads(file.read_text())
            if not any(key in result for key in ("commands", "tracking", "scenarios")):
                raise KeyError("no commands, tracking or scenarios")
        except (OSError, ValueError, KeyError) as err:
            notes.append(f"{file}: unreadable evaluation ({type(err).__name__}: {err}); left out of eval.png")
            continue
        onnx = "ONNX " if file.name.startswith(ONNX_EVAL_PREFIX) else ""
        label = f"{onnx}iteration {result['iteration']}" if result.get("iteration") is not None else file.stem
        found.append((label, result))
    return found[-EVAL_FILES_COMPARED:]


# --- training series ------------------------------------------------------------------------------------------


def series(scalars: Scalars, tag: str, label: str | None = None) -> Series | None:
    """The scalar ``tag`` as a ``Series`` (None when it was never logged)."""
    points = scalars.get(tag)
    if not points:
        return None
    return Series(label or tag, [float(s) for s, _ in points], [v for _, v in points])


def _tail(name: str, prefix: str) -> str:
    return name[len(prefix) :]


def episode_series(scalars: Scalars) -> dict[str, Series | None]:
    """``length`` and ``return`` of the episodes finished between log points (the collector's
    ``Train/*``; the env's ``Episode/length`` when the collector's is missing: they count the same episodes)."""
    length = series(scalars, "Train/mean_episode_length", "episode length (control steps)") or series(
        scalars, "Episode/length", "episode length (control steps)"
    )
    return {"length": length, "return": series(scalars, "Train/mean_reward", "episode return")}


def reward_series(scalars: Scalars) -> tuple[Series | None, list[Series]]:
    """(total, terms): each ``Episode/rew_<term>`` (mean per-episode return of the term) and their sum at the
    log points where every term was logged (the episode return, term by term)."""
    terms = [
        Series(_tail(tag, "Episode/rew_"), [float(s) for s, _ in points], [v for _, v in points])
        for tag, points in sorted(scalars.items())
        if tag.startswith("Episode/rew_") and points
    ]
    if not terms:
        return None, []
    common = sorted(set.intersection(*(set(t.x) for t in terms)))
    values = [dict(zip(t.x, t.y)) for t in terms]
    total = Series("total (sum of terms)", common, [math.fsum(v[x] for v in values) for x in common])
    return total, terms


def recent_means(terms: list[Series], fraction: float = 0.1) -> list[tuple[str, float]]:
    """Each term's mean over its last ``fraction`` of points (at least one), largest magnitude first."""
    means = []
    for term in terms:
        last = term.y[-max(1, math.ceil(len(term.y) * fraction)) :]
        means.append((term.label, math.fsum(last) / len(last)))
    return sorted(means, key=lambda item: -abs(item[1]))


METRIC_UNITS = {
    "lin_vel_error_xy": "m/s",
    "ang_vel_error_z": "rad/s",
    "root_height": "m",
    "body_pos_error": "m",
    "anchor_pos_error": "m",
    "anchor_ori_error": "rad",
    "joint_pos_error": "rad",
    "sampling_entropy": "1 = uniform",
}
"""Units of the shipped tasks' metrics (a metric not listed is drawn without one)."""


def metric_label(name: str) -> str:
    """``name (unit)`` for a metric with a known unit, else ``name``."""
    unit = METRIC_UNITS.get(name)
    return f"{name} ({unit})" if unit else name


def metric_series(scalars: Scalars) -> list[Series]:
    """The task's ``Metrics/<name>`` (per-episode mean of each metric, e.g. velocity-tracking or body
    position errors), errors first."""
    found = [
        Series(metric_label(_tail(tag, "Metrics/")), [float(s) for s, _ in points], [v for _, v in points])
        for tag, points in sorted(scalars.items())
        if tag.startswith("Metrics/") and points
    ]
    return sorted(found, key=lambda s: "error" not in s.label)


def termination_series(scalars: Scalars) -> tuple[list[Series], Series | None]:
    """(each ``Episode/term_<name>``: the fraction of finished episodes the term ended, episodes finished
    per log point). Terms may end an episode together, so the fractions can sum to more than 1."""
    terms = [
        Series(_tail(tag, "Episode/term_"), [float(s) for s, _ in points], [v for _, v in points])
        for tag, points in sorted(scalars.items())
        if tag.startswith("Episode/term_") and points
    ]
    finished = series(scalars, "Episode/num_finished", "episodes finished") or series(
        scalars, "Train/num_episodes", "episodes finished"
    )
    return terms, finished


def loss_series(scalars: Scalars) -> list[Series]:
    """Every ``Loss/<name>`` the learner reported."""
    return [
        Series(_tail(tag, "Loss/"), [float(s) for s, _ in points], [v for _, v in points])
        for tag, points in sorted(scalars.items())
        if tag.startswith("Loss/") and points
    ]


def throughput_series(summary: dict[str, Any], scalars: Scalars) -> dict[str, Series | None]:
    """``rate`` (env steps/s), ``wall`` / ``collect`` / ``learn`` (seconds per iteration) and ``steps``
    (cumulative env steps against training wall-clock seconds): from every iteration's timing in
    ``run_summary.json``, else from the ``Perf/*`` scalars of the log points."""
    iterations = summary.get("iterations") or []
    if iterations:
        x = [float(t["iteration"]) for t in iterations]
        walls = [float(t["wall_time_sec"]) for t in iterations]
        rate = [t["env_steps"] / w if w > 0 else math.nan for t, w in zip(iterations, walls)]
        elapsed, total, clock, steps = 0.0, 0, [], []
        for timing, wall in zip(iterations, walls):
            elapsed += wall
            total += timing["env_steps"]
            clock.append(elapsed)
            steps.append(float(total))
        return {
            "rate": Series("env steps/s", x, rate),
            "wall": Series("iteration (wall)", x, walls),
            "collect": Series("collect", x, [float(t.get("collect_time_sec", math.nan)) for t in iterations]),
            "learn": Series("learn", x, [float(t.get("learn_time_sec", math.nan)) for t in iterations]),
            "steps": Series("env steps", clock, steps),
        }
    return {
        "rate": series(scalars, "Perf/env_steps_per_sec", "env steps/s"),
        "wall": series(scalars, "Perf/iteration_time_sec", "iteration (wall)"),
        "collect": series(scalars, "Perf/collect_time_sec", "collect"),
        "learn": series(scalars, "Perf/learn_time_sec", "learn"),
        "steps": None,
    }


# --- evaluation series ---------------------------------------------------------------------------------------


WALK_BARS = (
    ("failed_fraction", "fell (fraction of envs)"),
    ("lin_vel_error_xy", "linear velocity error (m/s)"),
    ("ang_vel_error_z", "yaw-rate error (rad/s)"),
)
"""The walk evaluation's per-command bars: result key, panel title."""

WALK_AXES = (("lin_vel_x", "mean_lin_vel_x", "vx"), ("lin_vel_y", "mean_lin_vel_y", "vy"),
             ("ang_vel_z", "mean_ang_vel_z", "wz"))  # fmt: skip
"""The walk command's axes: command key, achieved-velocity key, short name."""


def walk_eval_bars(evals: list[tuple[str, dict[str, Any]]], key: str) -> tuple[list[str], list[Series]]:
    """(commands, one series per evaluation): ``key`` per command, NaN where an evaluation lacks it."""
    commands: list[str] = []
    for _, result in evals:
        commands += [name for name in result.get("commands", {}) if name not in commands]
    drawn = []
    for label, result in evals:
        rows = result.get("commands", {})
        values = [float(rows[c].get(key, math.nan)) if c in rows else math.nan for c in commands]
        drawn.append(Series(label, list(range(len(commands))), values))
    return commands, drawn


def walk_eval_tracking(
    result: dict[str, Any],
) -> tuple[list[str], dict[str, tuple[list[float], list[float]]]]:
    """(commands, short axis name -> (commanded, achieved mean) per command) of one walk evaluation."""
    rows = result["commands"]
    names = list(rows)
    return names, {
        short: (
            [float(rows[c]["command"][commanded]) for c in names],
            [float(rows[c].get(achieved, math.nan)) for c in names],
        )
        for commanded, achieved, short in WALK_AXES
    }


TRACKING_ERRORS = ("body_pos_error", "anchor_pos_error", "anchor_ori_error", "joint_pos_error")


def tracking_eval_per_second(result: dict[str, Any]) -> dict[str, Series] | None:
    """Series over clip time (s) of one tracking evaluation with per-second results (``per_second`` of its
    ``tracking`` row), None without them: ``running`` (fraction of envs still tracking; a step from each
    second's start, with the clip's end added) and each error (at each second's middle, the last second
    cut at the clip's end; NaN where no env was tracking)."""
    bins = result.get("tracking", {}).get("per_second")
    if not bins or not bins.get("t_s"):
        return None
    starts = [float(t) for t in bins["t_s"]]
    width = starts[1] - starts[0] if len(starts) > 1 else 1.0
    clip = result.get("clip", {})
    end = (
        clip["num_frames"] / clip["fps"] if clip.get("num_frames") and clip.get("fps") else starts[-1] + width
    )
    running = [_float(v) for v in bins["running_fraction"]]
    out = {
        "running": Series(
            "still tracking (fraction of envs)", [*starts, max(end, starts[-1])], [*running, running[-1]]
        )
    }
    middles = [(t + min(t + width, max(end, t))) / 2 for t in starts]
    for name in TRACKING_ERRORS:
        if name in bins:
            out[name] = Series(metric_label(name), middles, [_float(v) for v in bins[name]])
    return out


def _float(value: Any) -> float:
    """``value`` as a float; None (JSON's stand-in for "no sample") as NaN."""
    return math.nan if value is None else float(value)


def tracking_eval_bars(evals: list[tuple[str, dict[str, Any]]]) -> dict[str, list[tuple[str, float]]]:
    """Result key -> (evaluation label, whole-clip value) of the tracking evaluations."""
    keys = ("completed_fraction", "failed_fraction", *TRACKING_ERRORS)
    return {
        key: [(label, float(result["tracking"].get(key, math.nan))) for label, result in evals]
        for key in keys
    }


def scenario_eval_bars(result: dict[str, Any]) -> tuple[list[str], dict[str, list[float]]]:
    """(scenarios, metric -> value per scenario) of a generic evaluation (``{"scenarios": ...}``)."""
    from trainrt.runner.evaluate import ROW_BOOKKEEPING

    rows = result["scenarios"]
    names = list(rows)
    first = next(iter(rows.values()), {})
    keys = ["failed_fraction", *(k for k, v in first.items() if k not in ROW_BOOKKEEPING and _number(v))]
    return names, {k: [float(rows[n].get(k, math.nan)) for n in names] for k in keys}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
