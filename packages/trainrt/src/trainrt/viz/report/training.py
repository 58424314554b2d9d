"""The report's training figures: episodes, reward terms, task metrics, terminations, losses, throughput.

Each ``*_figure`` draws one PNG from ``RunInputs`` and returns the matplotlib figure, or a string saying why
there is nothing to draw (the report tells the user and goes on).
"""

from __future__ import annotations

import itertools
import math
from typing import Any

from trainrt.viz.report.data import (
    RunInputs,
    Series,
    episode_series,
    loss_series,
    metric_series,
    recent_means,
    reward_series,
    termination_series,
    throughput_series,
)
from trainrt.viz.report.draw import grid, log_scale_fits, note, style, trace

TOTAL_COLOR = "black"


def episode_figure(plt: Any, run: RunInputs) -> Any:
    """``episode.png``: mean episode length and return of the episodes finished between log points."""
    curves = episode_series(run.scalars)
    if not any(curves.values()):
        return "no episode has ended yet (no Train/mean_episode_length, Episode/length or Train/mean_reward)"
    figure, (length, ret) = grid(plt, 2, f"episodes: {run.title}", size=(5.6, 3.4))
    xlabel = run.iteration_label()
    for axis, key, ylabel in ((length, "length", "control steps"), (ret, "return", "return")):
        curve = curves[key]
        if curve is None:
            note(axis, f"no episode {key} logged")
            continue
        trace(axis, curve)
        style(axis, curve.label, xlabel, ylabel)
    return figure


def rewards_figure(plt: Any, run: RunInputs) -> Any:
    """``rewards.png``: the return's total, each reward term's mean episode return, and the terms' recent
    shares (a bar per term)."""
    total, terms = reward_series(run.scalars)
    if total is None:
        return "no episode has ended yet (no Episode/rew_* scalars)"
    figure, axes = grid(plt, len(terms) + 2, f"episode return per reward term: {run.title}", cols=4,
                        size=(3.6, 2.5))  # fmt: skip
    xlabel = run.iteration_label()
    trace(axes[0], total, color=TOTAL_COLOR, width=2.0)
    style(axes[0], "total (sum of the terms)", xlabel, "return")
    shares = recent_means(terms)
    names = [name for name, _ in shares][::-1]
    values = [value for _, value in shares][::-1]
    axes[1].barh(names, values, color=["tab:green" if v >= 0 else "tab:red" for v in values])
    axes[1].axvline(0.0, color="0.3", linewidth=0.8)
    style(axes[1], "each term, last 10% of points", "mean episode return")
    axes[1].tick_params(axis="y", labelsize=6)
    for axis, term in zip(axes[2:], terms):
        trace(axis, term, color="tab:green" if term.y[-1] >= 0 else "tab:red")
        style(axis, term.label, "iteration")
    return figure


def metrics_figure(plt: Any, run: RunInputs) -> Any:
    """``metrics.png``: the task's metrics (``Metrics/*``: e.g. velocity-tracking errors of a walk, body and
    anchor errors of tracking), per-episode means."""
    curves = metric_series(run.scalars)
    if not curves:
        return "the run logged no task metrics (no Metrics/* scalars: no episode has ended, or the task has none)"
    return _panel_per_curve(plt, run, curves, "task metrics (mean over each finished episode)", "tab:purple")


def terminations_figure(plt: Any, run: RunInputs) -> Any:
    """``terminations.png``: why episodes ended (fraction of finished episodes each term ended), and how many
    ended between log points."""
    terms, finished = termination_series(run.scalars)
    if not terms:
        return "no episode has ended yet (no Episode/term_* scalars)"
    figure, (why, count) = grid(plt, 2, f"why episodes end: {run.title}", size=(5.6, 3.4))
    for term in terms:
        trace(why, term, label=term.label)
    why.set_ylim(-0.03, 1.05)
    together = "\n(terms can end an episode together)" if len(terms) > 1 else ""
    style(
        why, f"fraction of finished episodes ended by each term{together}", run.iteration_label(), "fraction"
    )
    why.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
    if finished is None:
        note(count, "no episode counts logged")
    else:
        count.bar(finished.x, finished.y, width=_bar_width(finished.x), color="tab:gray")
        style(count, "episodes finished between log points", run.iteration_label(), "episodes")
    return figure


def losses_figure(plt: Any, run: RunInputs) -> Any:
    """``losses.png``: every loss and learner statistic (``Loss/*``)."""
    curves = loss_series(run.scalars)
    if not curves:
        return "no update has run yet (no Loss/* scalars)"
    return _panel_per_curve(plt, run, curves, "learner", "tab:blue", log_scale=True)


def throughput_figure(plt: Any, run: RunInputs) -> Any:
    """``throughput.png``: env steps/s per iteration, collect and learn seconds per iteration, and env steps
    against training wall-clock."""
    curves = throughput_series(run.summary, run.scalars)
    if curves["rate"] is None:
        return f"no iteration timings (no {run.run_dir.name}/run_summary.json iterations, no Perf/* scalars)"
    tail = run.summary.get("tail_env_steps_per_sec")
    envs = run.summary.get("num_envs")
    heading = f"throughput: {run.title}" + (f", {envs} envs" if envs else "")
    heading += f"; tail {tail:,.0f} env steps/s" if tail else ""
    figure, (rate, split, steps) = grid(plt, 3, heading, size=(4.6, 3.2))
    xlabel = "iteration"
    trace(rate, curves["rate"], color="tab:blue")
    if tail:
        rate.axhline(tail, color="0.3", linestyle="--", linewidth=1, label=f"tail {tail:,.0f}/s")
        rate.legend(fontsize=7)
    style(rate, "env steps/s", xlabel, "env steps/s")
    drawn = False
    for key, color in (("wall", "0.2"), ("collect", "tab:orange"), ("learn", "tab:green")):
        curve = curves[key]
        if curve is not None and any(math.isfinite(v) for v in curve.y):
            trace(split, curve, color=color, label=curve.label)
            drawn = True
    if drawn:
        split.set_ylim(bottom=0)
        split.legend(fontsize=7)
        style(split, "seconds per iteration", xlabel, "s")
    else:
        note(split, "no collect / learn timings")
    if curves["steps"] is None:
        note(steps, "no run_summary.json iterations: no wall-clock")
    else:
        steps.plot(curves["steps"].x, curves["steps"].y, color="tab:blue", linewidth=1.6)
        style(steps, "env steps against training time", "training wall-clock (s, no warm-up)", "env steps")
    return figure


def _panel_per_curve(
    plt: Any, run: RunInputs, curves: list[Series], heading: str, color: str, *, log_scale: bool = False
) -> Any:
    """A figure of one panel per curve, each drawn in ``color`` against the iteration; ``log_scale``: a log
    y axis on each panel whose values fit one (``log_scale_fits``)."""
    figure, axes = grid(plt, len(curves), f"{heading}: {run.title}")
    for axis, curve in zip(axes, curves):
        trace(axis, curve, color=color)
        if log_scale and log_scale_fits([curve]):
            axis.set_yscale("log")
        style(axis, curve.label, run.iteration_label())
    return figure


def _bar_width(x: list[float]) -> float:
    gaps = sorted(b - a for a, b in itertools.pairwise(x) if b > a)
    return 0.8 * gaps[len(gaps) // 2] if gaps else 0.8
