"""The Unitree G1 pieces both G1 tasks share: body and geom names, action mapping, self-collision pairs,
standing height, scene, foot friction randomization."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import mujoco

import simcore
from trainrt import mdp
from trainrt.envs import SceneCfg
from trainrt.hotpath import cold_path
from trainrt.managers import ActionTermCfg, EventTermCfg, JointPositionAction

G1_FOOT_BODIES: tuple[str, ...] = simcore.G1_FOOT_BODIES
"""Foot bodies, left then right (the gait clock's order); simcore owns the name list."""

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

G1_ACTION_PARAMS: dict[str, object] = {"mode": "joint_limits", "soft_limit_factor": 1.0}
"""``JointPositionAction`` params of ``g1_motion_tracking`` (walking uses ``g1_walk_action_params``), made for
tanh-bounded policies (SAC, FlashSAC): action -1/+1 reaches the joint limits on either side of the default pose
(the default clip touches the ankle-roll and waist-pitch limits, so the soft-limit factor stays 1).
``g1_action_scale()`` is the PPO-style alternative (``{"mode": "scale", "scale": g1_action_scale()}``)."""

G1_ACTION_SCALE_FACTOR = 0.25
"""Action scale per joint = factor * effort_limit / kp: an action of 1 asks for a quarter of the joint's peak
torque as static PD error (mjlab's G1 convention), so strong and weak joints get comparable authority."""


@cold_path
@functools.cache
def g1_action_scale() -> dict[str, float]:
    """Joint name -> action scale (rad per unit action) from the G1's PD gains and effort limits."""
    model = simcore.load_g1()
    gains = simcore.g1_pd_gains(model)
    return {
        name: float(G1_ACTION_SCALE_FACTOR * effort / kp)
        for name, kp, effort in zip(simcore.G1_JOINT_NAMES, gains.kp, gains.effort_limit)
    }


@cold_path
@functools.cache
def g1_standing_root_height() -> float:
    """Pelvis height (m) of the default standing pose over flat ground (``simcore.g1_standing_root_height`` of
    the G1 model, computed once)."""
    return simcore.g1_standing_root_height(simcore.load_g1())


@cold_path
def load_g1_with_self_collision() -> mujoco.MjModel:
    """The G1 model of both tasks: ``simcore.load_g1`` with the ``G1_SELF_COLLISION_PAIRS`` contacts enabled."""
    return simcore.load_g1(self_collision_pairs=G1_SELF_COLLISION_PAIRS)


@cold_path
def g1_scene(
    bodies: Sequence[str],
    contact_bodies: Sequence[str] = G1_FOOT_BODIES,
    foot_bodies: Sequence[str] = G1_FOOT_BODIES,
) -> SceneCfg:
    """The G1 scene (headless model, floor, PD servos, limb self-collision) reading ``bodies`` and
    ``contact_bodies``, and the self-collision count (``simcore.SELF_COLLISION_SENSOR``)."""
    return SceneCfg(
        model_factory=load_g1_with_self_collision,
        bodies=tuple(bodies),
        sensors=(simcore.SELF_COLLISION_SENSOR,),
        contact_bodies=tuple(contact_bodies),
        foot_bodies=tuple(foot_bodies),
        init_root_height=g1_standing_root_height(),
        default_joint_pos=dict(simcore.G1_DEFAULT_JOINT_POS),
    )


G1_WALK_ACTION_SCALE_MULTIPLE = 3.0
"""Walking's action bounds in units of ``g1_action_scale()`` (``g1_walk_action_params``): +-1 is three of the
PPO-style steps, the range Gaussian PPO policies actually use, instead of the joint limits (adr/0014)."""


@cold_path
def g1_walk_action_params() -> dict[str, object]:
    """``JointPositionAction`` params of ``g1_walk_flat``: ``G1_WALK_ACTION_SCALE_MULTIPLE`` times the
    effort-based scale per joint, targets clamped to the joint limits (adr/0014)."""
    scale = {name: G1_WALK_ACTION_SCALE_MULTIPLE * value for name, value in g1_action_scale().items()}
    return {"mode": "scale", "scale": scale, "clip_to_joint_range": True}


@cold_path
def g1_joint_position_actions(params: dict[str, object] | None = None) -> dict[str, ActionTermCfg]:
    """The action group of the G1 tasks: one ``JointPositionAction`` over every joint with ``params``
    (default ``G1_ACTION_PARAMS``)."""
    chosen = G1_ACTION_PARAMS if params is None else params
    return {"joint_pos": ActionTermCfg(JointPositionAction, params=dict(chosen))}


@cold_path
def g1_foot_friction_event() -> EventTermCfg:
    """The startup event of both G1 tasks drawing each sole's friction from 0.4-1.2 (``G1_FOOT_GEOMS``)."""
    return EventTermCfg(
        mdp.RandomizeGeomFriction,
        mode="startup",
        params={"geom_names": (G1_FOOT_GEOMS,), "friction_range": (0.4, 1.2)},
    )
