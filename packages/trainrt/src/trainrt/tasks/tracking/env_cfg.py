"""BeyondMimic-style whole-body tracking of one reference clip for any robot: ``motion_tracking_env_cfg(robot,
motion_file, ...)`` takes a ``RobotDescription`` and the robot's body choices, and holds no robot name of its own
(``g1_motion_tracking`` is its G1 registration).

dt 5 ms, decimation 4 (50 Hz), 10 s episodes (a row also ends, as a time-out, at the clip's last frame).
The clip names its joints and (optionally) its bodies; the loader maps them onto the robot's by name and
refuses a clip naming a joint the robot lacks (``trainrt.motion.loader``, *Names*). A clip recorded on
terrain brings its scene: the meshes ``trainrt.motion.scenes.CLIP_SCENES`` lists for it are in every world
(``SceneCfg.terrain_meshes``), and the reference state init puts the robot at the clip's root pose on them.
Terms, sigmas and weights follow BeyondMimic as published in mjlab's ``tracking_env_cfg`` (the anchor for
every value below unless a comment says otherwise).
"""

from __future__ import annotations

from pathlib import Path

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
from trainrt.motion.scenes import clip_scene, needs_scene
from trainrt.robots import RobotDescription
from trainrt.tasks.robot_terms import foot_friction_event, joint_position_actions
from trainrt.tasks.tracking import mdp as tracking
from trainrt.tasks.tracking.command import MotionCommand, resolve_motion_file
from trainrt.terrain.cfg import TerrainMeshCfg

MOTION = "motion"
ACTION_PARAMS: dict[str, object] = {"mode": "joint_limits", "soft_limit_factor": 1.0}
"""``JointPositionAction`` params of the tracking task, made for tanh-bounded policies (SAC, FlashSAC): action
-1/+1 reaches the joint limits on either side of the default pose (the G1's default clip touches the ankle-roll
and waist-pitch limits, so the soft-limit factor stays 1). ``robot.action_scales()`` is the PPO-style
alternative (``{"mode": "scale", "scale": robot.action_scales()}``); walking uses three times it
(``trainrt.tasks.velocity``)."""
PUSH_VELOCITY_RANGE = {
    "x": (-0.5, 0.5),
    "y": (-0.5, 0.5),
    "z": (-0.2, 0.2),
    "roll": (-0.52, 0.52),
    "pitch": (-0.52, 0.52),
    "yaw": (-0.78, 0.78),
}


@cold_path
def clip_terrain_meshes(
    motion_file: str | Path | None, robots: tuple[RobotDescription, ...] | None = None
) -> tuple[TerrainMeshCfg, ...]:
    """The terrain meshes the clip ``motion_file`` needs (``trainrt.motion.scenes.CLIP_SCENES``), for
    ``SceneCfg.terrain_meshes``: () for a clip recorded on flat ground (and for None, a robot's default clip);
    a listed clip given by name is found among the asset clips of ``robots`` (default: every robot).
    FileNotFoundError naming a clip or mesh file that does not exist."""
    if not needs_scene(motion_file):
        return ()
    return clip_scene(resolve_motion_file(motion_file, robots))


