"""Consistency checks on a motion clip and their tolerances: stored velocities against how positions move (root
turn rate, root speed, joint speed), a BeyondMimic file's bodies against forward kinematics of its root and
joints, the bodies a clip names; and the warnings for a clip that loads but looks wrong (joint limits, a short
clip, the ground, ignored joints). ``trainrt.motion.loader`` runs them while it loads a clip (cold path)."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import mujoco
import numpy as np
import torch

from trainrt.hotpath import cold_path
from trainrt.mdp.math import quat_conjugate, quat_mul
from trainrt.motion.files import _name_list
from trainrt.motion.kinematics import _forward_kinematics, _ModelLayout, _rotate

JOINT_LIMIT_TOLERANCE_RAD = 0.1
"""Joint angles beyond a joint's range by more than this (rad, or m for slide joints) get a warning."""


class JointLimitWarning(UserWarning):
    """A motion's joint angles lie far outside the training model's joint limits."""


class IgnoredJointsWarning(UserWarning):
    """A motion has joints the training model lacks; their columns are not used."""


class GroundWarning(UserWarning):
    """A motion's bodies go far below the ground plane (z = 0), or never come near it."""


class ShortClipWarning(UserWarning):
    """A motion lasts less than ``SHORT_CLIP_S``: tracking episodes, which end with the clip, would be shorter."""


SHORT_CLIP_S = 1.0
"""Clips shorter than this (seconds) get a ``ShortClipWarning`` (the G1 clips last several seconds)."""

GROUND_PENETRATION_M = 0.05
"""Body origins further than this below z = 0 get a ``GroundWarning`` (the G1 clips' feet reach 0.005 m below)."""

GROUND_CLEARANCE_M = 0.3
"""A clip whose lowest body stays higher than this in every frame gets a ``GroundWarning`` (a clip on a slope
or a box climbs higher than that in some frames, not in all)."""


ROOT_TURN_RATE_TOLERANCE = 0.25
"""How far (rad/s, median over a clip's frame steps) its stored root angular velocity may lie from the rate at
which its root orientation turns; half the median turn rate is allowed when that is larger. Consistent clips
sit near 0.03 rad/s; a velocity in the wrong frame, or a quaternion read in the wrong order, sits near the
turn rate itself."""

BODY_MATCH_TOLERANCE_M = 0.03
"""How far (m, median) a BeyondMimic file's bodies may lie from the nearest body that forward kinematics of its
root and joints puts on the training model. Files of this model sit at 0; joints read in another order sit
near 13 cm on the G1's clips."""

ROOT_SPEED_TOLERANCE = 0.1
"""The same for the root's linear velocity against how its position moves (m/s; half the median speed when
larger). Consistent clips sit near 0.01 m/s."""

JOINT_SPEED_TOLERANCE = 0.2
"""How far a clip's stored joint velocities may lie from how its joint angles move, as a fraction of the stored
speed (median over frame steps of the norm over joints; at least ``JOINT_SPEED_FLOOR``). Consistent clips sit
near 0.05; an 'fps' off by a factor f sits at |1 - 1/f| (a clip labelled 50 fps that is 25 at 1.0)."""

JOINT_SPEED_FLOOR = 0.5
"""The smallest gap (rad/s, norm over joints) the joint-velocity check refuses: a clip whose joints barely move
says nothing about its rate."""


def _turn_rates_w(quat: np.ndarray, fps: float) -> np.ndarray:
    """World-frame angular velocity that turns ``quat[t]`` into ``quat[t + 1]`` in one frame (T - 1, 3)."""
    q = torch.from_numpy(np.ascontiguousarray(quat, dtype=np.float64))
    step = quat_mul(q[1:], quat_conjugate(q[:-1])).numpy()
    step = np.where(step[:, :1] < 0.0, -step, step)  # the shorter way round
    sin_half = np.linalg.norm(step[:, 1:], axis=1, keepdims=True)
    angle = 2.0 * np.arctan2(sin_half, step[:, :1])
    return step[:, 1:] / np.maximum(sin_half, 1e-12) * angle * fps


