"""The Booster T1 (29 DoF) over holosoma's MJCF: joint order, default pose, gains, feet, self-collision pairs.

Sources: ``t1_29dof.xml`` (``holosoma/data/robots/t1/`` of the pinned wheel, "xml:LINE" below) and holosoma's
T1 robot config ``t1_29dof_waist_wrist`` (``holosoma/config_values/robot.py`` in the same wheel,
"robot.py:LINE" below). "Measured here": CPU MuJoCo over this MJCF with ``simcore.load_model``.
"""

from __future__ import annotations

import simcore
from trainrt.robots.description import ExplicitGains, RobotDescription
from trainrt.robots.holosoma import HOLOSOMA_WHEEL

_ARM = (
    "Shoulder_Pitch",
    "Shoulder_Roll",
    "Elbow_Pitch",
    "Elbow_Yaw",
    "Wrist_Pitch",
    "Wrist_Yaw",
    "Hand_Roll",
)
_LEG = ("Hip_Pitch", "Hip_Roll", "Hip_Yaw", "Knee_Pitch", "Ankle_Pitch", "Ankle_Roll")
T1_JOINT_NAMES: tuple[str, ...] = (
    "AAHead_yaw",
    "Head_pitch",
    *(f"{side}_{j}" for side in ("Left", "Right") for j in _ARM),
    "Waist",
    *(f"{side}_{j}" for side in ("Left", "Right") for j in _LEG),
)
"""Joint names in actuator order (xml:242-270; the same as holosoma's ``dof_names``, robot.py:577-607)."""

T1_DEFAULT_JOINT_POS: dict[str, float] = {
    # holosoma default_joint_angles (robot.py:899-928): arms hanging by the trunk, elbows turned in.
    "Left_Shoulder_Pitch": 0.2,
    "Left_Shoulder_Roll": -1.35,
    "Left_Elbow_Yaw": -0.5,
    "Right_Shoulder_Pitch": 0.2,
    "Right_Shoulder_Roll": 1.35,
    "Right_Elbow_Yaw": 0.5,
    # holosoma's knees-bent legs (hip -0.2, knee 0.4) ...
    "Left_Hip_Pitch": -0.2,
    "Right_Hip_Pitch": -0.2,
    "Left_Knee_Pitch": 0.4,
    "Right_Knee_Pitch": 0.4,
    # ... with the ankles at -0.2 instead of holosoma's -0.25, so the soles are flat: the sole pitch is
    # hip + knee + ankle (measured here: -0.05 rad with -0.25, which rests the robot on its heels and tips
    # it forward; 0 with -0.2, the ankle of mjlab's T1 HOME keyframe).
    "Left_Ankle_Pitch": -0.2,
    "Right_Ankle_Pitch": -0.2,
}
"""Default joint positions in radians; joints not listed are 0 (as in holosoma's pose)."""

T1_FOOT_BODIES: tuple[str, ...] = ("left_foot_link", "right_foot_link")
"""Foot bodies, left then right (the gait clock's order): xml:175 and xml:218."""

T1_FOOT_GEOMS = r"(L|R)_rail_[1-7]"
"""Collision geoms of the soles: seven capsule rails per foot (xml:179-185, xml:222-228)."""

T1_SELF_COLLISION_PAIRS: tuple[tuple[str, str], ...] = (
    # one leg (hip roll and yaw links, shank, foot) against the other, as the G1's legs: nothing else stops
    # the legs passing through each other (Hip_Pitch_* and Ankle_Cross_* carry no collision geom)
    (
        "(Hip_Roll|Hip_Yaw|Shank)_Left|left_foot_link",
        "(Hip_Roll|Hip_Yaw|Shank)_Right|right_foot_link",
    ),
    # forearms (AL4/AR4, below the elbow) and hands against the trunk box, as the G1's forearms and hands
    # against its pelvis and torso; the upper arms (AL3/AR3) stay off: they hang 3 cm from the trunk in the
    # default pose (measured here)
    ("A[LR]4|(left|right)_hand_link", "Trunk"),
)
"""Robot-robot contacts the T1 scene enables (``simcore.load_model(self_collision_pairs=...)``); none touch in
the default pose (measured here). holosoma trains the T1 with self-collisions off (robot.py:1088); mjlab's T1
velocity task penalizes them at -1.0, as this runtime does for the G1."""

