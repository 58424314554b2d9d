"""The Unitree G1 for simcore's own tests, as a realistic model: its cached MJCF and the pose constants simcore
tests need (copied from trainrt's description ``trainrt.robots.G1``, which owns them; simcore imports no
robot and no trainrt). ``python -m trainrt.robots fetch`` (``make setup``) fetches the MJCF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mujoco
import numpy as np

import simcore

HOLOSOMA_WHEEL = simcore.PinnedWheel(
    requirement="holosoma==0.0.3",
    filename="holosoma-0.0.3-py3-none-any.whl",
    sha256="1c007c27dbf130c04533af6052649d88da32eaa9b54e69c6d39009e979a2312f",
)

_LEG = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
_ARM = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")
G1_JOINT_NAMES: tuple[str, ...] = (
    *(f"{side}_{j}_joint" for side in ("left", "right") for j in _LEG),
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    *(f"{side}_{j}_joint" for side in ("left", "right") for j in _ARM),
)
"""Joint names in actuator order."""

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
"""Knees-bent standing pose in radians; joints not listed are 0."""

G1_FOOT_BODIES: tuple[str, ...] = ("left_ankle_roll_link", "right_ankle_roll_link")
G1_SOLE_CLEARANCE = 0.002


def g1_mjcf_path() -> Path:
    """The cached G1 MJCF; FileNotFoundError naming the fetch command when it is missing."""
    path = simcore.asset_dir(HOLOSOMA_WHEEL) / "robots" / "g1" / "g1_29dof.xml"
    if not path.is_file():
        raise FileNotFoundError(f"G1 model not found at {path}; run `make setup` to fetch it.")
    return path


def load_g1(mjcf_path: str | Path | None = None, **kwargs: Any) -> mujoco.MjModel:
    """The headless G1 with a floor and PD servos from armature on all 29 joints (as trainrt loads it)."""
    kwargs.setdefault("pd_from_armature", True)
    model = simcore.load_model(mjcf_path if mjcf_path is not None else g1_mjcf_path(), **kwargs)
    simcore.check_actuated_joints(model, G1_JOINT_NAMES, robot="G1")
    return model


def g1_standing_root_height(model: mujoco.MjModel) -> float:
    """Pelvis height (m) at which the default pose's soles rest just above the floor."""
    return simcore.standing_root_height(model, G1_DEFAULT_JOINT_POS, G1_FOOT_BODIES, G1_SOLE_CLEARANCE)


def g1_default_qpos(model: mujoco.MjModel) -> np.ndarray:
    """The default standing qpos (nq,)."""
    return simcore.pose_qpos(model, G1_DEFAULT_JOINT_POS, g1_standing_root_height(model))


def g1_pd_gains(model: mujoco.MjModel) -> simcore.PdGains:
    """The G1's PD gains (armature-derived, 10 Hz, damping ratio 2)."""
    return simcore.pd_gains_from_armature(model)
