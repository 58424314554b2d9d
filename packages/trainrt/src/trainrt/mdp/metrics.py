"""Metric terms: ``func(env, **params) -> (num_envs,)`` in physical units, averaged per episode; never rewards."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from trainrt.envs import ManagerBasedRlEnv


def lin_vel_error_xy(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Planar velocity tracking error ``|v_cmd_xy - v_xy|`` in the root frame (num_envs,) m/s."""
    command = env.command_manager.command(command_name)
    return (command[:, :2] - env.robot.root_lin_vel_b[:, :2]).norm(dim=1)


def ang_vel_error_z(env: ManagerBasedRlEnv, command_name: str) -> torch.Tensor:
    """Yaw-rate tracking error ``|wz_cmd - wz|`` (num_envs,) rad/s."""
    command = env.command_manager.command(command_name)
    return (command[:, 2] - env.robot.root_ang_vel_b[:, 2]).abs()


def root_height(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Root height over flat ground (num_envs,) m."""
    return env.robot.root_pos_w[:, 2]
