"""``trainrt report RUN_DIR``: PNG plots of a run from its TensorBoard scalars, ``run_summary.json`` and
``trainrt eval`` results.

Writes into ``<run_dir>/report/`` (``REPORT_FILES``): ``episode.png`` (episode length and return),
``rewards.png`` (the return's total, every reward term, each term's recent share), ``metrics.png`` (the task's
metrics: velocity-tracking errors of a walk, body and anchor errors of tracking), ``terminations.png`` (why
episodes end), ``losses.png``, ``throughput.png`` (env steps/s, collect and learn time per iteration, env
steps against wall-clock) and, with evaluation results in ``<run_dir>/eval/``, ``eval.png`` (per command of
a walk, per clip second of tracking). Curves logged every ``training.log_every`` iterations are drawn faint
with a trailing mean over them. A picture without data is left out and the report says why.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path

from trainrt.hotpath import cold_path
from trainrt.viz.report.data import SUMMARY_FILE_NAME, TENSORBOARD_DIR_NAME, read_run, read_scalars

REPORT_DIR_NAME = "report"


REPORT_FILES = ("episode.png", "rewards.png", "metrics.png", "terminations.png", "losses.png",
                "throughput.png", "eval.png")  # fmt: skip
"""Every file ``write_report`` writes, in order."""


@cold_path
def write_report(
    run_dir: str | os.PathLike,
    output: str | os.PathLike | None = None,
    *,
    log: Callable[[str], None] | None = None,
) -> list[Path]:
    """Write the run's PNGs (see the module docstring) and return their paths.

    Raises ``FileNotFoundError`` when ``run_dir`` is not a run directory, ``ValueError`` when it holds
    nothing to plot yet. What is left out, and an unreadable ``run_summary.json`` or eval file, is told to
    ``log`` (stderr by default), one line each.
    """
    from trainrt.viz.report.draw import pyplot, save

    run = read_run(run_dir)
    if not run.scalars and not run.summary.get("iterations"):
        raise ValueError(
            "; ".join(run.notes)
            or f"{run.run_dir} has no TensorBoard scalars ({TENSORBOARD_DIR_NAME}/) and no {SUMMARY_FILE_NAME} "
            "iterations: nothing to plot (train with training.tensorboard=true)"
        )
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    for line in run.notes:
        say(line)
    plt = pyplot()
    folder = Path(output) if output is not None else run.run_dir / REPORT_DIR_NAME
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, draw in zip(REPORT_FILES, _figures(), strict=True):
        figure = draw(plt, run)
        if isinstance(figure, str):
            say(f"{name} not written: {figure}")
            continue
        written.append(save(plt, figure, folder / name))
    return written


def _figures() -> list[Callable]:
    """The function drawing each of ``REPORT_FILES``, in the same order."""
    from trainrt.viz.report.evaluation import eval_figure
    from trainrt.viz.report.training import (
        episode_figure,
        losses_figure,
        metrics_figure,
        rewards_figure,
        terminations_figure,
        throughput_figure,
    )

    return [episode_figure, rewards_figure, metrics_figure, terminations_figure, losses_figure,
            throughput_figure, eval_figure]  # fmt: skip


__all__ = ["REPORT_DIR_NAME", "REPORT_FILES", "read_scalars", "write_report"]
