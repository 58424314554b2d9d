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
"""

from __future__ import annotations

import math
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import mujoco
import numpy as np
import torch

from trainrt.hotpath import cold_path
from trainrt.mdp.math import quat_conjugate, quat_mul

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


# --- reading and validation ------------------------------------------------------------------------------------


@cold_path
def read_motion_arrays(source: str | Path | Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The arrays of a motion npz file (or of an in-memory mapping), as a plain dict."""
    if isinstance(source, Mapping):
        return {k: np.asarray(v) for k, v in source.items()}
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"motion file not found: {path}")
    _check_npz_header(path)
    _check_decompressed_size(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: np.asarray(data[k]) for k in data.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        fix = (
            "; a field holds Python objects (joint_names often does): save it as text, "
            "np.array(names, dtype=str)"
            if "allow_pickle" in str(err)
            else ""
        )
        raise ValueError(f"{path} is not a readable .npz motion file: {err}{fix}") from err


MAX_MOTION_ARRAY_BYTES = 2**30
"""Largest total size of a motion file's arrays once decompressed (1 GiB). The G1 asset clips hold under 6 MB;
an hour at 50 fps of a 30-body clip with every holosoma field in float64 holds about 0.7 GiB."""

MOTION_LOAD_COPIES = 4
"""How many times its decompressed size loading a clip holds at its peak (the arrays, their float64 tracks,
resampling, forward kinematics): 2.7 to 4.6 for the G1 asset clips. A clip must fit the host's available
memory that many times."""


@cold_path
def npz_array_bytes(path: str | Path) -> dict[str, int]:
    """Bytes each member of an npz file holds once decompressed, without decompressing it: the larger of the
    zip central directory's size and the array its npy header describes (shape x item size)."""
    sizes = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            sizes[info.filename.removesuffix(".npy")] = max(info.file_size, _npy_header_bytes(archive, info))
    return sizes


def _npy_header_bytes(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """The bytes the array of an npz member holds by its npy header (read alone); 0 for a member that is no npy."""
    with archive.open(info) as member:
        try:
            version = np.lib.format.read_magic(member)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(member)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile):
            return 0
    return math.prod(shape) * dtype.itemsize


@cold_path
def _check_decompressed_size(path: Path) -> None:
    """``ValueError`` naming the file and its sizes when its arrays, decompressed, would exceed
    ``MAX_MOTION_ARRAY_BYTES`` or (``MOTION_LOAD_COPIES`` times) the host's available memory."""
    from trainrt.runner.build import host_available_bytes
    from trainrt.runner.preflight import format_bytes

    try:
        sizes = npz_array_bytes(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return  # not readable as a zip: np.load names the problem
    total = sum(sizes.values())
    available = host_available_bytes()
    if total > MAX_MOTION_ARRAY_BYTES:
        limit = f"more than the {format_bytes(MAX_MOTION_ARRAY_BYTES)} a motion clip may hold"
    elif available is not None and total * MOTION_LOAD_COPIES > available:
        limit = (
            f"and loading takes about {MOTION_LOAD_COPIES} times that, more than the host's "
            f"{format_bytes(available)} of available memory"
        )
    else:
        return
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:3]
    arrays = ", ".join(f"{name} {format_bytes(size)}" for name, size in largest)
    raise ValueError(
        f"{path} ({format_bytes(path.stat().st_size)} on disk) holds {format_bytes(total)} of arrays once "
        f"decompressed ({arrays}), {limit}: use a shorter clip (fewer frames) or one with fewer fields"
    )


def _name_list(field: Any) -> list[str]:
    """A ``joint_names`` field as text; names stored as bytes (as HDF5 pipelines write them) are decoded."""
    return [n.decode() if isinstance(n, bytes) else str(n) for n in np.asarray(field).reshape(-1)]


_NPZ_FIX = "save motions with np.savez(path, fps=..., joint_pos=..., ...)"


@cold_path
def _check_npz_header(path: Path) -> None:
    """``ValueError`` naming what ``path`` is when it is not an npz archive (empty, a .npy, text, other)."""
    with open(path, "rb") as handle:
        head = handle.read(64)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return
    if not head:
        what = "it is empty (0 bytes)"
    elif head.startswith(b"\x93NUMPY"):
        what = "it is a single-array .npy file (renamed?), not an .npz archive of named fields"
    else:
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and all(c.isprintable() or c.isspace() for c in text):
            what = f"it is a text file (starts with {text[:32]!r})"
        else:
            what = "it does not start like an .npz (zip) archive"
    raise ValueError(f"{path} is not a readable .npz motion file: {what}; {_NPZ_FIX}")


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


# --- the training model -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _ModelLayout:
    joint_names: tuple[str, ...]
    joint_qpos: np.ndarray
    joint_qvel: np.ndarray
    root_qpos: int
    root_qvel: int
    root_body: int
    joint_range: np.ndarray  # (J, 2) lower, upper
    joint_limited: np.ndarray  # (J,) bool


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
def _model_layout(model: mujoco.MjModel) -> _ModelLayout:
    kinds = [int(model.jnt_type[j]) for j in range(model.njnt)]
    free = [j for j, kind in enumerate(kinds) if kind == mujoco.mjtJoint.mjJNT_FREE.value]
    if len(free) != 1:
        raise ValueError(
            f"motion clips need a model with exactly one free joint (the root), found {len(free)}"
        )
    one_dof = (mujoco.mjtJoint.mjJNT_HINGE.value, mujoco.mjtJoint.mjJNT_SLIDE.value)
    joints = [j for j, kind in enumerate(kinds) if kind in one_dof]
    ranges = np.array([model.jnt_range[j] for j in joints], dtype=np.float64).reshape(-1, 2)
    is_limited = np.array([bool(model.jnt_limited[j]) for j in joints], dtype=bool)
    return _ModelLayout(
        joint_names=tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in joints),
        joint_qpos=np.array([model.jnt_qposadr[j] for j in joints], dtype=np.int64),
        joint_qvel=np.array([model.jnt_dofadr[j] for j in joints], dtype=np.int64),
        root_qpos=int(model.jnt_qposadr[free[0]]),
        root_qvel=int(model.jnt_dofadr[free[0]]),
        root_body=int(model.jnt_bodyid[free[0]]),
        joint_range=ranges,
        joint_limited=is_limited,
    )


