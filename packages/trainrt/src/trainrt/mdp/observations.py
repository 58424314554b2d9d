"""Observation terms: ``func(env, **params) -> (num_envs, D)`` float32, or small classes that resolve names once."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from trainrt.mdp.rewards import shared_in_contact
from trainrt.mdp.term_bases import BodySubsetTerm, ContactThresholdTerm

if TYPE_CHECKING:
    from trainrt.envs import ManagerBasedRlEnv


def base_lin_vel(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Root linear velocity in the root frame (num_envs, 3)."""
    return env.robot.root_lin_vel_b


def base_ang_vel(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Root angular velocity in the root frame (num_envs, 3)."""
    return env.robot.root_ang_vel_b


def projected_gravity(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Unit gravity direction in the root frame (num_envs, 3); ``(0, 0, -1)`` when upright."""
    return env.robot.projected_gravity_b


def base_height(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Root height above the world origin (flat ground at z = 0) (num_envs, 1)."""
    return env.robot.root_pos_w[:, 2:3]


def joint_pos_rel(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Joint positions relative to the default pose (num_envs, J)."""
    return env.robot.joint_pos - env.robot.default_joint_pos


def joint_vel(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Joint velocities (num_envs, J) (the default joint velocity is zero)."""
    return env.robot.joint_vel


def last_action(env: ManagerBasedRlEnv) -> torch.Tensor:
    """The action applied in the last step (num_envs, A); zero right after a reset."""
    return env.action_manager.action


def generated_commands(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """The current command of term ``command_name`` (num_envs, D)."""
    return env.command_manager.command(command_name)


class BodyHeight(BodySubsetTerm):
    """Heights above flat ground (world z) of the bodies ``body_names`` (num_envs, len(body_names))."""

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """Evaluate for all rows."""
        return env.robot.body_pos_w[:, self.body_ids, 2]


class FootContact(ContactThresholdTerm):
    """1.0 where a foot's net contact force exceeds ``force_threshold`` newtons, else 0.0 (num_envs, F)."""

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """Evaluate for all rows."""
        return shared_in_contact(env, self).to(torch.float32)
