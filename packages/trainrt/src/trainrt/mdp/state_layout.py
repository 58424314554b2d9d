"""Where the robot's root and joints live in ``qpos``/``qvel``, for terms that write state (resets, pushes)."""

from __future__ import annotations

from dataclasses import dataclass

import mujoco
import torch

from trainrt.hotpath import cold_path
from trainrt.managers import ManagedEnv
from trainrt.managers.base import index_or_slice


@dataclass(frozen=True)
class RobotStateLayout:
    """Column layout of the floating-base robot in ``qpos`` (nq) and ``qvel`` (nv).

    Attributes:
        root_pos: root position columns of qpos (3).
        root_quat: root orientation columns of qpos, wxyz (4).
        root_lin_vel: root linear velocity columns of qvel, world frame (3).
        root_ang_vel: root angular velocity columns of qvel, root (body) frame (3).
        joint_pos: columns of the robot's 1-DoF joints in qpos, in ``env.robot.joint_names`` order (J).
        joint_vel: columns of those joints in qvel (J).
    """

    root_pos: slice
    root_quat: slice
    root_lin_vel: slice
    root_ang_vel: slice
    joint_pos: slice | torch.Tensor
    joint_vel: slice | torch.Tensor


@cold_path
def robot_state_layout(env: ManagedEnv) -> RobotStateLayout:
    """Resolve the layout from the env's model and its robot view's joint order; ValueError without a root."""
    model = env.backend.mj_model
    free = [j for j in range(model.njnt) if int(model.jnt_type[j]) == mujoco.mjtJoint.mjJNT_FREE.value]
    if not free:
        raise ValueError("the model has no free joint: root-state terms need a floating base")
    q, d = int(model.jnt_qposadr[free[0]]), int(model.jnt_dofadr[free[0]])
    joint_ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, name) for name in env.robot.joint_names]
    return RobotStateLayout(
        root_pos=slice(q, q + 3),
        root_quat=slice(q + 3, q + 7),
        root_lin_vel=slice(d, d + 3),
        root_ang_vel=slice(d + 3, d + 6),
        joint_pos=index_or_slice([int(model.jnt_qposadr[j]) for j in joint_ids], env.device),
        joint_vel=index_or_slice([int(model.jnt_dofadr[j]) for j in joint_ids], env.device),
    )
