"""Unitree G1 (29 DoF) model constants and loader over the holosoma MJCF."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mujoco
import numpy as np

from simcore._src.assets import g1_asset_paths
from simcore._src.model import PdGains, check_actuated_joints, load_model, pd_gains_from_armature

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


def _pose_qpos(model: mujoco.MjModel, root_height: float) -> np.ndarray:
    """``qpos0`` with the default joint positions, the root at ``(0, 0, root_height)``, identity orientation."""
    qpos = model.qpos0.copy()
    qpos[:3] = (0.0, 0.0, root_height)
    qpos[3:7] = (1.0, 0.0, 0.0, 0.0)
    for name, value in G1_DEFAULT_JOINT_POS.items():
        qpos[model.jnt_qposadr[model.joint(name).id]] = value
    return qpos


def _lowest_point(model: mujoco.MjModel, data: mujoco.MjData, geom: int) -> float:
    """World z of the lowest point of a sphere, capsule or box geom after ``mj_kinematics``."""
    kind, size = int(model.geom_type[geom]), model.geom_size[geom]
    center, axes = data.geom_xpos[geom], data.geom_xmat[geom].reshape(3, 3)
    if kind == mujoco.mjtGeom.mjGEOM_SPHERE.value:
        return float(center[2] - size[0])
    if kind == mujoco.mjtGeom.mjGEOM_CAPSULE.value:
        return float(center[2] - size[0] - size[1] * abs(axes[2, 2]))
    if kind == mujoco.mjtGeom.mjGEOM_BOX.value:
        return float(center[2] - np.abs(axes[2, :]) @ size[:3])
    name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, geom)
    raise NotImplementedError(f"geom {name!r}: lowest point known for sphere, capsule and box only")


def g1_standing_root_height(model: mujoco.MjModel, clearance: float = G1_SOLE_CLEARANCE) -> float:
    """Pelvis height (m) at which the default pose's soles rest ``clearance`` above flat ground (z = 0)."""
    _check_g1(model, "g1_standing_root_height")
    data = mujoco.MjData(model)
    data.qpos[:] = _pose_qpos(model, 0.0)
    mujoco.mj_kinematics(model, data)
    foot_bodies = {model.body(name).id for name in G1_FOOT_BODIES}
    soles = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in foot_bodies]
    return -min(_lowest_point(model, data, g) for g in soles) + clearance


def g1_default_qpos(model: mujoco.MjModel) -> np.ndarray:
    """Return the default standing qpos ``(nq,)``: the default joint positions, identity orientation, and the
    pelvis at ``g1_standing_root_height(model)`` (soles just above the floor)."""
    _check_g1(model, "g1_default_qpos")
    return _pose_qpos(model, g1_standing_root_height(model))


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
