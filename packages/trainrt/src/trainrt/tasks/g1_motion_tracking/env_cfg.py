"""``g1_motion_tracking``: BeyondMimic-style whole-body tracking of one reference clip by the Unitree G1.

dt 5 ms, decimation 4 (50 Hz), 10 s episodes (a row also ends, as a time-out, at the clip's last frame);
anchor body ``torso_link``; 14 tracked bodies. Terms, sigmas and weights follow BeyondMimic as published in
mjlab's ``tracking_env_cfg`` (the anchor for every value below unless a comment says otherwise).
"""

from __future__ import annotations

from pathlib import Path

from trainrt import mdp
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
from trainrt.robots import G1
from trainrt.tasks.g1_motion_tracking import mdp as tracking
from trainrt.tasks.robot_terms import foot_friction_event, joint_position_actions

MOTION = "motion"
ACTION_PARAMS: dict[str, object] = {"mode": "joint_limits", "soft_limit_factor": 1.0}
"""``JointPositionAction`` params of the tracking task, made for tanh-bounded policies (SAC, FlashSAC): action
-1/+1 reaches the joint limits on either side of the default pose (the default clip touches the ankle-roll and
waist-pitch limits, so the soft-limit factor stays 1). ``G1.action_scales()`` is the PPO-style alternative
(``{"mode": "scale", "scale": G1.action_scales()}``); walking uses three times it (``trainrt.tasks.velocity``)."""
ANCHOR_BODY = "torso_link"
TRACKED_BODIES: tuple[str, ...] = (
    "pelvis",
    "left_hip_roll_link",
    "left_knee_link",
    "left_ankle_roll_link",
    "right_hip_roll_link",
    "right_knee_link",
    "right_ankle_roll_link",
    "torso_link",
    "left_shoulder_roll_link",
    "left_elbow_link",
    "left_wrist_yaw_link",
    "right_shoulder_roll_link",
    "right_elbow_link",
    "right_wrist_yaw_link",
)
END_EFFECTORS = (
    "left_ankle_roll_link",
    "right_ankle_roll_link",
    "left_wrist_yaw_link",
    "right_wrist_yaw_link",
)
UNDESIRED_CONTACT_BODIES: tuple[str, ...] = (
    # Every colliding body but the feet and hands (which may touch the ground in a clip).
    "pelvis",
    "left_hip_roll_link",
    "left_knee_link",
    "right_hip_roll_link",
    "right_knee_link",
    "torso_link",
    "left_shoulder_yaw_link",
    "left_elbow_link",
    "right_shoulder_yaw_link",
    "right_elbow_link",
)
PUSH_VELOCITY_RANGE = {
    "x": (-0.5, 0.5),
    "y": (-0.5, 0.5),
    "z": (-0.2, 0.2),
    "roll": (-0.52, 0.52),
    "pitch": (-0.52, 0.52),
    "yaw": (-0.78, 0.78),
}


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
def _rewards() -> dict[str, RewardTermCfg]:
    def tracked(func: object, weight: float, std: float) -> RewardTermCfg:
        return RewardTermCfg(func, weight=weight, params={"command_name": MOTION, "std": std})

    return {
        "motion_anchor_pos_exp": tracked(tracking.motion_anchor_pos_exp, 0.5, 0.3),
        "motion_anchor_ori_exp": tracked(tracking.motion_anchor_ori_exp, 0.5, 0.4),
        "motion_body_pos_exp": tracked(tracking.motion_body_pos_exp, 1.0, 0.3),
        "motion_body_ori_exp": tracked(tracking.motion_body_ori_exp, 1.0, 0.4),
        "motion_body_lin_vel_exp": tracked(tracking.motion_body_lin_vel_exp, 1.0, 1.0),
        "motion_body_ang_vel_exp": tracked(tracking.motion_body_ang_vel_exp, 1.0, 3.14),
        "action_rate_l2": RewardTermCfg(mdp.action_rate_l2, weight=-0.1),
        "joint_pos_limits": RewardTermCfg(mdp.JointPosLimits, weight=-10.0),
        # BeyondMimic's original undesired-contact penalty (-0.1, 1 N); mjlab keeps it commented out.
        "undesired_contacts": RewardTermCfg(
            mdp.UndesiredContacts,
            weight=-0.1,
            params={"contact_body_names": UNDESIRED_CONTACT_BODIES, "force_threshold": 1.0},
        ),
        # mjlab G1 tracking self_collisions -10.0 (a count of the limb contacts of G1.self_collision_pairs).
        "self_collisions": RewardTermCfg(mdp.self_collision_count, weight=-10.0),
    }


@cold_path
def g1_motion_tracking_env_cfg(motion_file: str | Path | None = None) -> EnvCfg:
    """The ``g1_motion_tracking`` task for ``motion_file`` (a path or G1 asset clip name; default clip if None)."""
    scene = G1.scene(bodies=TRACKED_BODIES, contact_bodies=UNDESIRED_CONTACT_BODIES)
    commands = {
        MOTION: CommandTermCfg(
            tracking.MotionCommand,
            params={
                "motion_file": None if motion_file is None else str(motion_file),
                "anchor_body": ANCHOR_BODY,
                "body_names": TRACKED_BODIES,
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
            resampling_time_range_s=(1.0e9, 1.0e9),
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
            params={"command_name": MOTION, "threshold": 0.25, "body_names": END_EFFECTORS},
        ),
    }
    events = {
        # mjlab's tracking task draws 0.3-1.2; the floor's 0.4 is the effective lower bound here anyway.
        "foot_friction": foot_friction_event(G1),
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
        actions=joint_position_actions(ACTION_PARAMS),
        observations=_observations(),
        rewards=_rewards(),
        terminations=terminations,
        events=events,
        commands=commands,
        metrics=metrics,
    )


__all__ = ["ANCHOR_BODY", "END_EFFECTORS", "TRACKED_BODIES", "g1_motion_tracking_env_cfg"]
