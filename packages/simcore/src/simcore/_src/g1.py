"""Unitree G1 (29 DoF) model constants and loader over the holosoma MJCF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simcore._src.assets import g1_asset_paths
from simcore._src.model import PdGains, check_actuated_joints, load_model, pd_gains_from_armature
from simcore._src.pose import pose_qpos, standing_root_height

_LEG = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
_ARM = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")
G1_JOINT_NAMES: tuple[str, ...] = (
    *(f"{side}_{j}_joint" for side in ("left", "right") for j in _LEG),
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    *(f"{side}_{j}_joint" for side in ("left", "right") for j in _ARM),
)
"""Joint names in actuator order (the order of ``ctrl`` and of ``qpos[7:]``)."""

# Knees-bent standing pose (a common G1 nominal pose): low centre of mass, arms slightly out and bent.
G1_DEFAULT_JOINT_POS: dict[str, float] = {
    "left_hip_pitch_joint": -0.312,
    "right_hip_pitch_joint": -0.312,
    "left_knee_joint": 0.669,
    "right_knee_joint": 0.669,
    "left_ankle_pitch_joint": -0.363,
    "right_ankle_pitch_joint": -0.363,
    "left_shoulder_pitch_joint": 0.2,
    "right_shoulder_pitch_joint": 0.2,
    "left_shoulder_roll_joint": 0.2,
    "right_shoulder_roll_joint": -0.2,
    "left_elbow_joint": 0.6,
    "right_elbow_joint": 0.6,
}
"""Default joint positions in radians; joints not listed are 0."""

G1_FOOT_BODIES: tuple[str, ...] = ("left_ankle_roll_link", "right_ankle_roll_link")
"""Foot bodies, left then right."""

G1_SOLE_CLEARANCE = 0.002
"""Gap (m) between the lowest sole point and the floor in the default standing pose."""


def _check_g1(model: mujoco.MjModel, what: str) -> None:
    """ValueError unless ``model`` has a free root and every G1 joint and foot body (a G1 model)."""
    names = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(model.njnt)}
    bodies = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in range(model.nbody)}
    missing = [n for n in (*G1_JOINT_NAMES, *G1_FOOT_BODIES) if n not in names | bodies]
    free_root = model.njnt > 0 and model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    if missing or not free_root:
        lacks = (
            f"it lacks {missing[:4]}{' ...' if len(missing) > 4 else ''}"
            if missing
            else "its root is not free"
        )
        raise ValueError(f"{what} needs a G1 model (simcore.load_g1()): {lacks}")


def g1_standing_root_height(model: mujoco.MjModel, clearance: float = G1_SOLE_CLEARANCE) -> float:
    """Pelvis height (m) at which the default pose's soles rest ``clearance`` above flat ground (z = 0)."""
    _check_g1(model, "g1_standing_root_height")
    return standing_root_height(model, G1_DEFAULT_JOINT_POS, G1_FOOT_BODIES, clearance)


def g1_default_qpos(model: mujoco.MjModel) -> np.ndarray:
    """Return the default standing qpos ``(nq,)``: the default joint positions, identity orientation, and the
    pelvis at ``g1_standing_root_height(model)`` (soles just above the floor)."""
    _check_g1(model, "g1_default_qpos")
    return pose_qpos(model, G1_DEFAULT_JOINT_POS, g1_standing_root_height(model))


def g1_pd_gains(model: mujoco.MjModel) -> PdGains:
    """PD gains for the G1 from joint armature (10 Hz natural frequency, damping ratio 2)."""
    return pd_gains_from_armature(model)


def load_g1(headless: bool = True, mjcf_path: str | Path | None = None, **kwargs: Any) -> mujoco.MjModel:
    """Load the G1 scene: floor and PD position servos on all 29 joints (the default standing pose is
    ``g1_default_qpos(model)``; the model's own ``qpos0`` is the MJCF's zero pose)."""
    path = Path(mjcf_path) if mjcf_path is not None else g1_asset_paths().mjcf
    kwargs.setdefault("pd_from_armature", True)
    model = load_model(path, headless=headless, **kwargs)
    check_actuated_joints(model, G1_JOINT_NAMES, robot="G1")
    return model
