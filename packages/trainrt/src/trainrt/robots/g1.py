"""The Unitree G1 (29 DoF) over holosoma's MJCF: joint order, default pose, gains, feet, self-collision pairs."""

from __future__ import annotations

import simcore
from trainrt.robots.description import ArmatureGains, EffortOverStiffness, RobotDescription
from trainrt.robots.holosoma import HOLOSOMA_WHEEL

_LEG = ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll")
_ARM = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll", "wrist_pitch", "wrist_yaw")
G1_JOINT_NAMES: tuple[str, ...] = (
    *(f"{side}_{j}_joint" for side in ("left", "right") for j in _LEG),
    "waist_yaw_joint",
    "waist_roll_joint",
    "waist_pitch_joint",
    *(f"{side}_{j}_joint" for side in ("left", "right") for j in _ARM),
)
"""Joint names in actuator order (the order of ``ctrl`` and of ``qpos[7:]``)."""

# Knees-bent standing pose (a common G1 nominal pose): low centre of mass, arms slightly out and bent.
G1_DEFAULT_JOINT_POS: dict[str, float] = {
    "left_hip_pitch_joint": -0.312,
    "right_hip_pitch_joint": -0.312,
    "left_knee_joint": 0.669,
    "right_knee_joint": 0.669,
    "left_ankle_pitch_joint": -0.363,
    "right_ankle_pitch_joint": -0.363,
    "left_shoulder_pitch_joint": 0.2,
    "right_shoulder_pitch_joint": 0.2,
    "left_shoulder_roll_joint": 0.2,
    "right_shoulder_roll_joint": -0.2,
    "left_elbow_joint": 0.6,
    "right_elbow_joint": 0.6,
}
"""Default joint positions in radians; joints not listed are 0."""

G1_FOOT_BODIES: tuple[str, ...] = ("left_ankle_roll_link", "right_ankle_roll_link")
"""Foot bodies, left then right (the gait clock's order)."""

G1_FOOT_GEOMS = r"(left|right)_foot[1-7]_collision"
"""Collision geoms of the soles (seven capsules per foot)."""

G1_SELF_COLLISION_PAIRS: tuple[tuple[str, str], ...] = (
    # one leg (thigh, shin, foot) against the other: nothing else stops the legs passing through each other
    ("left_(hip_roll|knee|ankle_roll)_link", "right_(hip_roll|knee|ankle_roll)_link"),
    # forearms and hands against the trunk
    ("(left|right)_(elbow|wrist_yaw)_link", "pelvis|torso_link"),
)
"""Robot-robot contacts the G1 scene enables (``simcore.load_model(self_collision_pairs=...)``). Hands against
the thighs stay off: the default clip (a squat lifting a box) keeps them touching for 36 of its 325 frames,
which a self-collision penalty would fight; with these pairs it has one frame of foot-foot contact."""

G1_ACTION_SCALE_FACTOR = 0.25
"""Action scale per joint = factor * effort_limit / kp: an action of 1 asks for a quarter of the joint's peak
torque as static PD error (mjlab's G1 convention), so strong and weak joints get comparable authority."""

G1 = RobotDescription(
    name="g1",
    wheel=HOLOSOMA_WHEEL,
    members=(
        simcore.WheelMember("holosoma/data/robots/g1/", "robots/g1"),
        simcore.WheelMember(
            "holosoma/data/motions/g1_29dof/whole_body_tracking/", "motions/g1_29dof", ".npz"
        ),
        # the scenes clips need (terrain_slope.obj, the crawl clip's slope: trainrt.motion.scenes)
        simcore.WheelMember(
            "holosoma/data/motions/g1_29dof/whole_body_tracking/", "motions/g1_29dof", ".obj"
        ),
    ),
    mjcf="robots/g1/g1_29dof.xml",
    root_body="pelvis",
    joint_names=G1_JOINT_NAMES,
    default_joint_pos=G1_DEFAULT_JOINT_POS,
    # BeyondMimic-style gains: 10 Hz natural frequency, damping ratio 2 over each joint's armature.
    gains=ArmatureGains(natural_frequency_hz=10.0, damping_ratio=2.0),
    feet=G1_FOOT_BODIES,
    foot_geoms=G1_FOOT_GEOMS,
    gait_offsets=(0.0, 0.5),  # alternating: the right foot half a cycle after the left
    action_scale=EffortOverStiffness(G1_ACTION_SCALE_FACTOR),
    self_collision_pairs=G1_SELF_COLLISION_PAIRS,
    joint_groups={
        "hip": (r".*_hip_roll_joint", r".*_hip_yaw_joint"),
        "waist": (r"waist_.*_joint",),
        "arm": (r".*_shoulder_.*_joint", r".*_elbow_joint", r".*_wrist_.*_joint"),
    },
    sole_clearance=0.002,
    motions="motions/g1_29dof",
    # A robot-only whole-body clip (6.5 s, squat and lift; no object or terrain needed).
    default_motion="sub3_largebox_003_mj.npz",
)
"""The Unitree G1 with 29 actuated joints (holosoma ``g1_29dof.xml``)."""
