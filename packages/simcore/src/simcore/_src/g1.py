"""Unitree G1 (29 DoF) model constants and loader over the holosoma MJCF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simcore._src.assets import g1_asset_paths
from simcore._src.model import PdGains, load_model, pd_gains_from_armature

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

G1_DEFAULT_ROOT_HEIGHT = 0.76
"""Pelvis height (m) of the default pose with both feet resting on the floor."""

G1_FOOT_BODIES = ("left_ankle_roll_link", "right_ankle_roll_link")


def g1_default_qpos(model: mujoco.MjModel) -> np.ndarray:
    """Return the default standing qpos ``(nq,)``: pelvis at the default height, identity orientation."""
    qpos = model.qpos0.copy()
    qpos[:3] = (0.0, 0.0, G1_DEFAULT_ROOT_HEIGHT)
    qpos[3:7] = (1.0, 0.0, 0.0, 0.0)
    for name, value in G1_DEFAULT_JOINT_POS.items():
        qpos[model.jnt_qposadr[model.joint(name).id]] = value
    return qpos


def g1_pd_gains(model: mujoco.MjModel) -> PdGains:
    """PD gains for the G1 from joint armature (10 Hz natural frequency, damping ratio 2)."""
    return pd_gains_from_armature(model)


def load_g1(headless: bool = True, mjcf_path: str | Path | None = None, **kwargs: Any) -> mujoco.MjModel:
    """Load the G1 scene: floor, PD position servos on all 29 joints, default pose as ``qpos0``-keyframe 0."""
    path = Path(mjcf_path) if mjcf_path is not None else g1_asset_paths().mjcf
    kwargs.setdefault("pd_from_armature", True)
    model = load_model(path, headless=headless, **kwargs)
    names = tuple(model.actuator(i).name for i in range(model.nu))
    joints = tuple(model.joint(model.actuator_trnid[i, 0]).name for i in range(model.nu))
    if joints != G1_JOINT_NAMES:
        raise ValueError(f"G1 actuators drive {joints}, expected {G1_JOINT_NAMES} (actuators {names})")
    return model
