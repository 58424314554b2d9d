"""The training model as motion clips meet it: its layout (one free joint for the root, its hinge and slide
joints in model order with their ranges), rotation of vector tracks by the root's quaternions, and forward
kinematics with CPU MuJoCo, which gives the body targets of the bodies the policy controls."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mujoco
import numpy as np

from trainrt.hotpath import cold_path


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
