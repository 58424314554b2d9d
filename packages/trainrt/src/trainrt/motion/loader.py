"""Motion clips: read a reference motion (npz), map it onto the training model, recompute body targets by FK.

Two file formats are understood:

``holosoma``
    ``fps``; ``joint_pos`` (T, 7 + J): MuJoCo free-joint qpos (root position, root quaternion wxyz) followed
    by J joint angles; ``joint_vel`` (T, 6 + J): root linear velocity and root angular velocity, both in the
    world frame, followed by J joint velocities; ``joint_names`` (J,). The angular part is not MuJoCo's qvel
    convention (root frame): holosoma's clips store it in the world frame, where it matches the rate of
    change of their root orientation. Its ``body_*`` arrays belong to the model the clip was made with and
    are not used.
``beyondmimic`` (also mjlab's)
    ``fps``; ``joint_pos``, ``joint_vel`` (T, J); ``body_pos_w``, ``body_quat_w`` (wxyz),
    ``body_lin_vel_w`` (velocity of the body origin), ``body_ang_vel_w``, all world frame, (T, B, 3|4),
    with the root body at index 0. ``joint_names`` (J,) is optional; without it the columns are taken to be
    the training model's joints in model order (as mjlab writes them; whole_body_tracking's files keep Isaac
    Lab's joint order and need the names added). The bodies must be where forward kinematics of the root and
    joints puts the model's bodies, which catches joints read in the wrong order.

Either way the root's angular velocity must match the rate of change of its orientation (a velocity in
another frame, or a quaternion stored xyzw, is refused with the fix), and the loader maps joints by name, builds the model's ``qpos``/``qvel`` per frame, optionally
resamples to a target frame rate, and runs forward kinematics with CPU MuJoCo on the training model, so
body targets are those of the bodies the policy actually controls. This is load-time work (cold path).

Names: what a clip carries so that any robot can track it (``load_motion(strict_names=True)``, as the tracking
task loads clips)
    ``joint_names`` (J,): the joint of each column. Columns are mapped onto the robot's joints by name, never
    by position: every joint of the robot must be named, and a named joint the robot lacks refuses the clip
    (the message names it and the robot's joints; outside tracking it is ignored with an
    ``IgnoredJointsWarning``). A holosoma clip must carry it; a BeyondMimic clip without it is read in the
    training model's joint order, the documented default for mjlab's files (the G1's asset clips all carry
    names).
    ``body_names`` (B,), optional: the bodies of the clip's ``body_*`` arrays. Body targets are recomputed by
    forward kinematics on the robot for the bodies the task tracks, by name; a clip that names its bodies
    must name every tracked body. It may name more (the G1's asset clips name 51 bodies of the model they
    were made with, hands and contact spheres included).

Reading a file safely is ``motion.files``'s; the consistency checks, their tolerances and the warnings are
``motion.checks``'s; the model's layout and forward kinematics ``motion.kinematics``'s.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch

from trainrt.hotpath import cold_path
from trainrt.motion.checks import (
    IgnoredJointsWarning,
    _check_bodies_follow_joints,
    _check_clip_names_bodies,
    _check_joint_speed,
    _check_root_speed,
    _check_root_turn_rate,
    _warn_about_the_ground,
    _warn_if_short,
    _warn_outside_joint_limits,
)
from trainrt.motion.files import _name_list, read_motion_arrays
from trainrt.motion.kinematics import _forward_kinematics, _model_layout, _ModelLayout, _rotate

MOTION_FORMATS = ("holosoma", "beyondmimic")
HOLOSOMA_FIELDS = ("fps", "joint_pos", "joint_vel", "joint_names")
BEYONDMIMIC_FIELDS = (
    "fps",
    "joint_pos",
    "joint_vel",
    "body_pos_w",
    "body_quat_w",
    "body_lin_vel_w",
    "body_ang_vel_w",
)
_QUAT_NORM_TOLERANCE = 1e-3


@dataclass(frozen=True)
class MotionClip:
    """A reference motion on the training model; every tensor shares one device and float dtype.

    Attributes:
        fps: frames per second.
        joint_names: the model's 1-DoF joints, model order (J,).
        body_names: bodies of the body targets (B,).
        source_format: ``"holosoma"`` or ``"beyondmimic"``.
        joint_pos: joint angles                                    (T, J)
        joint_vel: joint velocities                                (T, J)
        root_pos_w: root position, world frame                     (T, 3)
        root_quat_w: root orientation, wxyz, unit                  (T, 4)
        root_lin_vel_w: root origin velocity, world frame          (T, 3)
        root_ang_vel_w: root angular velocity, world frame         (T, 3)
        body_pos_w: body origin positions, world frame             (T, B, 3)
        body_quat_w: body orientations, wxyz                       (T, B, 4)
        body_lin_vel_w: body origin velocities, world frame        (T, B, 3)
        body_ang_vel_w: body angular velocities, world frame       (T, B, 3)
    """

    fps: float
    joint_names: tuple[str, ...]
    body_names: tuple[str, ...]
    source_format: str
    joint_pos: torch.Tensor
    joint_vel: torch.Tensor
    root_pos_w: torch.Tensor
    root_quat_w: torch.Tensor
    root_lin_vel_w: torch.Tensor
    root_ang_vel_w: torch.Tensor
    body_pos_w: torch.Tensor
    body_quat_w: torch.Tensor
    body_lin_vel_w: torch.Tensor
    body_ang_vel_w: torch.Tensor

    @property
    def num_frames(self) -> int:
        """Number of frames T."""
        return int(self.joint_pos.shape[0])

    @property
    def duration_s(self) -> float:
        """Time from the first to the last frame in seconds."""
        return (self.num_frames - 1) / self.fps

    @cold_path
    def body_index(self, name: str) -> int:
        """Index of body ``name`` along the B axis; ValueError naming the clip's bodies otherwise."""
        if name not in self.body_names:
            raise ValueError(f"body {name!r} is not in the motion clip; clip bodies: {list(self.body_names)}")
        return self.body_names.index(name)

    @cold_path
    def to(self, device: torch.device | str | None = None, dtype: torch.dtype | None = None) -> MotionClip:
        """A copy with every tensor on ``device`` and/or of float ``dtype``."""
        changes = {
            f.name: getattr(self, f.name).to(device=device, dtype=dtype)
            for f in fields(self)
            if isinstance(getattr(self, f.name), torch.Tensor)
        }
        return replace(self, **changes)


