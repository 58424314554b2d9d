"""Whole-body motion tracking terms: the observations, rewards, terminations and metrics that read the
``MotionCommand`` (``tracking.command``).

Frames: the *anchor* is one body (the G1's ``torso_link``) of both the robot and the reference. Relative body
targets move the reference onto the robot: rotate it by the yaw difference of the anchors about the reference
anchor, then place the reference anchor at the robot anchor's x, y (keeping the reference height), so body
rewards judge posture, not drift. Global anchor rewards judge drift.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import torch

from trainrt.hotpath import cold_path
from trainrt.managers import REQUIRED, ManagerTermBase
from trainrt.mdp.math import quat_apply_inverse, quat_conjugate, quat_error_magnitude, quat_mul, quat_to_6d

if TYPE_CHECKING:
    from trainrt.envs import ManagerBasedRlEnv
    from trainrt.tasks.tracking.command import MotionCommand


def _motion(env: ManagerBasedRlEnv, command_name: str) -> MotionCommand:
    return env.command_manager.get_term(command_name)


# --- observations ---------------------------------------------------------------------------------------------


def motion_anchor_pos_b(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Reference anchor position in the robot anchor's frame (num_envs, 3)."""
    m = _motion(env, command_name)
    return quat_apply_inverse(m.robot_anchor_quat_w, m.ref_anchor_pos_w - m.robot_anchor_pos_w)


