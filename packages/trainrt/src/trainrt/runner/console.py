"""Console output: a compact line per iteration, the full block every ``training.log_every``, config listings."""

from __future__ import annotations

import json
from collections.abc import Mapping

from pydantic import BaseModel

from trainrt.hotpath import cold_path

BLOCK_WIDTH = 78
LABEL_WIDTH = 34


@cold_path
def progress_bar(done: int, total: int, width: int = 40) -> str:
    """``[#########---------]  45/160  28.1%`` for ``done`` of ``total`` iterations."""
    total = max(total, 1)
    done = min(max(done, 0), total)
    filled = round(width * done / total)
    digits = len(str(total))
    return f"[{'#' * filled}{'-' * (width - filled)}] {done:>{digits}}/{total} {100.0 * done / total:5.1f}%"


@cold_path
def format_duration(seconds: float) -> str:
    """``1h02m03s`` / ``2m03s`` / ``4.2s`` for a duration in seconds."""
    if seconds < 60.0:
        return f"{seconds:.1f}s"
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"


@cold_path
def format_iteration_block(
    *,
    title: str,
    iteration: int,
    max_iterations: int,
    env_steps_per_sec: float,
    collect_time_sec: float,
    learn_time_sec: float,
    wall_time_sec: float,
    total_env_steps: int,
    elapsed_sec: float,
    eta_sec: float,
    losses: Mapping[str, float],
    episode: Mapping[str, float],
) -> str:
    """One iteration's console block: throughput, time split, losses, episode statistics, ETA, progress."""
    rows: list[tuple[str, str]] = [
        ("Throughput", f"{env_steps_per_sec:,.0f} env steps/s"),
        (
            "Iteration time",
            f"{wall_time_sec:.3f}s (collect {collect_time_sec:.3f}s, learn {learn_time_sec:.3f}s)",
        ),
    ]
    rows += [(f"Loss/{name}", f"{value:.4f}") for name, value in losses.items()]
    rows += [(name, f"{value:.4f}") for name, value in episode.items()]
    rows += [
        ("Total env steps", f"{total_env_steps:,}"),
        ("Elapsed", format_duration(elapsed_sec)),
        ("ETA", format_duration(eta_sec)),
    ]
    header = f" {title}: iteration {iteration}/{max_iterations} "
    lines = ["#" * BLOCK_WIDTH, header.center(BLOCK_WIDTH, "#"), ""]
    lines += [f"{label + ':':>{LABEL_WIDTH}} {value}" for label, value in rows]
    lines += ["", progress_bar(iteration, max_iterations, width=BLOCK_WIDTH - 20)]
    return "\n".join(lines)


@cold_path
def format_iteration_line(
    *,
    iteration: int,
    max_iterations: int,
    env_steps_per_sec: float,
    wall_time_sec: float,
    episode_length: float | None,
    episode_return: float | None,
    eta_sec: float,
) -> str:
    """One compact line per iteration: progress, episode length and return so far, throughput, ETA."""
    digits = len(str(max_iterations))
    length = f"{episode_length:7.1f}" if episode_length is not None else "      -"
    ret = f"{episode_return:9.3f}" if episode_return is not None else "        -"
    return (
        f"it {iteration:>{digits}}/{max_iterations}  ep_len {length}  return {ret}  "
        f"{env_steps_per_sec:>10,.0f} steps/s  {wall_time_sec:6.3f}s/it  ETA {format_duration(eta_sec)}"
    )


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