# --- fields and formats -------------------------------------------------------------------------------------


@cold_path
def detect_motion_format(arrays: Mapping[str, np.ndarray], num_model_joints: int) -> str:
    """``"holosoma"`` or ``"beyondmimic"`` from the fields and widths; ValueError naming missing fields."""
    if "joint_pos" not in arrays:
        raise ValueError(f"motion has no 'joint_pos' field; fields: {sorted(arrays)}")
    joint_pos = np.asarray(arrays["joint_pos"])
    if joint_pos.ndim != 2:
        raise ValueError(f"motion field 'joint_pos' must be (T, columns), got shape {joint_pos.shape}")
    width = joint_pos.shape[1]
    names = arrays.get("joint_names")
    num_named = int(np.asarray(names).size) if names is not None else None
    if num_named is not None and width == 7 + num_named:
        fmt, required = "holosoma", HOLOSOMA_FIELDS
    elif num_named is None and width == 7 + num_model_joints:
        raise ValueError(
            f"motion 'joint_pos' has {width} columns (root pose + {num_model_joints} joints, the holosoma layout) "
            f"but no 'joint_names' field; holosoma motions require fields {list(HOLOSOMA_FIELDS)}"
        )
    elif width == (num_named if num_named is not None else num_model_joints):
        fmt, required = "beyondmimic", BEYONDMIMIC_FIELDS
    else:
        expected = (
            f"7 + {num_named} (holosoma: root pose + joints) or {num_named} (beyondmimic)"
            if num_named is not None
            else f"{num_model_joints} (beyondmimic without joint_names: the model's joints)"
        )
        raise ValueError(f"motion 'joint_pos' has {width} columns; expected {expected}")
    missing = [f for f in required if f not in arrays]
    if missing:
        raise ValueError(f"{fmt} motion is missing fields {missing}; required: {list(required)}")
    return fmt


@cold_path
def motion_fps(arrays: Mapping[str, Any]) -> float:
    """A motion file's frame rate (its ``fps`` field), checked as the loader checks it; ValueError otherwise."""
    if "fps" not in arrays:
        raise ValueError(f"motion has no 'fps' field; it has {sorted(arrays)}")
    return _check_fps(arrays["fps"])


def _check_fps(value: Any) -> float:
    array = np.asarray(value)
    if array.size != 1 or not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"motion 'fps' must be one number, got {array!r}")
    fps = float(array.reshape(()))
    if not (math.isfinite(fps) and fps > 0.0):
        raise ValueError(f"motion 'fps' must be a positive finite number, got {fps}")
    return fps