@cold_path
def _observations() -> dict[str, ObsGroupCfg]:
    command = {"command_name": MOTION}
    policy = {
        "command": ObsTermCfg(mdp.generated_commands, params=command),
        "motion_anchor_pos_b": ObsTermCfg(
            tracking.motion_anchor_pos_b, params=command, noise=UniformNoiseCfg(-0.25, 0.25)
        ),
        "motion_anchor_ori_b": ObsTermCfg(
            tracking.motion_anchor_ori_b, params=command, noise=UniformNoiseCfg(-0.05, 0.05)
        ),
        "base_lin_vel": ObsTermCfg(mdp.base_lin_vel, noise=UniformNoiseCfg(-0.5, 0.5)),
        "base_ang_vel": ObsTermCfg(mdp.base_ang_vel, noise=UniformNoiseCfg(-0.2, 0.2)),
        "joint_pos": ObsTermCfg(mdp.joint_pos_rel, noise=UniformNoiseCfg(-0.01, 0.01)),
        "joint_vel": ObsTermCfg(mdp.joint_vel, noise=UniformNoiseCfg(-0.5, 0.5)),
        "actions": ObsTermCfg(mdp.last_action),
    }
    critic = {
        "command": ObsTermCfg(mdp.generated_commands, params=command),
        "motion_anchor_pos_b": ObsTermCfg(tracking.motion_anchor_pos_b, params=command),
        "motion_anchor_ori_b": ObsTermCfg(tracking.motion_anchor_ori_b, params=command),
        "body_pos_b": ObsTermCfg(tracking.robot_body_pos_b, params=command),
        "body_ori_b": ObsTermCfg(tracking.robot_body_ori_b, params=command),
        "base_lin_vel": ObsTermCfg(mdp.base_lin_vel),
        "base_ang_vel": ObsTermCfg(mdp.base_ang_vel),
        "joint_pos": ObsTermCfg(mdp.joint_pos_rel),
        "joint_vel": ObsTermCfg(mdp.joint_vel),
        "actions": ObsTermCfg(mdp.last_action),
    }
    return {
        "policy": ObsGroupCfg(terms=policy, enable_corruption=True),
        "critic": ObsGroupCfg(terms=critic, enable_corruption=False),
    }


@cold_path
def _rewards(robot: RobotDescription, undesired_contact_bodies: tuple[str, ...]) -> dict[str, RewardTermCfg]:
    def tracked(func: object, weight: float, std: float) -> RewardTermCfg:
        return RewardTermCfg(func, weight=weight, params={"command_name": MOTION, "std": std})

    rewards = {
        "motion_anchor_pos_exp": tracked(tracking.motion_anchor_pos_exp, 0.5, 0.3),
        "motion_anchor_ori_exp": tracked(tracking.motion_anchor_ori_exp, 0.5, 0.4),
        "motion_body_pos_exp": tracked(tracking.motion_body_pos_exp, 1.0, 0.3),
        "motion_body_ori_exp": tracked(tracking.motion_body_ori_exp, 1.0, 0.4),
        "motion_body_lin_vel_exp": tracked(tracking.motion_body_lin_vel_exp, 1.0, 1.0),
        "motion_body_ang_vel_exp": tracked(tracking.motion_body_ang_vel_exp, 1.0, 3.14),
        "action_rate_l2": RewardTermCfg(mdp.action_rate_l2, weight=-0.1),
        "joint_pos_limits": RewardTermCfg(mdp.JointPosLimits, weight=-10.0),
    }
    if undesired_contact_bodies:
        # BeyondMimic's original undesired-contact penalty (-0.1, 1 N); mjlab keeps it commented out.
        rewards["undesired_contacts"] = RewardTermCfg(
            mdp.UndesiredContacts,
            weight=-0.1,
            params={"contact_body_names": undesired_contact_bodies, "force_threshold": 1.0},
        )
    if robot.self_collision_pairs:
        # mjlab G1 tracking self_collisions -10.0 (a count of the contacts of the robot's self_collision_pairs).
        rewards["self_collisions"] = RewardTermCfg(mdp.self_collision_count, weight=-10.0)
    return rewards


