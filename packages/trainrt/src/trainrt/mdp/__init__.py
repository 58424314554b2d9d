"""Reusable MDP terms (observations, rewards, terminations, events, commands, metrics) and the rotation math.

Terms are plain functions ``func(env, **params)`` or small classes that resolve names once at construction
(``Cls(cfg, env)``, then ``instance(env, **params)``). Every per-step path is fixed-shape and sync-free.
"""

from trainrt.mdp import math
from trainrt.mdp.commands import GaitPhaseCommand, UniformVelocityCommand
from trainrt.mdp.events import (
    PushByVelocity,
    RandomizeGeomFriction,
    ResetJointsAroundDefault,
    ResetRootStateUniform,
)
from trainrt.mdp.metrics import ang_vel_error_z, lin_vel_error_xy, root_height
from trainrt.mdp.observations import (
    BodyHeight,
    FootContact,
    base_ang_vel,
    base_height,
    base_lin_vel,
    generated_commands,
    joint_pos_rel,
    joint_vel,
    last_action,
    projected_gravity,
)
from trainrt.mdp.rewards import (
    FeetContactPhase,
    FeetSlipL2,
    JointDeviationL1,
    JointPosLimits,
    UndesiredContacts,
    action_rate_l2,
    alive,
    ang_vel_xy_l2,
    base_height_l2,
    flat_orientation_l2,
    joint_torques_l2,
    lin_vel_z_l2,
    self_collision_count,
    track_ang_vel_z_exp,
    track_lin_vel_xy_exp,
)
from trainrt.mdp.state_layout import RobotStateLayout, robot_state_layout
from trainrt.mdp.terminations import bad_orientation, root_height_below_minimum, time_out

__all__ = [
    "BodyHeight",
    "FeetContactPhase",
    "FeetSlipL2",
    "FootContact",
    "GaitPhaseCommand",
    "JointDeviationL1",
    "JointPosLimits",
    "PushByVelocity",
    "RandomizeGeomFriction",
    "ResetJointsAroundDefault",
    "ResetRootStateUniform",
    "RobotStateLayout",
    "UndesiredContacts",
    "UniformVelocityCommand",
    "action_rate_l2",
    "alive",
    "ang_vel_error_z",
    "ang_vel_xy_l2",
    "bad_orientation",
    "base_ang_vel",
    "base_height",
    "base_height_l2",
    "base_lin_vel",
    "flat_orientation_l2",
    "generated_commands",
    "joint_pos_rel",
    "joint_torques_l2",
    "joint_vel",
    "last_action",
    "lin_vel_error_xy",
    "lin_vel_z_l2",
    "math",
    "projected_gravity",
    "robot_state_layout",
    "root_height",
    "root_height_below_minimum",
    "self_collision_count",
    "time_out",
    "track_ang_vel_z_exp",
    "track_lin_vel_xy_exp",
]
