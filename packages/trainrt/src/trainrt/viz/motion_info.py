"""``trainrt motion info``: what a clip holds and whether the robot can follow it.

A clip is checked after the loader's joint mapping, against the model's joint limits and against the
action bounds of the tracking task's action terms (the joint targets a policy with actions in [-1, 1]
can reach: ``clamp(offset + scale * action, lower, upper)``, read from the env's action metadata).
"""

from __future__ import annotations

import contextlib
import io
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainrt.hotpath import cold_path

LIMIT_TOLERANCE_RAD = 1e-6
_WORST_SHOWN = 5


def _check_bounds(
    joint_pos: np.ndarray, names: tuple[str, ...], lower: np.ndarray, upper: np.ndarray
) -> dict[str, Any]:
    """Frames outside [lower, upper] (J,) of ``joint_pos`` (T, J) and the worst joints by excess."""
    excess = np.maximum(lower[None] - joint_pos, joint_pos - upper[None])  # (T, J), > 0 outside
    outside = excess > LIMIT_TOLERANCE_RAD
    per_joint = excess.max(axis=0)
    order = np.argsort(-per_joint)
    worst = [
        {
            "joint": names[j],
            "max_excess_rad": round(float(per_joint[j]), 5),
            "frames_outside": int(outside[:, j].sum()),
            "first_frame": int(np.argmax(outside[:, j])),
        }
        for j in order[:_WORST_SHOWN]
        if per_joint[j] > LIMIT_TOLERANCE_RAD
    ]
    return {
        "within": not bool(outside.any()),
        "frames_outside": int(outside.any(axis=1).sum()),
        "worst_joints": worst,
    }


@cold_path
def action_target_bounds(action_meta: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """Joint name -> the (lower, upper) targets that actions in [-1, 1] reach, from ``env.action_meta()``."""
    bounds: dict[str, tuple[float, float]] = {}
    for name, term in action_meta.get("terms", {}).items():
        needed = ("joint_names", "action_offset", "action_scale", "target_lower", "target_upper")
        missing = [k for k in needed if k not in term]
        if missing:
            raise ValueError(f"action term {name!r} does not describe {missing}: its bounds are unknown")
        for joint, offset, scale, low, high in zip(*(term[k] for k in needed)):
            reach = abs(float(scale))
            bounds[joint] = (max(float(offset) - reach, float(low)), min(float(offset) + reach, float(high)))
    return bounds


@cold_path
def motion_info(
    clip_path: str | os.PathLike, *, algo: str = "sac", task: str = "g1_motion_tracking"
) -> dict[str, Any]:
    """Frames, fps, duration, joints of a clip and whether every frame lies within the joint limits and the
    action bounds of ``task`` (built as a one-env CPU MuJoCo env of its CPU-demo config)."""
    from trainrt.config import cpu_demo_preset
    from trainrt.motion import load_motion
    from trainrt.motion.loader import resampled_frame_count
    from trainrt.robots import G1
    from trainrt.runner.build import build_env

    with warnings.catch_warnings(
        record=True
    ) as caught:  # reported as lines of the info, not as Python warnings
        warnings.simplefilter("always")
        # a bad file fails before the env; names as the tracking task takes them (a joint the G1 lacks is refused)
        clip = load_motion(clip_path, G1.model(), dtype=torch.float64, strict_names=True)
    cfg = cpu_demo_preset(algo, task, "mujoco")
    with contextlib.redirect_stdout(io.StringIO()):  # the env's own start-up lines are about its own clip
        env = build_env(cfg, num_envs=1)
    names = tuple(clip.joint_names)
    joint_pos = clip.joint_pos.numpy()
    limits = env.robot.joint_pos_limits.double().cpu().numpy()
    order = {n: i for i, n in enumerate(env.robot.joint_names)}
    rows = [order[n] for n in names]
    bounds = action_target_bounds(env.action_meta())
    uncontrolled = [n for n in names if n not in bounds]
    action_lower = np.array([bounds.get(n, (-np.inf, np.inf))[0] for n in names])
    action_upper = np.array([bounds.get(n, (-np.inf, np.inf))[1] for n in names])
    return {
        "clip": str(Path(clip_path)),
        "format": clip.source_format,
        "frames": clip.num_frames,
        "fps": clip.fps,
        "duration_s": round(clip.duration_s, 4),
        # The task resamples the clip to its control rate: eval's horizon and play's frame counter count these.
        "control_rate_hz": round(1.0 / float(env.step_dt), 6),
        "control_frames": resampled_frame_count(clip.num_frames, clip.fps, 1.0 / float(env.step_dt)),
        "num_joints": len(names),
        "joints": list(names),
        "root_height_m": [
            round(float(clip.root_pos_w[:, 2].min()), 4),
            round(float(clip.root_pos_w[:, 2].max()), 4),
        ],
        "joint_limits": _check_bounds(joint_pos, names, limits[rows, 0], limits[rows, 1]),
        "action_bounds": {
            "task": task,
            "joints_without_action": uncontrolled,
            **_check_bounds(joint_pos, names, action_lower, action_upper),
        },
        "warnings": [str(w.message) for w in caught],
    }


@cold_path
def format_motion_info(info: dict[str, Any]) -> str:
    """``motion_info`` as a few readable lines."""

    def verdict(check: dict[str, Any]) -> str:
        if check["within"]:
            return "every frame within"
        worst = ", ".join(
            f"{w['joint']} by {w['max_excess_rad']:.3f} rad ({w['frames_outside']} frames from {w['first_frame']})"
            for w in check["worst_joints"]
        )
        return f"{check['frames_outside']} frames outside: {worst}"

    lines = [
        f"clip:          {info['clip']} ({info['format']} format)",
        f"frames:        {info['frames']} at {info['fps']:g} fps = {info['duration_s']:.2f} s; "
        f"{info['control_frames']} at the task's {info['control_rate_hz']:g} Hz control rate",
        f"root height:   {info['root_height_m'][0]:.3f} .. {info['root_height_m'][1]:.3f} m",
        f"joints ({info['num_joints']}): {', '.join(info['joints'])}",
        f"joint limits:  {verdict(info['joint_limits'])}",
        f"action bounds: {verdict(info['action_bounds'])} ({info['action_bounds']['task']})",
    ]
    if info["action_bounds"]["joints_without_action"]:
        lines.append(f"  joints no action moves: {info['action_bounds']['joints_without_action']}")
    lines.extend(f"warning:       {message}" for message in info.get("warnings", ()))
    return "\n".join(lines)