@cold_path
def _check_root_turn_rate(
    quat: np.ndarray, ang_vel_w: np.ndarray, fps: float, quat_name: str, vel_name: str
) -> None:
    """``ValueError`` when the root's stored world angular velocity does not match how its orientation turns.

    The difference is taken between frame steps (the rate from the orientation of frames t and t + 1 against
    the mean of their stored velocities); the error names the frame or order that would match, when one does.
    """

    def median_gap(q: np.ndarray, velocity: np.ndarray) -> float:
        stored = 0.5 * (velocity[:-1] + velocity[1:])
        return float(np.median(np.linalg.norm(_turn_rates_w(q, fps) - stored, axis=1)))

    if len(quat) < 2:
        return  # refused later, with the frame count
    gap = median_gap(quat, ang_vel_w)
    rate = float(np.median(np.linalg.norm(_turn_rates_w(quat, fps), axis=1)))
    allowed = max(ROOT_TURN_RATE_TOLERANCE, 0.5 * rate)
    if gap <= allowed:
        return
    xyzw = quat[:, [3, 0, 1, 2]]
    readings = (
        (
            quat,
            _rotate(quat, ang_vel_w),
            f"it matches when read in the root's own frame (MuJoCo's qvel "
            f"convention): store {vel_name} in the world frame (rotate each by its frame's root orientation)",
        ),
        (
            xyzw,
            ang_vel_w,
            f"it matches when {quat_name} is read x, y, z, w: store quaternions w first "
            "(wxyz), e.g. quat[:, [3, 0, 1, 2]]",
        ),
        (
            xyzw,
            _rotate(xyzw, ang_vel_w),
            f"it matches when {quat_name} is read x, y, z, w and {vel_name} in "
            "the root's own frame: store quaternions w first (wxyz) and velocities in the world frame",
        ),
    )
    fix = next(
        (hint for q, velocity, hint in readings if median_gap(q, velocity) <= allowed),
        f"is {vel_name} in the world frame, in rad/s, {quat_name} w first (wxyz), and 'fps' the clip's rate?",
    )
    raise ValueError(
        f"motion {vel_name} (root angular velocity, world frame) does not match how {quat_name} (root "
        f"orientation) turns: they differ by {gap:.3g} rad/s (median over {len(quat) - 1} frame steps; allowed "
        f"{allowed:.3g}) while the orientation turns at {rate:.3g} rad/s; {fix}"
    )


@cold_path
def _check_root_speed(
    pos: np.ndarray, quat: np.ndarray, lin_vel_w: np.ndarray, fps: float, pos_name: str, vel_name: str
) -> None:
    """``ValueError`` when the root's stored world linear velocity does not match how its position moves (as
    `_check_root_turn_rate`, with ``ROOT_SPEED_TOLERANCE``)."""
    if len(pos) < 2:
        return  # refused later, with the frame count
    moves = (pos[1:] - pos[:-1]) * fps

    def median_gap(velocity: np.ndarray) -> float:
        return float(np.median(np.linalg.norm(moves - 0.5 * (velocity[:-1] + velocity[1:]), axis=1)))

    gap = median_gap(lin_vel_w)
    speed = float(np.median(np.linalg.norm(moves, axis=1)))
    allowed = max(ROOT_SPEED_TOLERANCE, 0.5 * speed)
    if gap <= allowed:
        return
    fix = (
        f"it matches when read in the root's own frame: store {vel_name} in the world frame (rotate each by its "
        "frame's root orientation)"
        if median_gap(_rotate(quat, lin_vel_w)) <= allowed
        else f"is {vel_name} in the world frame, in m/s, and 'fps' the clip's rate?"
    )
    raise ValueError(
        f"motion {vel_name} (root linear velocity, world frame) does not match how {pos_name} (root position) "
        f"moves: they differ by {gap:.3g} m/s (median over {len(pos) - 1} frame steps; allowed {allowed:.3g}) "
        f"while the root moves at {speed:.3g} m/s; {fix}"
    )


