"""The Unitree G1 pieces both G1 tasks share (action mapping, scene, foot friction randomization), over the G1's
description ``trainrt.robots.G1``, which owns the robot's names and values."""

from __future__ import annotations

from collections.abc import Sequence

import mujoco

from trainrt import mdp
from trainrt.envs import SceneCfg
from trainrt.hotpath import cold_path
from trainrt.managers import ActionTermCfg, EventTermCfg, JointPositionAction
from trainrt.robots import G1
from trainrt.robots.g1 import G1_ACTION_SCALE_FACTOR, G1_FOOT_GEOMS, G1_SELF_COLLISION_PAIRS

G1_FOOT_BODIES: tuple[str, ...] = G1.feet
"""Foot bodies, left then right (the gait clock's order); ``trainrt.robots.G1`` owns the name list."""

__all__ = [
    "G1_ACTION_PARAMS",
    "G1_ACTION_SCALE_FACTOR",
    "G1_FOOT_BODIES",
    "G1_FOOT_GEOMS",
    "G1_SELF_COLLISION_PAIRS",
    "G1_WALK_ACTION_SCALE_MULTIPLE",
    "g1_action_scale",
    "g1_foot_friction_event",
    "g1_joint_position_actions",
    "g1_scene",
    "g1_standing_root_height",
    "g1_walk_action_params",
    "load_g1_with_self_collision",
]

G1_ACTION_PARAMS: dict[str, object] = {"mode": "joint_limits", "soft_limit_factor": 1.0}
"""``JointPositionAction`` params of ``g1_motion_tracking`` (walking uses ``g1_walk_action_params``), made for
tanh-bounded policies (SAC, FlashSAC): action -1/+1 reaches the joint limits on either side of the default pose
(the default clip touches the ankle-roll and waist-pitch limits, so the soft-limit factor stays 1).
``g1_action_scale()`` is the PPO-style alternative (``{"mode": "scale", "scale": g1_action_scale()}``)."""


@cold_path
def g1_action_scale() -> dict[str, float]:
    """Joint name -> action scale (rad per unit action) from the G1's PD gains and effort limits
    (``G1.action_scales()``)."""
    return G1.action_scales()


@cold_path
def g1_standing_root_height() -> float:
    """Pelvis height (m) of the default standing pose over flat ground (``G1.standing_root_height()``)."""
    return G1.standing_root_height()


@cold_path
def load_g1_with_self_collision() -> mujoco.MjModel:
    """The G1 model of both tasks: ``G1.model`` with the ``G1_SELF_COLLISION_PAIRS`` contacts enabled."""
    return G1.scene_model()


@cold_path
def g1_scene(bodies: Sequence[str], contact_bodies: Sequence[str] = G1_FOOT_BODIES) -> SceneCfg:
    """The G1 scene (``G1.scene``) reading ``bodies`` and ``contact_bodies``."""
    return G1.scene(tuple(bodies), tuple(contact_bodies))


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
        params={"geom_names": (G1.foot_geoms,), "friction_range": (0.4, 1.2)},
    )