@cold_path
def _float_field(arrays: Mapping[str, np.ndarray], name: str, shape: tuple[int | None, ...]) -> np.ndarray:
    """Field ``name`` as float64 with the given shape (None: any size); ValueError for shape or non-finite."""
    array = np.asarray(arrays[name])
    if not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"motion field {name!r} must be numeric, got dtype {array.dtype}")
    if array.ndim != len(shape) or any(s is not None and s != a for s, a in zip(shape, array.shape)):
        want = "(" + ", ".join("*" if s is None else str(s) for s in shape) + ")"
        raise ValueError(f"motion field {name!r} has shape {array.shape}, expected {want}")
    array = array.astype(np.float64)
    bad = ~np.isfinite(array)
    if bad.any():
        frame = int(np.argwhere(bad)[0][0])
        raise ValueError(f"motion field {name!r} has NaN or infinite values (first at frame {frame})")
    return array


@cold_path
def _unit_quats(quat: np.ndarray, name: str) -> np.ndarray:
    norm = np.linalg.norm(quat, axis=-1, keepdims=True)
    if np.any(np.abs(norm - 1.0) > _QUAT_NORM_TOLERANCE):
        frame = int(np.argwhere(np.abs(norm[..., 0] - 1.0) > _QUAT_NORM_TOLERANCE)[0][0])
        raise ValueError(
            f"motion field {name!r} holds non-unit quaternions (first at frame {frame}, norm "
            f"{float(norm[frame, 0]):.6g}; allowed 1 +- {_QUAT_NORM_TOLERANCE:g}): divide each by its norm "
            "(wxyz, w first)"
        )
    return quat / norm


# --- tracks on the training model ----------------------------------------------------------------------------


@cold_path
def _joint_columns(file_names: Sequence[str], model_names: Sequence[str], strict: bool = False) -> np.ndarray:
    """Column of each model joint in the file; ValueError listing model joints the file lacks, and, for file
    joints the model lacks, an ``IgnoredJointsWarning`` naming them (a ValueError when ``strict``)."""
    file_names = [str(n) for n in file_names]
    if len(set(file_names)) != len(file_names):
        raise ValueError(f"motion 'joint_names' has duplicates: {file_names}")
    extra = [n for n in file_names if n not in model_names]
    if extra and strict:
        raise ValueError(
            f"motion names joints the robot lacks: {extra}; the robot's joints: {list(model_names)} (is the "
            "clip made for this robot?)"
        )
    missing = [n for n in model_names if n not in file_names]
    if missing:
        raise ValueError(f"motion lacks joints of the training model: {missing}; motion joints: {file_names}")
    if extra:
        warnings.warn(
            f"motion joints the training model lacks are ignored: {extra} (is the motion made for this robot?)",
            IgnoredJointsWarning,
            stacklevel=4,
        )
    return np.array([file_names.index(n) for n in model_names], dtype=np.int64)


