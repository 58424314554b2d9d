"""The report's ``eval.png``: ``trainrt eval`` results as charts.

A walk evaluation: per fixed command, the fraction of envs that fell and the velocity-tracking errors (the
newest evaluations side by side), and the commanded against the achieved velocities of the newest. A
tracking evaluation: with per-second results, the fraction of envs still tracking and each error over the
clip's seconds; the whole-clip numbers of the newest evaluations as bars. Any other task's: a bar per
scenario and metric.
"""

from __future__ import annotations

import math
from typing import Any

from trainrt.viz.report.data import (
    TRACKING_ERRORS,
    WALK_BARS,
    RunInputs,
    metric_label,
    scenario_eval_bars,
    tracking_eval_bars,
    tracking_eval_per_second,
    walk_eval_bars,
    walk_eval_tracking,
)
from trainrt.viz.report.draw import grid, note, style

AXIS_COLORS = {"vx": "tab:blue", "vy": "tab:orange", "wz": "tab:green"}


def eval_figure(plt: Any, run: RunInputs) -> Any:
    """``eval.png`` of the newest evaluations of one kind (the newest's kind), or why there is none."""
    if not run.evals:
        return "no trainrt eval results in eval/ (run `trainrt eval RUN_DIR` first)"
    newest = run.evals[-1][1]
    kind = next(k for k in ("commands", "tracking", "scenarios") if k in newest)
    evals = [(label, result) for label, result in run.evals if kind in result]
    heading = (
        f"evaluation: {newest.get('algo', '')} {newest.get('task', '')} on {newest.get('sim', '?')}".strip()
    )
    if kind == "commands":
        return _walk(plt, evals, heading + f", {newest.get('horizon_s', 0):.1f} s per command")
    if kind == "tracking":
        return _tracking(plt, evals, heading)
    return _scenarios(plt, evals[-1], heading)


def _grouped_bars(
    axis: Any, names: list[str], groups: list[tuple[str, list[float]]], colors: list[str] | None = None
) -> list[list[float]]:
    """One bar per (name, group), groups side by side; a NaN draws no bar. Returns each group's bar centres."""
    width = 0.8 / max(1, len(groups))
    centres = []
    for k, (label, values) in enumerate(groups):
        x = [i + (k - (len(groups) - 1) / 2) * width for i in range(len(names))]
        shown = [v if math.isfinite(v) else 0.0 for v in values]
        axis.bar(x, shown, width=width * 0.95, label=label, color=colors[k] if colors else None)
        centres.append(x)
    axis.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=7)
    return centres


def _walk(plt: Any, evals: list[tuple[str, dict[str, Any]]], heading: str) -> Any:
    figure, axes = grid(plt, 4, heading, cols=2, size=(5.8, 3.4))
    for axis, (key, title) in zip(axes, WALK_BARS):
        commands, drawn = walk_eval_bars(evals, key)
        _grouped_bars(axis, commands, [(s.label, s.y) for s in drawn])
        style(axis, title)
        if key == "failed_fraction":
            axis.set_ylim(0, 1.05)
        if len(drawn) > 1:
            axis.legend(fontsize=7)
    label, newest = evals[-1]
    commands, axes_values = walk_eval_tracking(newest)
    achieved = axes[3]
    centres = _grouped_bars(
        achieved,
        commands,
        [(f"{short} achieved", got) for short, (_, got) in axes_values.items()],
        [AXIS_COLORS[short] for short in axes_values],
    )
    for k, (x, (wanted, _)) in enumerate(zip(centres, axes_values.values())):
        achieved.scatter(x, wanted, marker="_", s=120, linewidths=2, color="black",
                         label="commanded" if k == 0 else None, zorder=3)  # fmt: skip
    achieved.axhline(0.0, color="0.3", linewidth=0.8)
    achieved.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.24))
    style(achieved, f"commanded (black) and achieved mean velocity, {label}", ylabel="m/s, rad/s")
    return figure


def _tracking(plt: Any, evals: list[tuple[str, dict[str, Any]]], heading: str) -> Any:
    label, newest = evals[-1]
    clip = newest.get("clip", {})
    heading += f", clip {str(clip.get('motion_file', '?')).rsplit('/', 1)[-1]}"
    if clip.get("num_frames") and clip.get("fps"):
        heading += f" ({clip['num_frames'] / clip['fps']:.1f} s)"
    per_second = tracking_eval_per_second(newest)
    bars = tracking_eval_bars(evals)
    if per_second is None:
        heading += "\n(no per-second results in this evaluation: `trainrt eval` records them)"
        figure, axes = grid(plt, 2, heading, cols=2, size=(5.8, 3.4))
        _tracking_bars(axes, bars)
        return figure
    figure, axes = grid(plt, 4, heading, cols=2, size=(5.8, 3.4))
    running = per_second["running"]
    span = (0.0, running.x[-1])
    axes[0].step(running.x, running.y, where="post", color="tab:blue", linewidth=1.8)
    axes[0].set_xlim(*span)
    axes[0].set_ylim(-0.03, 1.05)
    tracking = newest["tracking"]
    whole = (
        f"whole clip: completed {tracking.get('completed_fraction', math.nan):.2f}, "
        f"fell {tracking.get('failed_fraction', math.nan):.2f}"
    )
    style(axes[0], f"{running.label}, {label}\n{whole}", "clip time (s)", "fraction")
    for axis, names, unit in ((axes[1], ("body_pos_error", "anchor_pos_error"), "m"),
                              (axes[2], ("anchor_ori_error", "joint_pos_error"), "rad")):  # fmt: skip
        drawn = [per_second[n] for n in names if n in per_second]
        for curve in drawn:
            axis.plot(curve.x, curve.y, marker="o", markersize=4, linewidth=1.6, label=curve.label)
        if drawn:
            axis.set_xlim(*span)
            axis.set_ylim(bottom=0)
            axis.legend(fontsize=7)
            style(axis, f"mean error over each second ({unit}), {label}", "clip time (s)", unit)
        else:
            note(axis, "no such errors in this evaluation")
    _tracking_bars([None, axes[3]], bars)
    return figure


def _tracking_bars(axes: list[Any], bars: dict[str, list[tuple[str, float]]]) -> None:
    """Whole-clip completion and errors of each evaluation: fractions on the first axis, errors on the second
    (None: not drawn)."""
    fractions, errors = axes
    labels = [label for label, _ in bars["completed_fraction"]]
    if fractions is not None:
        _grouped_bars(fractions, ["completed", "fell"],
                      [(label, [bars["completed_fraction"][k][1], bars["failed_fraction"][k][1]])
                       for k, label in enumerate(labels)])  # fmt: skip
        fractions.set_ylim(0, 1.05)
        style(fractions, "whole clip: fraction of envs")
        if len(labels) > 1:
            fractions.legend(fontsize=7)
    names = [metric_label(n) for n in TRACKING_ERRORS]
    _grouped_bars(
        errors, names, [(label, [bars[n][k][1] for n in TRACKING_ERRORS]) for k, label in enumerate(labels)]
    )
    style(errors, "whole clip: mean errors")
    if len(labels) > 1:
        errors.legend(fontsize=7)


def _scenarios(plt: Any, newest: tuple[str, dict[str, Any]], heading: str) -> Any:
    label, result = newest
    names, values = scenario_eval_bars(result)
    figure, axes = grid(plt, len(values), f"{heading}, {label}")
    for axis, (key, per_scenario) in zip(axes, values.items()):
        _grouped_bars(axis, names, [(label, per_scenario)])
        style(axis, "fell (fraction of envs)" if key == "failed_fraction" else metric_label(key))
    return figure
