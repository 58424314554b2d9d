"""Term configs built from a robot description, shared by the tasks of any robot: the joint-position action
group and the sole friction randomization."""

from __future__ import annotations

from trainrt import mdp
from trainrt.hotpath import cold_path
from trainrt.managers import ActionTermCfg, EventTermCfg, JointPositionAction
from trainrt.robots import RobotDescription


@cold_path
def joint_position_actions(params: dict[str, object]) -> dict[str, ActionTermCfg]:
    """The action group of one ``JointPositionAction`` over every joint with ``params``."""
    return {"joint_pos": ActionTermCfg(JointPositionAction, params=dict(params))}


@cold_path
def scaled_action_params(robot: RobotDescription, multiple: float) -> dict[str, object]:
    """``JointPositionAction`` params whose +-1 is ``multiple`` times the robot's action scale per joint
    (``robot.action_scales()``), targets clamped to the joint limits (adr/0014)."""
    scale = {name: multiple * value for name, value in robot.action_scales().items()}
    return {"mode": "scale", "scale": scale, "clip_to_joint_range": True}


@cold_path
def foot_friction_event(robot: RobotDescription) -> EventTermCfg:
    """The startup event drawing each sole's friction from 0.4-1.2 (the geoms of ``robot.foot_geoms``)."""
    return EventTermCfg(
        mdp.RandomizeGeomFriction,
        mode="startup",
        params={"geom_names": (robot.foot_geoms,), "friction_range": (0.4, 1.2)},
    )