@cold_path
def motion_tracking_env_cfg(
    robot: RobotDescription,
    motion_file: str | Path | None = None,
    *,
    tracked_bodies: tuple[str, ...],
    anchor_body: str,
    end_effectors: tuple[str, ...] | None = None,
    undesired_contact_bodies: tuple[str, ...] = (),
    action_params: dict[str, object] | None = None,
) -> EnvCfg:
    """Whole-body tracking of one clip by ``robot``: config of every manager (see the module docstring for the
    anchors).

    Args:
        robot: the robot (scene, feet and foot geoms, self-collision pairs; the clip's joints are mapped onto its
            joints by name).
        motion_file: the clip: a path, or a file name among the robot's asset clips; None: the robot's
            ``default_motion``.
        tracked_bodies: the bodies whose poses and velocities are tracked (the scene reads them; a clip that
            names its bodies must name them all).
        anchor_body: the anchor, one of ``tracked_bodies``: its position and orientation are tracked in the
            world frame, the other bodies relative to it.
        end_effectors: tracked bodies whose height error ends an episode; default the robot's feet.
        undesired_contact_bodies: bodies penalized for touching anything (the scene's contact bodies); none:
            no penalty, the feet as contact bodies.
        action_params: ``JointPositionAction`` params; default ``ACTION_PARAMS`` (the joint limits).
    """
    tracked_bodies = tuple(tracked_bodies)
    if anchor_body not in tracked_bodies:
        raise ValueError(f"anchor_body {anchor_body!r} must be one of tracked_bodies {tracked_bodies}")
    end_effectors = tuple(robot.feet if end_effectors is None else end_effectors)
    outside = [name for name in end_effectors if name not in tracked_bodies]
    if outside:
        raise ValueError(f"end_effectors {outside} must be among tracked_bodies {tracked_bodies}")
    undesired_contact_bodies = tuple(undesired_contact_bodies)
    scene = robot.scene(bodies=tracked_bodies, contact_bodies=undesired_contact_bodies or None)
    scene.terrain_meshes = clip_terrain_meshes(motion_file, (robot,))
    commands = {
        MOTION: CommandTermCfg(
            MotionCommand,
            params={
                "motion_file": None if motion_file is None else str(motion_file),
                "anchor_body": anchor_body,
                "body_names": tracked_bodies,
                "pose_range": {
                    "x": (-0.05, 0.05),
                    "y": (-0.05, 0.05),
                    "z": (-0.01, 0.01),
                    "roll": (-0.1, 0.1),
                    "pitch": (-0.1, 0.1),
                    "yaw": (-0.2, 0.2),
                },
                "velocity_range": PUSH_VELOCITY_RANGE,
                "joint_position_range": (-0.1, 0.1),
                "bin_duration_s": 1.0,
                "adaptive_kernel_size": 3,
                "adaptive_lambda": 0.8,
                "adaptive_uniform_ratio": 0.1,
                "adaptive_alpha": 0.001,
            },
            # The clip paces the command (one frame per step); there is no timer-driven resampling.
            resampling_time_range_s=(NEVER_S, NEVER_S),
        )
    }
    terminations = {
        "time_out": TerminationTermCfg(mdp.time_out, time_out=True),
        "motion_finished": TerminationTermCfg(
            tracking.motion_finished, params={"command_name": MOTION}, time_out=True
        ),
        "anchor_height": TerminationTermCfg(
            tracking.anchor_height_error, params={"command_name": MOTION, "threshold": 0.25}
        ),
        "anchor_orientation": TerminationTermCfg(
            tracking.anchor_orientation_error, params={"command_name": MOTION, "threshold": 0.8}
        ),
        "end_effector_height": TerminationTermCfg(
            tracking.BodyHeightError,
            params={"command_name": MOTION, "threshold": 0.25, "body_names": end_effectors},
        ),
    }
    events = {
        # mjlab's tracking task draws 0.3-1.2; the floor's 0.4 is the effective lower bound here anyway.
        "foot_friction": foot_friction_event(robot),
        "push_robot": EventTermCfg(
            mdp.PushByVelocity,
            mode="interval",
            interval_range_s=(1.0, 3.0),
            params={"velocity_range": PUSH_VELOCITY_RANGE},
        ),
    }
    metrics = {
        name: MetricTermCfg(func, params={"command_name": MOTION})
        for name, func in (
            ("anchor_pos_error", tracking.anchor_pos_error),
            ("anchor_ori_error", tracking.anchor_ori_error),
            ("body_pos_error", tracking.body_pos_error),
            ("joint_pos_error", tracking.joint_pos_error),
            ("sampling_entropy", tracking.sampling_entropy),
        )
    }
    return EnvCfg(
        scene=scene,
        decimation=4,
        episode_length_s=10.0,
        actions=joint_position_actions(ACTION_PARAMS if action_params is None else action_params),
        observations=_observations(),
        rewards=_rewards(robot, undesired_contact_bodies),
        terminations=terminations,
        events=events,
        commands=commands,
        metrics=metrics,
    )


__all__ = ["ACTION_PARAMS", "MOTION", "PUSH_VELOCITY_RANGE", "clip_terrain_meshes", "motion_tracking_env_cfg"]
