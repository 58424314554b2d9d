"""What a training run prints: the progress line, the compact block every ``training.log_every``, numbers.

The block lists what tells whether the task is being learned before how the learner is doing: episodes
(count, length, return), the task's own metrics (velocity or tracking errors: the ``Metrics/`` its metric
terms publish), why episodes ended, the curriculum, then the losses and where the time went. ``BLOCK_ROWS``
is the one home of that order, by scalar-name prefix; per-term rewards stay in TensorBoard (and ``trainrt
report``). Every number is one the runner already read for logging: formatting reads no device value.

Counts print as integers (``1,000``, not ``1000.0000``); other values with four significant digits.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel

from trainrt.hotpath import cold_path

BLOCK_WIDTH = 80
"""Characters of a block row before it wraps (continuation rows are indented under the values)."""
LABEL_WIDTH = 11
SIGNIFICANT_DIGITS = 4


@dataclass(frozen=True)
class BlockRow:
    """One row of the block: ``label`` then every scalar whose name starts with one of ``prefixes``.

    Attributes:
        label: the row's label.
        prefixes: scalar-name prefixes, stripped when shown (``Metrics/lin_vel_error_xy`` -> ``lin_vel_error_xy``).
        percent: show the values as percentages (fractions of episodes).
        hidden: name parts left out of the row: a name with a part that starts with one of them is not shown
            (``level_`` hides a curriculum's per-level shares and ``mean_level/`` its per-type means, which
            TensorBoard and ``run_summary.json`` keep; the row shows the overall mean).
    """

    label: str
    prefixes: tuple[str, ...]
    percent: bool = False
    hidden: tuple[str, ...] = ()


BLOCK_ROWS: tuple[BlockRow, ...] = (
    BlockRow("metrics", ("Metrics/",)),
    BlockRow("ended by", ("Episode/term_",), percent=True),
    BlockRow("curriculum", ("Curriculum/",), hidden=("level_", "mean_level/")),
)
"""The episode rows after ``episodes`` (count, length, return), in the order the block shows them."""


@cold_path
def format_number(value: float | int) -> str:
    """``1,000`` for a whole number, else four significant digits without trailing zeros (``0.0162``,
    ``9.315``, ``-31.58``, ``1,235``), scientific below 1e-3; ``nan`` / ``inf`` as such."""
    value = float(value)
    if not math.isfinite(value):
        return str(value)
    if value.is_integer():
        return f"{int(value):,}"
    magnitude = abs(value)
    if magnitude < 1e-3:
        return f"{value:.{SIGNIFICANT_DIGITS - 1}e}"
    decimals = max(SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(magnitude)), 0)
    text = f"{value:,.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


@cold_path
def format_duration(seconds: float) -> str:
    """``1h02m03s`` / ``2m03s`` / ``4.2s`` for a duration in seconds (``-`` when unknown)."""
    if not math.isfinite(seconds):
        return "-"
    if seconds < 60.0:
        return f"{max(seconds, 0.0):.1f}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


@cold_path
def progress_bar(done: int, total: int, width: int = 40) -> str:
    """``[#########---------]  45/160  28.1%`` for ``done`` of ``total`` iterations."""
    total = max(total, 1)
    done = min(max(done, 0), total)
    filled = round(width * done / total)
    digits = len(str(total))
    return f"[{'#' * filled}{'-' * (width - filled)}] {done:>{digits}}/{total} {100.0 * done / total:5.1f}%"


@dataclass(frozen=True)
class Progress:
    """Where a run stands, as the progress line and the block's header show it.

    Attributes:
        title: ``<algo> <task>``.
        iteration: iterations completed (of the whole run, a resumed one included).
        max_iterations: ``algo.max_iterations``.
        env_steps_per_sec: the smoothed rate, env steps per second of wall time (0 before it is known).
        elapsed_sec: seconds since the run's set-up began.
        eta_sec: seconds left (``inf`` while unknown).
        eta_by_time_limit: the ETA is that of ``training.time_limit_sec`` (it ends before the iterations).
        episode_length: mean length of the episodes of the last block (None before any finished).
        episode_return: their mean return.
    """

    title: str
    iteration: int
    max_iterations: int
    env_steps_per_sec: float
    elapsed_sec: float
    eta_sec: float
    eta_by_time_limit: bool = False
    episode_length: float | None = None
    episode_return: float | None = None


@cold_path
def format_progress_line(progress: Progress, bar_width: int = 20) -> str:
    """One line: bar, iterations, the one ETA, episode length and return, rate, elapsed time, title (what
    matters first: a narrow terminal cuts the end)."""
    eta = format_duration(progress.eta_sec) + (" (time limit)" if progress.eta_by_time_limit else "")
    parts = [progress_bar(progress.iteration, progress.max_iterations, width=bar_width), f"ETA {eta}"]
    if progress.episode_length is not None:
        parts.append(f"ep_len {format_number(round(progress.episode_length, 1))}")
    if progress.episode_return is not None:
        parts.append(f"return {format_number(progress.episode_return)}")
    if progress.env_steps_per_sec > 0:
        parts.append(f"{progress.env_steps_per_sec:,.0f} steps/s")
    parts += [f"elapsed {format_duration(progress.elapsed_sec)}", progress.title]
    return "  ".join(parts)


@cold_path
def format_iteration_block(
    progress: Progress,
    *,
    episode: Mapping[str, float],
    losses: Mapping[str, float],
    iteration_sec: float,
    collect_sec: float,
    learn_sec: float,
    total_env_steps: int,
) -> str:
    """The compact block of one iteration: a header, then one row per concern (see ``BLOCK_ROWS``)."""
    eta = format_duration(progress.eta_sec) + (" (time limit)" if progress.eta_by_time_limit else "")
    header = (
        f"-- {progress.title}  iteration {progress.iteration}/{progress.max_iterations}"
        f"  {progress.env_steps_per_sec:,.0f} env steps/s  elapsed {format_duration(progress.elapsed_sec)}"
        f"  ETA {eta} "
    )
    rows = [header.ljust(BLOCK_WIDTH, "-")]
    rows += _wrapped("episodes", _episode_items(episode))
    for row in BLOCK_ROWS:
        items = [
            f"{name[len(prefix) :]} {_value(value, row.percent)}"
            for prefix in row.prefixes
            for name, value in episode.items()
            if name.startswith(prefix) and not any(f"/{part}" in f"/{name}" for part in row.hidden)
        ]
        rows += _wrapped(row.label, items)
    rows += _wrapped("losses", [f"{name} {format_number(value)}" for name, value in losses.items()])
    rows += _wrapped(
        "time",
        [
            f"{iteration_sec:.3f}s/it (collect {collect_sec:.3f}s, learn {learn_sec:.3f}s)",
            f"{total_env_steps:,} env steps",
        ],
    )
    return "\n".join(rows)


def _episode_items(episode: Mapping[str, float]) -> list[str]:
    """``12 finished``, ``length 68.2``, ``return -1.23`` (and blown-up physics resets, non-finite or too fast, when there were any)."""
    finished = episode.get("Episode/num_finished", episode.get("Train/num_episodes"))
    items = [] if finished is None else [f"{format_number(finished)} finished"]
    length = episode.get("Episode/length", episode.get("Train/mean_episode_length"))
    if length is not None:
        items.append(f"length {format_number(length)}")
    if "Train/mean_reward" in episode:
        items.append(f"return {format_number(episode['Train/mean_reward'])}")
    if episode.get("Diagnostics/nonfinite_resets"):
        items.append(f"blown-up resets {format_number(episode['Diagnostics/nonfinite_resets'])} in all")
    return items


def _value(value: float, percent: bool) -> str:
    return f"{100.0 * value:.0f}%" if percent else format_number(value)


def _wrapped(label: str, items: list[str]) -> list[str]:
    """``label`` then ``items`` two spaces apart, wrapped at ``BLOCK_WIDTH`` (nothing when there are none)."""
    if not items:
        return []
    rows, row = [], f"{label:<{LABEL_WIDTH}}"
    for item in items:
        if len(row) + len(item) > BLOCK_WIDTH and len(row) > LABEL_WIDTH:
            rows.append(row.rstrip())
            row = " " * LABEL_WIDTH
        row += item + "  "
    rows.append(row.rstrip())
    return rows


def _config_rows(model: BaseModel, prefix: str) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        key = f"{prefix}{name}"
        if isinstance(value, BaseModel):
            rows += _config_rows(value, key + ".")
        else:
            text = json.dumps(value.model_dump() if isinstance(value, BaseModel) else _jsonable(value))
            rows.append((key, text, info.description or ""))
    return rows


def _jsonable(value: object) -> object:
    if isinstance(value, tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, float | int | str | bool | list) or value is None:
        return value
    return str(value)


@cold_path
def format_config_listing(cfg: BaseModel) -> str:
    """Every key of a config as ``key = value  # description``, dotted as command-line overrides take them."""
    rows = _config_rows(cfg, "")
    width = max(len(k) + len(v) for k, v, _ in rows) + 3
    return "\n".join(f"{f'{k} = {v}':<{width}}  # {d}" if d else f"{k} = {v}" for k, v, d in rows)