@cold_path
def _state_tracks(
    arrays: Mapping[str, np.ndarray], fmt: str, layout: _ModelLayout, fps: float, strict_names: bool = False
) -> dict[str, np.ndarray]:
    """Root pose/velocity and joint tracks of the file, joints in model order (mapped by name; file joints the
    model lacks refused when ``strict_names``), root velocity in qvel form."""
    num_model = len(layout.joint_names)
    if fmt == "holosoma":
        names = _name_list(arrays["joint_names"])
        j = len(names)
        qpos = _float_field(arrays, "joint_pos", (None, 7 + j))
        qvel = _float_field(arrays, "joint_vel", (qpos.shape[0], 6 + j))
        root_pos, root_quat = qpos[:, :3], _unit_quats(qpos[:, 3:7], "joint_pos[:, 3:7]")
        root_lin_vel_w, root_ang_vel_w = qvel[:, :3], qvel[:, 3:6]
        joint_pos, joint_vel = qpos[:, 7:], qvel[:, 6:]
        # Joints first: a wrong 'fps' shows in every check, and this one names the rate that would match.
        _check_joint_speed(joint_pos, joint_vel, fps, "joint_pos[:, 7:]", "joint_vel[:, 6:]")
        _check_root_turn_rate(root_quat, root_ang_vel_w, fps, "joint_pos[:, 3:7]", "joint_vel[:, 3:6]")
        _check_root_speed(root_pos, root_quat, root_lin_vel_w, fps, "joint_pos[:, :3]", "joint_vel[:, :3]")
        root_ang_vel_b = _rotate(root_quat, root_ang_vel_w, inverse=True)
    else:
        names_field = arrays.get("joint_names")
        names = _name_list(names_field) if names_field is not None else None
        j = len(names) if names is not None else num_model
        joint_pos = _float_field(arrays, "joint_pos", (None, j))
        t = joint_pos.shape[0]
        joint_vel = _float_field(arrays, "joint_vel", (t, j))
        body_pos = _float_field(arrays, "body_pos_w", (t, None, 3))
        b = body_pos.shape[1]
        if b < 1:
            raise ValueError("beyondmimic motion has no bodies; body 0 must be the root")
        body_quat = _float_field(arrays, "body_quat_w", (t, b, 4))
        body_lin = _float_field(arrays, "body_lin_vel_w", (t, b, 3))
        body_ang = _float_field(arrays, "body_ang_vel_w", (t, b, 3))
        root_pos, root_quat = body_pos[:, 0], _unit_quats(body_quat[:, 0], "body_quat_w[:, 0]")
        root_lin_vel_w = body_lin[:, 0]
        _check_joint_speed(joint_pos, joint_vel, fps, "joint_pos", "joint_vel")
        _check_root_turn_rate(root_quat, body_ang[:, 0], fps, "body_quat_w[:, 0]", "body_ang_vel_w[:, 0]")
        _check_root_speed(
            root_pos, root_quat, root_lin_vel_w, fps, "body_pos_w[:, 0]", "body_lin_vel_w[:, 0]"
        )
        root_ang_vel_b = _rotate(root_quat, body_ang[:, 0], inverse=True)
        if names is None:
            names = list(layout.joint_names)
    if joint_pos.shape[0] < 2:
        raise ValueError(f"motion needs at least 2 frames, got {joint_pos.shape[0]}")
    columns = _joint_columns(names, layout.joint_names, strict_names)
    _warn_outside_joint_limits(joint_pos[:, columns], layout)
    return {
        "root_pos": root_pos,
        "root_quat": root_quat,
        "root_lin_vel_w": root_lin_vel_w,
        "root_ang_vel_b": root_ang_vel_b,
        "joint_pos": joint_pos[:, columns],
        "joint_vel": joint_vel[:, columns],
    }


def resampled_frame_count(num_frames: int, fps: float, target_fps: float) -> int:
    """Frames a clip of ``num_frames`` at ``fps`` has once resampled to ``target_fps`` (the same span, the first
    frame kept)."""
    if abs(target_fps - fps) <= 1e-9 * fps:
        return num_frames
    return math.floor((num_frames - 1) / fps * target_fps + 1e-9) + 1


@cold_path
def _resample_tracks(tracks: dict[str, np.ndarray], fps: float, target_fps: float) -> dict[str, np.ndarray]:
    """Tracks at ``target_fps``: linear interpolation, normalized linear interpolation for the quaternion."""
    num = tracks["joint_pos"].shape[0]
    duration = (num - 1) / fps
    count = resampled_frame_count(num, fps, target_fps)
    if count < 2:
        raise ValueError(
            f"the motion lasts {duration:.4g} s ({num} frames at {fps:g} fps), {count} frame at {target_fps:g} "
            f"fps, the rate it is resampled to; a motion needs at least 2 frames there, so at least "
            f"{1.0 / target_fps:.4g} s"
        )
    position = np.arange(count) * (fps / target_fps)
    lo = np.minimum(np.floor(position).astype(np.int64), num - 2)
    frac = (position - lo)[:, None]
    out = {}
    for key, track in tracks.items():
        a, b = track[lo], track[lo + 1]
        if key == "root_quat":
            b = np.where(np.sum(a * b, axis=-1, keepdims=True) < 0.0, -b, b)
            mixed = (1.0 - frac) * a + frac * b
            out[key] = mixed / np.linalg.norm(mixed, axis=-1, keepdims=True)
        else:
            out[key] = (1.0 - frac) * a + frac * b
    return out


# --- public entry points -----------------------------------------------------------------------------------------


