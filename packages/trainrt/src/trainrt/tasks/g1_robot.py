"""The Unitree G1 pieces both G1 tasks share: body and geom names, action scales, standing height, scene."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import mujoco
import numpy as np

import simcore
from trainrt.envs import SceneCfg
from trainrt.hotpath import cold_path

G1_FOOT_BODIES: tuple[str, ...] = ("left_ankle_roll_link", "right_ankle_roll_link")
"""Foot bodies, left then right (the gait clock's order)."""

G1_FOOT_GEOMS = r"(left|right)_foot[1-7]_collision"
"""Collision geoms of the soles (seven capsules per foot)."""

G1_ACTION_SCALE_FACTOR = 0.25
"""Action scale per joint = factor * effort_limit / kp: an action of 1 asks for a quarter of the joint's peak
torque as static PD error (mjlab's G1 convention), so strong and weak joints get comparable authority."""


@cold_path
@functools.cache
def g1_action_scale() -> dict[str, float]:
    """Joint name -> action scale (rad per unit action) from the G1's PD gains and effort limits."""
    model = simcore.load_g1()
    gains = simcore.g1_pd_gains(model)
    return {
        name: float(G1_ACTION_SCALE_FACTOR * effort / kp)
        for name, kp, effort in zip(simcore.G1_JOINT_NAMES, gains.kp, gains.effort_limit)
    }


@cold_path
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
    raise NotImplementedError(f"geom {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, geom)!r}: "
                              "lowest point known for sphere, capsule and box only")  # fmt: skip


@cold_path
@functools.cache
def g1_standing_root_height(clearance: float = 0.002) -> float:
    """Pelvis height (m) at which the default pose's soles rest ``clearance`` above flat ground."""
    model = simcore.load_g1()
    data = mujoco.MjData(model)
    data.qpos[:] = model.qpos0
    data.qpos[:3] = 0.0
    data.qpos[3:7] = (1.0, 0.0, 0.0, 0.0)
    for name, value in simcore.G1_DEFAULT_JOINT_POS.items():
        data.qpos[model.jnt_qposadr[model.joint(name).id]] = value
    mujoco.mj_kinematics(model, data)
    foot_bodies = {model.body(name).id for name in G1_FOOT_BODIES}
    soles = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in foot_bodies]
    return -min(_lowest_point(model, data, g) for g in soles) + clearance


@cold_path
def g1_scene(
    bodies: Sequence[str],
    contact_bodies: Sequence[str] = G1_FOOT_BODIES,
    foot_bodies: Sequence[str] = G1_FOOT_BODIES,
) -> SceneCfg:
    """The G1 scene (headless model, floor, PD servos) reading ``bodies`` and ``contact_bodies``."""
    return SceneCfg(
        model_factory=simcore.load_g1,
        bodies=tuple(bodies),
        contact_bodies=tuple(contact_bodies),
        foot_bodies=tuple(foot_bodies),
        init_root_height=g1_standing_root_height(),
        default_joint_pos=dict(simcore.G1_DEFAULT_JOINT_POS),
    )