T1_GAINS = ExplicitGains(
    # holosoma's T1 PD gains (robot.py:1034-1071, matched there as substrings of the joint names). The MJCF's
    # armature (0.01 on every joint, xml:6) would give a uniform kp of 39.5 from ArmatureGains, far too weak
    # for the legs, so the gains are explicit.
    kp={
        r"AAHead_yaw|Head_pitch": 5.0,
        r".*_Hip_.*|.*_Knee_Pitch|Waist": 200.0,
        r".*_Ankle_.*": 50.0,
        r".*_(Shoulder|Elbow|Wrist)_.*|.*_Hand_Roll": 20.0,
    },
    kd={
        r"AAHead_yaw|Head_pitch": 0.5,
        r".*_Hip_.*|.*_Knee_Pitch|Waist": 5.0,
        r".*_Ankle_.*": 3.0,
        r".*_(Shoulder|Elbow|Wrist)_.*|.*_Hand_Roll": 0.5,
    },
    # holosoma dof_effort_limit_list (robot.py:765-795, the URDF's effort values), which holosoma's MuJoCo
    # simulator clips torques to (holosoma/simulator/shared/dof_limits.py:62). The MJCF motor ctrlrange
    # (xml:242-270) is higher for hip roll (45), knee (65), ankle pitch (24) and ankle roll (15).
    effort_limit={
        r"AAHead_yaw|Head_pitch": 7.0,
        r".*_(Shoulder|Elbow|Wrist)_.*|.*_Hand_Roll": 18.0,
        r"Waist": 30.0,
        r".*_Hip_Pitch": 45.0,
        r".*_Hip_(Roll|Yaw)": 30.0,
        r".*_Knee_Pitch": 60.0,
        r".*_Ankle_(Pitch|Roll)": 12.0,
    },
)
"""The T1's PD gains. The MJCF's armature (0.01) is kept: holosoma's MuJoCo simulator applies its config's
0.03 (``dof_armature_list``, robot.py:796-826) nowhere; only its IsaacGym and IsaacSim backends do."""

T1_ACTION_SCALE = 0.25
"""Radians per unit action, every joint: holosoma's T1 ``action_scale`` (robot.py:1072), uniform because
``action_scales_by_effort_limit_over_p_gain`` keeps its default False (holosoma/config_types/robot.py:73)."""

T1 = RobotDescription(
    name="t1",
    wheel=HOLOSOMA_WHEEL,
    members=(simcore.WheelMember("holosoma/data/robots/t1/", "robots/t1"),),
    mjcf="robots/t1/t1_29dof.xml",
    root_body="Trunk",  # xml:52, with the free joint (xml:56); there is no separate pelvis
    joint_names=T1_JOINT_NAMES,
    default_joint_pos=T1_DEFAULT_JOINT_POS,
    gains=T1_GAINS,
    feet=T1_FOOT_BODIES,
    foot_geoms=T1_FOOT_GEOMS,
    gait_offsets=(0.0, 0.5),  # alternating, as the G1: the right foot half a cycle after the left
    action_scale=T1_ACTION_SCALE,
    self_collision_pairs=T1_SELF_COLLISION_PAIRS,
    joint_groups={
        # the G1's groups over the T1's names (hip roll and yaw, the waist, the arms) ...
        "hip": (r".*_Hip_Roll", r".*_Hip_Yaw"),
        "waist": (r"Waist",),
        "arm": (r".*_Shoulder_.*", r".*_Elbow_.*", r".*_Wrist_.*", r".*_Hand_Roll"),
        # ... and the head, which the G1 lacks: holosoma's T1 pose reward weighs the head joints like the arms
        # and the waist (50, holosoma/config_values/loco/t1/reward.py:58-91)
        "head": (r"AAHead_yaw", r"Head_pitch"),
    },
    # 2 mm between the lowest rail and the floor, as the G1: the standing root height is then 0.678 m
    # (measured here; holosoma's init_state z is 0.68, robot.py:895)
    sole_clearance=0.002,
    motions=None,  # holosoma ships no T1 motion clips
)
"""The Booster T1 with 29 actuated joints (holosoma ``t1_29dof.xml``)."""