@cold_path
def _rotate(quat: np.ndarray, vec: np.ndarray, inverse: bool = False) -> np.ndarray:
    """Rotate each ``vec[t]`` (T, 3) by ``quat[t]`` (T, 4), or by its inverse."""
    out = np.empty_like(vec)
    q = np.empty(4)
    for t in range(vec.shape[0]):
        if inverse:
            mujoco.mju_negQuat(q, quat[t])
        else:
            q[:] = quat[t]
        mujoco.mju_rotVecQuat(out[t], vec[t], q)
    return out


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


@cold_path
def _forward_kinematics(
    model: mujoco.MjModel, layout: _ModelLayout, tracks: dict[str, np.ndarray], body_ids: Sequence[int]
) -> dict[str, np.ndarray]:
    """Body poses and origin velocities (world frame) of ``body_ids`` for every frame, by CPU MuJoCo; also
    ``lowest_z`` and ``lowest_body``, the height and id of the lowest of all the model's bodies per frame."""
    data = mujoco.MjData(model)
    num, nb = tracks["joint_pos"].shape[0], len(body_ids)
    out = {
        "body_pos_w": np.zeros((num, nb, 3)),
        "body_quat_w": np.zeros((num, nb, 4)),
        "body_lin_vel_w": np.zeros((num, nb, 3)),
        "body_ang_vel_w": np.zeros((num, nb, 3)),
        "lowest_z": np.zeros(num),
        "lowest_body": np.zeros(num, dtype=np.int64),
    }
    rq, rv = layout.root_qpos, layout.root_qvel
    velocity = np.zeros(6)
    for t in range(num):
        data.qpos[:] = model.qpos0
        data.qvel[:] = 0.0
        data.qpos[rq : rq + 3] = tracks["root_pos"][t]
        data.qpos[rq + 3 : rq + 7] = tracks["root_quat"][t]
        data.qpos[layout.joint_qpos] = tracks["joint_pos"][t]
        data.qvel[rv : rv + 3] = tracks["root_lin_vel_w"][t]
        data.qvel[rv + 3 : rv + 6] = tracks["root_ang_vel_b"][t]
        data.qvel[layout.joint_qvel] = tracks["joint_vel"][t]
        mujoco.mj_kinematics(model, data)
        mujoco.mj_comPos(model, data)
        mujoco.mj_comVel(model, data)
        lowest = int(np.argmin(data.xpos[1:, 2])) + 1  # body 0 is the world
        out["lowest_z"][t], out["lowest_body"][t] = data.xpos[lowest, 2], lowest
        for i, body in enumerate(body_ids):
            out["body_pos_w"][t, i] = data.xpos[body]
            out["body_quat_w"][t, i] = data.xquat[body]
            # XBODY: velocity of the body frame origin (BODY would give the centre of mass), world orientation.
            mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, body, velocity, 0)
            out["body_ang_vel_w"][t, i] = velocity[:3]
            out["body_lin_vel_w"][t, i] = velocity[3:]
    return out


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
