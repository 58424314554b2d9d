"""Velocity tracking on flat ground for any legged robot: ``velocity_env_cfg(robot)`` takes a
``RobotDescription`` and holds no robot name of its own (``g1_walk_flat`` is its G1 registration).

dt 5 ms, decimation 4 (50 Hz control), 20 s episodes; PD position targets around the default pose, action -1/+1
``action_scale_multiple`` PPO-style steps from it (``robot_terms.scaled_action_params``, clamped to the joint
limits; adr/0014). The feet (any number) come from the robot in gait-clock order; every contact, height and
slip term sums or averages over them. Every joint group of the robot gets an L1 deviation term.

Reward weights are chosen from published G1 velocity presets ("anchors"), cited per term below:
mjlab ``velocity/config/g1`` (PPO, no penalty curriculum), holosoma ``g1_29dof_loco`` (PPO and FastSAC
presets, whose large penalty weights are ramped in by a penalty curriculum this task does not run), and
Isaac Lab's ``Isaac-Velocity-Flat-G1-v0`` (the task FlashSAC was tuned on). Where they disagree we take the
values that work without a curriculum. holosoma uses the same weights for its G1 and T1 presets, so they are
the task's for every robot.
"""

from __future__ import annotations

import math

from trainrt import mdp
from trainrt.config.schema import NEVER_S
from trainrt.envs import EnvCfg
from trainrt.hotpath import cold_path
from trainrt.managers import (
    CommandTermCfg,
    EventTermCfg,
    MetricTermCfg,
    ObsGroupCfg,
    ObsTermCfg,
    RewardTermCfg,
    TerminationTermCfg,
    UniformNoiseCfg,
)
from trainrt.robots import RobotDescription
from trainrt.tasks.robot_terms import foot_friction_event, joint_position_actions, scaled_action_params

TWIST = "twist"
GAIT = "gait"

ACTION_SCALE_MULTIPLE = 3.0
"""Walking's action bounds in units of the robot's action scale (``RobotDescription.action_scales``): +-1 is
three of the PPO-style steps, the range Gaussian PPO policies actually use, instead of the joint limits
(adr/0014)."""


@cold_path
def _observations(robot: RobotDescription) -> dict[str, ObsGroupCfg]:
    # Noise levels follow mjlab's velocity task (uniform, per element).
    policy = {
        "base_ang_vel": ObsTermCfg(mdp.base_ang_vel, noise=UniformNoiseCfg(-0.2, 0.2)),
        "projected_gravity": ObsTermCfg(mdp.projected_gravity, noise=UniformNoiseCfg(-0.05, 0.05)),
        "command": ObsTermCfg(mdp.generated_commands, params={"command_name": TWIST}),
        "joint_pos": ObsTermCfg(mdp.joint_pos_rel, noise=UniformNoiseCfg(-0.01, 0.01)),
        "joint_vel": ObsTermCfg(mdp.joint_vel, noise=UniformNoiseCfg(-1.5, 1.5)),
        "actions": ObsTermCfg(mdp.last_action),
        "gait_phase": ObsTermCfg(mdp.generated_commands, params={"command_name": GAIT}),
    }
    critic = {
        **{name: ObsTermCfg(term.func, params=dict(term.params)) for name, term in policy.items()},
        "base_lin_vel": ObsTermCfg(mdp.base_lin_vel),
        "base_height": ObsTermCfg(mdp.base_height),
        "foot_contact": ObsTermCfg(mdp.FootContact, params={"contact_body_names": robot.feet}),
        "foot_height": ObsTermCfg(mdp.BodyHeight, params={"body_names": robot.feet}),
    }
    return {
        "policy": ObsGroupCfg(terms=policy, enable_corruption=True),
        "critic": ObsGroupCfg(terms=critic, enable_corruption=False),
    }