@cold_path
def _check_joint_speed(
    joint_pos: np.ndarray, joint_vel: np.ndarray, fps: float, pos_name: str, vel_name: str
) -> None:
    """``ValueError`` when the stored joint velocities do not match how the joint angles move (a wrong 'fps'
    shows here even when the root stands still); the error estimates the rate that would match."""
    if len(joint_pos) < 2 or joint_pos.shape[1] == 0:
        return  # refused later, with the frame count
    moves = (joint_pos[1:] - joint_pos[:-1]) * fps
    stored = 0.5 * (joint_vel[:-1] + joint_vel[1:])
    gap = float(np.median(np.linalg.norm(moves - stored, axis=1)))
    speed = float(np.median(np.linalg.norm(stored, axis=1)))
    allowed = max(JOINT_SPEED_FLOOR, JOINT_SPEED_TOLERANCE * speed)
    if gap <= allowed:
        return
    overlap = float(np.sum(stored * moves))
    rate = fps * float(np.sum(stored * stored)) / overlap if overlap > 0.0 else 0.0  # least squares
    scaled_gap = float(np.median(np.linalg.norm(moves * (rate / fps) - stored, axis=1)))
    if speed < JOINT_SPEED_FLOOR:
        fix = f"{vel_name} is (nearly) zero: store each joint's velocity, e.g. np.gradient({pos_name}, axis=0) * fps"
    elif rate > 0.0 and scaled_gap <= allowed:
        fix = (
            f"they match at about {rate:.0f} fps, or with {vel_name} times {fps / rate:.3g}: is 'fps' ({fps:g}) "
            f"the clip's rate, and {vel_name} in rad/s?"
        )
    else:
        fix = f"is {vel_name} in rad/s (m/s for slide joints), in the order of {pos_name}, and 'fps' the clip's rate?"
    raise ValueError(
        f"motion {vel_name} (joint velocities) does not match how {pos_name} (joint angles) moves: they differ by "
        f"{gap:.3g} rad/s (median over {len(joint_pos) - 1} frame steps of the norm over {joint_pos.shape[1]} "
        f"joints; allowed {allowed:.3g}) while the stored velocities are {speed:.3g} rad/s; {fix}"
    )


@cold_path
def _warn_outside_joint_limits(joint_pos: np.ndarray, layout: _ModelLayout) -> None:
    """``JointLimitWarning`` naming each joint whose angle leaves its range by more than the tolerance, and when."""
    lower, upper = layout.joint_range[:, 0], layout.joint_range[:, 1]
    beyond = np.maximum(lower - joint_pos, joint_pos - upper)  # (T, J) > 0 outside the range
    beyond = np.where(layout.joint_limited, beyond, 0.0)
    far = beyond > JOINT_LIMIT_TOLERANCE_RAD
    if not far.any():
        return
    parts = []
    for j in np.flatnonzero(far.any(axis=0)):
        frames = np.flatnonzero(far[:, j])
        parts.append(
            f"{layout.joint_names[j]} in {frames.size} frames ({_frame_ranges(frames)}), up to "
            f"{beyond[:, j].max():.2f} beyond [{lower[j]:.2f}, {upper[j]:.2f}]"
        )
    warnings.warn(
        f"motion joint angles lie more than {JOINT_LIMIT_TOLERANCE_RAD} outside the model's joint limits: "
        + "; ".join(parts)
        + " (is the motion made for this robot, in radians, with the same joint zero?)",
        JointLimitWarning,
        stacklevel=4,
    )


def _frame_ranges(frames: np.ndarray, limit: int = 4) -> str:
    """``"3-17, 40, 52-60"``: runs of consecutive frame indices, the first ``limit`` of them."""
    runs: list[tuple[int, int]] = []
    for frame in frames.tolist():
        if runs and frame == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], frame)
        else:
            runs.append((frame, frame))
    shown = [f"{a}-{b}" if b > a else f"{a}" for a, b in runs[:limit]]
    return ", ".join(shown) + (", ..." if len(runs) > limit else "")