@cold_path
def load_motion(
    source: str | Path | Mapping[str, Any],
    model: mujoco.MjModel,
    *,
    body_names: Sequence[str] | None = None,
    target_fps: float | None = None,
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    strict_names: bool = False,
) -> MotionClip:
    """Load a holosoma or BeyondMimic motion onto ``model`` and recompute its body targets by FK.

    Args:
        source: path of an ``.npz`` file, or a mapping of its arrays.
        model: the training model (one free joint; hinge/slide joints matched by name).
        body_names: bodies to keep targets for, in this order; default all bodies but the world.
        target_fps: resample to this frame rate (e.g. the control rate) when it differs from the file's.
        device: torch device of the clip's tensors.
        dtype: float dtype of the clip's tensors.
        strict_names: the names contract of tracking (the module docstring's *Names*): refuse a clip that names a
            joint the model lacks (instead of ignoring its column with an ``IgnoredJointsWarning``), or that
            names its bodies (``body_names``) but not every one of ``body_names``.

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: unreadable file, unknown layout, missing fields or joints, wrong shapes, bad fps,
            NaN/infinite values, non-unit quaternions, unknown body names; with ``strict_names``, names the
            model or the clip lacks.
    """
    layout = _model_layout(model)
    arrays = read_motion_arrays(source)
    fmt = detect_motion_format(arrays, len(layout.joint_names))
    fps = _check_fps(arrays["fps"])
    tracks = _state_tracks(arrays, fmt, layout, fps, strict_names)
    _warn_if_short(tracks["joint_pos"].shape[0], fps)
    if fmt == "beyondmimic":
        _check_bodies_follow_joints(model, layout, tracks, arrays)
    if target_fps is not None:
        if not (math.isfinite(target_fps) and target_fps > 0.0):
            raise ValueError(f"target_fps must be a positive finite number, got {target_fps}")
        if abs(target_fps - fps) > 1e-9 * fps:
            tracks = _resample_tracks(tracks, fps, target_fps)
            fps = float(target_fps)
    if body_names is None:
        body_ids = list(range(1, model.nbody))
    else:
        body_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, n) for n in body_names]
        unknown = [n for n, i in zip(body_names, body_ids) if i < 0]
        if unknown:
            valid = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(model.nbody)]
            raise ValueError(f"unknown body names {unknown}; model bodies: {valid}")
        if strict_names and "body_names" in arrays:
            _check_clip_names_bodies(arrays["body_names"], body_names)
    bodies = _forward_kinematics(model, layout, tracks, body_ids)
    names = tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i) for i in body_ids)
    _warn_about_the_ground(model, bodies, tracks["root_pos"][:, 2])
    root_ang_vel_w = _rotate(tracks["root_quat"], tracks["root_ang_vel_b"])

    def tensor(array: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(array), dtype=dtype, device=device)

    return MotionClip(
        fps=fps,
        joint_names=layout.joint_names,
        body_names=names,
        source_format=fmt,
        joint_pos=tensor(tracks["joint_pos"]),
        joint_vel=tensor(tracks["joint_vel"]),
        root_pos_w=tensor(tracks["root_pos"]),
        root_quat_w=tensor(tracks["root_quat"]),
        root_lin_vel_w=tensor(tracks["root_lin_vel_w"]),
        root_ang_vel_w=tensor(root_ang_vel_w),
        body_pos_w=tensor(bodies["body_pos_w"]),
        body_quat_w=tensor(bodies["body_quat_w"]),
        body_lin_vel_w=tensor(bodies["body_lin_vel_w"]),
        body_ang_vel_w=tensor(bodies["body_ang_vel_w"]),
    )


@cold_path
def holosoma_to_beyondmimic(
    source: str | Path | Mapping[str, Any], model: mujoco.MjModel
) -> dict[str, np.ndarray]:
    """Convert a holosoma motion into BeyondMimic arrays for ``model`` (its bodies, root first, by FK).

    The result has ``fps``, ``joint_pos``/``joint_vel`` (T, J) in the model's joint order (no ``joint_names``,
    as BeyondMimic files have none), and ``body_*`` (T, B, ...) for the model's bodies with the root first.
    Save it with ``np.savez(path, **arrays)``.
    """
    layout = _model_layout(model)
    arrays = read_motion_arrays(source)
    fmt = detect_motion_format(arrays, len(layout.joint_names))
    if fmt != "holosoma":
        raise ValueError(f"holosoma_to_beyondmimic needs a holosoma motion, got a {fmt} one")
    fps = _check_fps(arrays["fps"])
    tracks = _state_tracks(arrays, fmt, layout, fps)
    body_ids = [layout.root_body] + [b for b in range(1, model.nbody) if b != layout.root_body]
    bodies = _forward_kinematics(model, layout, tracks, body_ids)
    return {
        "fps": np.array([fps]),
        "joint_pos": tracks["joint_pos"].copy(),
        "joint_vel": tracks["joint_vel"].copy(),
        **{key: bodies[key] for key in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w")},
    }