@cold_path
def _rewards(robot: RobotDescription) -> dict[str, RewardTermCfg]:
    feet = {"contact_body_names": robot.feet}
    rewards = {
        # mjlab track_linear_velocity 2.0 (std sqrt 0.25); holosoma tracking_lin_vel 2.0 (sigma^2 0.25).
        "track_lin_vel_xy_exp": RewardTermCfg(
            mdp.track_lin_vel_xy_exp, weight=2.0, params={"command_name": TWIST, "std": 0.5}
        ),
        # holosoma tracking_ang_vel 1.5 (sigma^2 0.25); mjlab uses 2.0 with std sqrt 0.5.
        "track_ang_vel_z_exp": RewardTermCfg(
            mdp.track_ang_vel_z_exp, weight=1.5, params={"command_name": TWIST, "std": 0.5}
        ),
        # Isaac Lab G1 flat lin_vel_z_l2 -0.2 (mjlab and holosoma G1 have no vertical-velocity term).
        "lin_vel_z_l2": RewardTermCfg(mdp.lin_vel_z_l2, weight=-0.2),
        # mjlab G1 body_ang_vel -0.05 and Isaac Lab G1 flat ang_vel_xy_l2 -0.05 (holosoma: -1.0, ramped).
        "ang_vel_xy_l2": RewardTermCfg(mdp.ang_vel_xy_l2, weight=-0.05),
        # Isaac Lab G1 flat flat_orientation_l2 -1.0 (holosoma penalty_orientation: -10.0, ramped).
        "flat_orientation_l2": RewardTermCfg(mdp.flat_orientation_l2, weight=-1.0),
        # unitree_rl_gym G1 base_height -10.0 (target 0.78); ours targets the default pose's height.
        "base_height_l2": RewardTermCfg(
            mdp.base_height_l2, weight=-10.0, params={"target_height": robot.standing_root_height()}
        ),
        # mjlab action_rate_l2 -0.1 (holosoma: -2.0, ramped; Isaac Lab G1 flat: -0.005).
        "action_rate_l2": RewardTermCfg(mdp.action_rate_l2, weight=-0.1),
        # mjlab dof_pos_limits -1.0; Isaac Lab G1 flat -1.0.
        "joint_pos_limits": RewardTermCfg(mdp.JointPosLimits, weight=-1.0),
        # Isaac Lab G1 flat dof_torques_l2 -2e-6 (legs there; all joints here).
        "joint_torques_l2": RewardTermCfg(mdp.joint_torques_l2, weight=-2.0e-6),
        # mjlab foot_slip -0.1; Isaac Lab G1 feet_slide -0.1.
        "feet_slip_l2": RewardTermCfg(
            mdp.FeetSlipL2, weight=-0.1, params={"body_names": robot.feet, **feet, "force_threshold": 1.0}
        ),
        # Isaac Lab G1 flat joint_deviation_hip / _torso / _arms: -0.1 each, L1 over the group.
        **{
            f"{group}_deviation_l1": RewardTermCfg(
                mdp.JointDeviationL1, weight=-0.1, params={"joint_names": patterns}
            )
            for group, patterns in robot.joint_groups.items()
        },
        # Contact-schedule version of holosoma's feet_phase (5.0, a foot-height kernel); unitree_rl_gym's
        # G1 "contact" term is the same indicator at 0.18 next to a tracking weight of 1.0. Kept well
        # below velocity tracking so stepping in place cannot out-earn walking.
        "feet_contact_phase": RewardTermCfg(
            mdp.FeetContactPhase,
            weight=0.5,
            params={
                **feet,
                "gait_command_name": GAIT,
                "velocity_command_name": TWIST,
                "stance_fraction": 0.55,
                "force_threshold": 1.0,
                "standing_threshold": 0.1,
            },
        ),
        # holosoma g1_29dof_loco alive 1.0 (its FastSAC preset raises it to 10.0).
        "alive": RewardTermCfg(mdp.alive, weight=1.0),
    }
    if robot.self_collision_pairs:
        # mjlab G1 velocity self_collisions -1.0 (a count of the contacts of the robot's self_collision_pairs).
        rewards["self_collisions"] = RewardTermCfg(mdp.self_collision_count, weight=-1.0)
    return rewards


@cold_path
def velocity_env_cfg(
    robot: RobotDescription,
    *,
    gait_period_s: float = 0.8,
    extra_bodies: tuple[str, ...] = (),
    action_scale_multiple: float = ACTION_SCALE_MULTIPLE,
) -> EnvCfg:
    """Velocity tracking on flat ground for ``robot``: config of every manager (see the module docstring for
    the anchors).

    Args:
        robot: the robot (feet, joint groups, standing height, action scale, foot geoms, scene).
        gait_period_s: duration of one gait cycle of the gait clock (s).
        extra_bodies: bodies the scene reads besides the root and the feet (the G1 walk reads its torso).
        action_scale_multiple: action bounds in units of the robot's action scale.
    """
    scene = robot.scene(bodies=(robot.root_body, *extra_bodies, *robot.feet), contact_bodies=robot.feet)
    actions = joint_position_actions(scaled_action_params(robot, action_scale_multiple))
    commands = {
        # The command's declared defaults are this task's ranges and row fractions (docs/tasks.md lists them).
        TWIST: CommandTermCfg(
            mdp.UniformVelocityCommand,
            params=dict(mdp.UniformVelocityCommand.PARAMS),
            resampling_time_range_s=(8.0, 12.0),
        ),
        GAIT: CommandTermCfg(
            mdp.GaitPhaseCommand,
            params={"period_s": gait_period_s, "foot_offsets": robot.gait_offsets},
            resampling_time_range_s=(NEVER_S, NEVER_S),
        ),
    }
    terminations = {
        "time_out": TerminationTermCfg(mdp.time_out, time_out=True),
        "fell_over": TerminationTermCfg(mdp.bad_orientation, params={"limit_angle": math.radians(70.0)}),
        "base_too_low": TerminationTermCfg(mdp.root_height_below_minimum, params={"minimum_height": 0.3}),
    }
    events = {
        "foot_friction": foot_friction_event(robot),
        "reset_base": EventTermCfg(
            mdp.ResetRootStateUniform,
            mode="reset",
            params={"pose_range": {"x": (-0.5, 0.5), "y": (-0.5, 0.5), "yaw": (-math.pi, math.pi)}},
        ),
        "reset_joints": EventTermCfg(
            mdp.ResetJointsAroundDefault, mode="reset", params={"position_range": (-0.1, 0.1)}
        ),
        "push_robot": EventTermCfg(
            mdp.PushByVelocity,
            mode="interval",
            interval_range_s=(5.0, 10.0),
            params={"velocity_range": {"x": (-0.5, 0.5), "y": (-0.5, 0.5)}},
        ),
    }
    metrics = {
        "lin_vel_error_xy": MetricTermCfg(mdp.lin_vel_error_xy, params={"command_name": TWIST}),
        "ang_vel_error_z": MetricTermCfg(mdp.ang_vel_error_z, params={"command_name": TWIST}),
        "root_height": MetricTermCfg(mdp.root_height),
    }
    return EnvCfg(
        scene=scene,
        decimation=4,
        episode_length_s=20.0,
        actions=actions,
        observations=_observations(robot),
        rewards=_rewards(robot),
        terminations=terminations,
        events=events,
        commands=commands,
        metrics=metrics,
    )
