"""Termination terms: ``func(env, **params) -> (num_envs,)`` bool. Time-out terms are flagged in their config."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from trainrt.envs import ManagerBasedRlEnv


def time_out(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Rows that reached the episode length limit (num_envs,); configure with ``time_out=True``."""
    return env.episode_length_buf >= env.max_episode_length


def bad_orientation(env: ManagerBasedRlEnv, limit_angle: float) -> torch.Tensor:
    """Rows whose root tilts more than ``limit_angle`` rad from upright (num_envs,)."""
    # The tilt angle is acos(-g_z) with g the unit gravity direction in the root frame.
    return env.robot.projected_gravity_b[:, 2] > -math.cos(limit_angle)


def root_height_below_minimum(env: ManagerBasedRlEnv, minimum_height: float) -> torch.Tensor:
    """Rows whose root is lower than ``minimum_height`` m over flat ground (num_envs,)."""
    return env.robot.root_pos_w[:, 2] < minimum_height