def motion_anchor_ori_b(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Reference anchor orientation in the robot anchor's frame, 6D (num_envs, 6)."""
    m = _motion(env, command_name)
    return quat_to_6d(quat_mul(quat_conjugate(m.robot_anchor_quat_w), m.ref_anchor_quat_w))


def robot_body_pos_b(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Tracked body positions in the robot anchor's frame, flattened (num_envs, 3 B)."""
    m = _motion(env, command_name)
    offset = m.robot_body_pos_w - m.robot_anchor_pos_w.unsqueeze(1)
    return quat_apply_inverse(m.robot_anchor_quat_w.unsqueeze(1), offset).reshape(env.num_envs, -1)


def robot_body_ori_b(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Tracked body orientations in the robot anchor's frame, 6D, flattened (num_envs, 6 B)."""
    m = _motion(env, command_name)
    anchor_inv = quat_conjugate(m.robot_anchor_quat_w).unsqueeze(1).expand(-1, len(m.body_names), -1)
    return quat_to_6d(quat_mul(anchor_inv, m.robot_body_quat_w)).reshape(env.num_envs, -1)


# --- rewards ----------------------------------------------------------------------------------------------------


def motion_anchor_pos_exp(env: ManagerBasedRlEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-|p_ref - p|^2 / std^2)`` of the anchor position, world frame (num_envs,)."""
    m = _motion(env, command_name)
    error = (m.ref_anchor_pos_w - m.robot_anchor_pos_w).square().sum(dim=1)
    return torch.exp(-error / std**2)


def motion_anchor_ori_exp(env: ManagerBasedRlEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-angle^2 / std^2)`` of the anchor orientation error (num_envs,)."""
    m = _motion(env, command_name)
    error = quat_error_magnitude(m.ref_anchor_quat_w, m.robot_anchor_quat_w).square()
    return torch.exp(-error / std**2)


def motion_body_pos_exp(env: ManagerBasedRlEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-mean_b |p_target - p|^2 / std^2)`` over tracked bodies, anchor-relative targets (num_envs,)."""
    m = _motion(env, command_name)
    target, _ = m.relative_body_targets()
    error = (target - m.robot_body_pos_w).square().sum(dim=-1).mean(dim=1)
    return torch.exp(-error / std**2)


def motion_body_ori_exp(env: ManagerBasedRlEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-mean_b angle^2 / std^2)`` over tracked bodies, anchor-relative targets (num_envs,)."""
    m = _motion(env, command_name)
    _, target = m.relative_body_targets()
    error = quat_error_magnitude(target, m.robot_body_quat_w).square().mean(dim=1)
    return torch.exp(-error / std**2)


def motion_body_lin_vel_exp(env: ManagerBasedRlEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-mean_b |v_ref - v|^2 / std^2)`` of tracked body linear velocities, world frame (num_envs,)."""
    m = _motion(env, command_name)
    robot = m.robot_body_lin_vel_w
    error = (m.ref_body_lin_vel_w - robot).square().sum(dim=-1).mean(dim=1)
    return torch.exp(-error / std**2)


def motion_body_ang_vel_exp(env: ManagerBasedRlEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-mean_b |w_ref - w|^2 / std^2)`` of tracked body angular velocities, world frame (num_envs,)."""
    m = _motion(env, command_name)
    robot = m.robot_body_ang_vel_w
    error = (m.ref_body_ang_vel_w - robot).square().sum(dim=-1).mean(dim=1)
    return torch.exp(-error / std**2)


# --- terminations -----------------------------------------------------------------------------------------------


def motion_finished(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Rows at the clip's last frame (num_envs,); configure with ``time_out=True``."""
    m = _motion(env, command_name)
    return m.frame >= m.num_frames - 1


def anchor_height_error(env: ManagerBasedRlEnv, command_name: str, threshold: float) -> torch.Tensor:
    """Rows whose anchor height differs from the reference by more than ``threshold`` m (num_envs,)."""
    m = _motion(env, command_name)
    return (m.ref_anchor_pos_w[:, 2] - m.robot_anchor_pos_w[:, 2]).abs() > threshold


def anchor_orientation_error(env: ManagerBasedRlEnv, command_name: str, threshold: float) -> torch.Tensor:
    """Rows whose anchor tilt differs from the reference's: |g_z(ref) - g_z(robot)| > ``threshold`` (num_envs,).

    ``g_z`` is the vertical component of gravity's direction in the anchor frame (-1 upright, +1 inverted).
    """
    m = _motion(env, command_name)
    ref_z = _gravity_z_in_frame(m.ref_anchor_quat_w)
    robot_z = _gravity_z_in_frame(m.robot_anchor_quat_w)
    return (ref_z - robot_z).abs() > threshold


def _gravity_z_in_frame(quat: torch.Tensor) -> torch.Tensor:
    """z of the world's (0, 0, -1) expressed in the frames ``quat`` (num_envs,): ``-R[2, 2]``."""
    x, y = quat[..., 1], quat[..., 2]
    return 2.0 * (x * x + y * y) - 1.0


class BodyHeightError(ManagerTermBase):
    """Rows where any of ``body_names`` is off its anchor-relative target height by more than ``threshold``."""

    PARAMS: ClassVar[dict[str, Any]] = {
        "command_name": "motion",
        "threshold": REQUIRED,
        "body_names": REQUIRED,
    }

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        self.command_name = str(self.params["command_name"])
        self.threshold = float(self.params["threshold"])
        motion = env.command_manager.get_term(self.command_name)
        names = tuple(self.params["body_names"])
        missing = [n for n in names if n not in motion.body_names]
        if not names or missing:
            raise ValueError(
                f"BodyHeightError: body_names {list(names)} must be tracked bodies {motion.body_names}"
            )
        self.indices = torch.tensor(
            [motion.body_names.index(n) for n in names], dtype=torch.long, device=env.device
        )

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """Evaluate for all rows."""
        m = _motion(env, self.command_name)
        target, _ = m.relative_body_targets()
        error = (target[:, self.indices, 2] - m.robot_body_pos_w[:, self.indices, 2]).abs()
        return (error > self.threshold).any(dim=1)


# --- metrics --------------------------------------------------------------------------------------------------


def anchor_pos_error(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Anchor position error (num_envs,) m."""
    m = _motion(env, command_name)
    return (m.ref_anchor_pos_w - m.robot_anchor_pos_w).norm(dim=1)


def anchor_ori_error(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Anchor orientation error (num_envs,) rad."""
    m = _motion(env, command_name)
    return quat_error_magnitude(m.ref_anchor_quat_w, m.robot_anchor_quat_w)


def body_pos_error(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Mean anchor-relative body position error over tracked bodies (num_envs,) m."""
    m = _motion(env, command_name)
    target, _ = m.relative_body_targets()
    return (target - m.robot_body_pos_w).norm(dim=-1).mean(dim=1)


def joint_pos_error(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Joint position error norm against the reference (num_envs,) rad."""
    m = _motion(env, command_name)
    return (m.ref_joint_pos - env.robot.joint_pos).norm(dim=1)


def sampling_entropy(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Normalized entropy of the start-bin distribution (1 = uniform), the same for every row (num_envs,)."""
    return _motion(env, command_name).sampling_entropy.expand(env.num_envs)
