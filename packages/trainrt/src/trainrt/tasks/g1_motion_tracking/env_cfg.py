"""``g1_motion_tracking``: BeyondMimic-style whole-body tracking of one reference clip by the Unitree G1, the
shared tracking task (``trainrt.tasks.tracking``) with the G1's description and body choices.

Anchor body ``torso_link``; 14 tracked bodies; the feet and wrists end an episode when off their target height;
every colliding body but the feet and hands is penalized for contact.
"""

from __future__ import annotations

from pathlib import Path

from trainrt.envs import EnvCfg
from trainrt.hotpath import cold_path
from trainrt.robots import G1
from trainrt.tasks.tracking.env_cfg import motion_tracking_env_cfg

DEFAULT_MOTION_FILE = G1.default_motion
"""The task's default clip among the G1 assets (``G1.default_motion``)."""
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


@cold_path
def g1_motion_tracking_env_cfg(motion_file: str | Path | None = None) -> EnvCfg:
    """The ``g1_motion_tracking`` task for ``motion_file`` (a path or G1 asset clip name; default clip if None)."""
    return motion_tracking_env_cfg(
        G1,
        motion_file,
        tracked_bodies=TRACKED_BODIES,
        anchor_body=ANCHOR_BODY,
        end_effectors=END_EFFECTORS,
        undesired_contact_bodies=UNDESIRED_CONTACT_BODIES,
    )


__all__ = [
    "ANCHOR_BODY",
    "DEFAULT_MOTION_FILE",
    "END_EFFECTORS",
    "TRACKED_BODIES",
    "UNDESIRED_CONTACT_BODIES",
    "g1_motion_tracking_env_cfg",
]