@cold_path
def _check_bodies_follow_joints(
    model: mujoco.MjModel,
    layout: _ModelLayout,
    tracks: dict[str, np.ndarray],
    arrays: Mapping[str, np.ndarray],
) -> None:
    """``ValueError`` when a BeyondMimic file's ``body_pos_w`` is not what forward kinematics of its root and
    joints gives on the training model (compared as sets, on up to 16 frames: file bodies need not be the
    model's, nor in its order)."""
    num = tracks["joint_pos"].shape[0]
    frames = np.unique(np.linspace(0, num - 1, min(num, 16)).astype(np.int64))
    sampled = {key: track[frames] for key, track in tracks.items()}
    model_bodies = _forward_kinematics(model, layout, sampled, range(1, model.nbody))["body_pos_w"]
    file_bodies = np.asarray(arrays["body_pos_w"], dtype=np.float64)[frames]
    nearest = np.linalg.norm(file_bodies[:, :, None] - model_bodies[:, None], axis=-1).min(axis=2)
    gap = float(np.median(nearest))
    if gap <= BODY_MATCH_TOLERANCE_M:
        return
    fix = (
        "is the clip made for this robot (its link lengths and joint zeros)?"
        if "joint_names" in arrays
        else "without 'joint_names' the joint columns are read in the training model's joint order, as mjlab "
        "writes them; whole_body_tracking's files keep Isaac Lab's order: save the names of joint_pos's "
        "columns as 'joint_names'"
    )
    raise ValueError(
        f"motion 'body_pos_w' does not follow forward kinematics of its root and joints on the training model: "
        f"its bodies lie {100 * gap:.1f} cm from the nearest model body (median over bodies and {len(frames)} "
        f"frames; allowed {100 * BODY_MATCH_TOLERANCE_M:g} cm); {fix}"
    )


def _warn_if_short(num_frames: int, fps: float) -> None:
    duration = (num_frames - 1) / fps
    if duration < SHORT_CLIP_S:
        warnings.warn(
            f"the motion lasts {duration:.3g} s ({num_frames} frames at {fps:g} fps): a tracking episode ends "
            f"when its clip does, so episodes would last under {duration:.3g} s and a policy sees little of "
            "the motion; is this the whole clip (and its fps right)?",
            ShortClipWarning,
            stacklevel=3,
        )


@cold_path
def _warn_about_the_ground(model: mujoco.MjModel, bodies: dict[str, np.ndarray], root_z: np.ndarray) -> None:
    """``GroundWarning`` when bodies go more than ``GROUND_PENETRATION_M`` below z = 0, or the lowest body stays
    above ``GROUND_CLEARANCE_M`` in every frame: a clip whose height offset is wrong starts its episodes inside
    the floor or in the air. ``bodies``: `_forward_kinematics`'s, whose lowest body is any of the model's."""
    lowest = bodies["lowest_z"]
    hint = f"(root height {root_z.min():.2f} .. {root_z.max():.2f} m); is the clip's height offset right?"
    if lowest.min() < -GROUND_PENETRATION_M:
        frame = int(np.argmax(lowest < -GROUND_PENETRATION_M))
        body = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(bodies["lowest_body"][frame]))
        warnings.warn(
            f"motion bodies go up to {-lowest.min():.2f} m below the ground (z = 0), first at frame {frame} "
            f"({body}): the robot starts such frames inside the floor {hint}",
            GroundWarning,
            stacklevel=3,
        )
    elif lowest.min() > GROUND_CLEARANCE_M:
        warnings.warn(
            f"motion never comes near the ground: its lowest body is at least {lowest.min():.2f} m up in every "
            f"frame, so episodes start in the air {hint}",
            GroundWarning,
            stacklevel=3,
        )


@cold_path
def _check_clip_names_bodies(field: Any, body_names: Sequence[str]) -> None:
    """``ValueError`` naming the bodies of ``body_names`` that a clip's ``body_names`` field lacks."""
    clip_bodies = _name_list(field)
    missing = [name for name in body_names if name not in clip_bodies]
    if missing:
        raise ValueError(
            f"motion 'body_names' lacks bodies the task tracks: {missing}; the clip's bodies: {clip_bodies} "
            "(is the clip made for this robot?)"
        )
