"""Standing poses of a free-floating robot: the qpos of a named joint pose and the root height that sets its
feet on flat ground. Cold path only (NumPy on host-side model arrays)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import mujoco
import numpy as np


def _check_pose_names(
    model: mujoco.MjModel, joint_pos: Mapping[str, float], bodies: Sequence[str], what: str
) -> None:
    """ValueError unless ``model``'s first joint is free and it has every joint of ``joint_pos`` and every body."""
    if not (model.njnt > 0 and model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE):
        raise ValueError(
            f"{what} needs a model whose root body has a free joint; its first joint is not free"
        )
    joints = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in range(model.njnt)}
    names = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, b) for b in range(model.nbody)}
    missing = [n for n in joint_pos if n not in joints] + [n for n in bodies if n not in names]
    if missing:
        more = " ..." if len(missing) > 4 else ""
        raise ValueError(f"{what}: the model lacks the named joints or bodies {missing[:4]}{more}")


def pose_qpos(model: mujoco.MjModel, joint_pos: Mapping[str, float], root_height: float) -> np.ndarray:
    """``qpos0`` (nq,) with ``joint_pos`` (joint name -> radians; others keep ``qpos0``), the free root at
    ``(0, 0, root_height)`` and identity orientation."""
    _check_pose_names(model, joint_pos, (), "pose_qpos")
    qpos = model.qpos0.copy()
    qpos[:3] = (0.0, 0.0, root_height)
    qpos[3:7] = (1.0, 0.0, 0.0, 0.0)
    for name, value in joint_pos.items():
        qpos[model.jnt_qposadr[model.joint(name).id]] = value
    return qpos


def lowest_geom_point(model: mujoco.MjModel, data: mujoco.MjData, geom: int) -> float:
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


def standing_root_height(
    model: mujoco.MjModel, joint_pos: Mapping[str, float], feet: Sequence[str], clearance: float
) -> float:
    """Root height (m) at which the pose ``joint_pos`` rests the lowest geom of the ``feet`` bodies
    ``clearance`` above flat ground (z = 0)."""
    _check_pose_names(model, joint_pos, feet, "standing_root_height")
    data = mujoco.MjData(model)
    data.qpos[:] = pose_qpos(model, joint_pos, 0.0)
    mujoco.mj_kinematics(model, data)
    foot_bodies = {model.body(name).id for name in feet}
    soles = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in foot_bodies]
    if not soles:
        raise ValueError(f"standing_root_height: the feet {list(feet)} have no geoms to stand on")
    return -min(lowest_geom_point(model, data, g) for g in soles) + clearance
