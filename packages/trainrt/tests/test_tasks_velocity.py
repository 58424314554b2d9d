"""The velocity task for any legged robot: with the G1 it is the ``g1_walk_flat`` config of before robots became
data (pinned by a stored description), and every robot name in it comes from the robot's description."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from env_cfg_description import describe
from g1_assets import require_g1_assets

from trainrt import mdp
from trainrt.robots import G1
from trainrt.tasks import make_task_cfg
from trainrt.tasks.velocity.env_cfg import velocity_env_cfg

STORED = Path(__file__).with_name("g1_walk_flat_env_cfg.json")
"""``describe(g1_walk_flat_env_cfg())`` as the task factory built it before the velocity task took a robot
(written once from that code; terms by qualname, effective params, a summary of the model)."""


@pytest.fixture(scope="module", autouse=True)
def _assets() -> None:
    require_g1_assets()


def test_the_g1_registration_builds_the_walk_config_of_before():
    expected = json.loads(STORED.read_text())
    actual = json.loads(json.dumps(describe(make_task_cfg("g1_walk_flat"))))
    differing = [key for key in expected.keys() | actual.keys() if expected.get(key) != actual.get(key)]
    assert not differing, f"g1_walk_flat's config changed in {sorted(differing)}"


def test_feet_joint_groups_and_self_collision_come_from_the_robot():
    feet = ("left_ankle_roll_link", "right_ankle_roll_link")
    robot = dataclasses.replace(
        G1,
        joint_groups={"knee": (r".*_knee_joint",)},
        self_collision_pairs=(),
        _computed={},
    )
    cfg = velocity_env_cfg(robot, gait_period_s=1.0)
    deviation = [name for name in cfg.rewards if name.endswith("_deviation_l1")]
    assert deviation == ["knee_deviation_l1"]
    assert cfg.rewards["knee_deviation_l1"].params == {"joint_names": (r".*_knee_joint",)}
    assert "self_collisions" not in cfg.rewards and cfg.scene.sensors == ()
    assert cfg.scene.bodies == ("pelvis", *feet) and cfg.scene.contact_bodies == feet
    assert cfg.commands["gait"].params == {"period_s": 1.0, "foot_offsets": (0.0, 0.5)}
    assert cfg.rewards["feet_contact_phase"].params["contact_body_names"] == feet
    assert cfg.rewards["base_height_l2"].params["target_height"] == G1.standing_root_height()
    assert cfg.events["foot_friction"].params["geom_names"] == (G1.foot_geoms,)
    scale = cfg.actions["joint_pos"].params["scale"]
    assert scale == {name: 3.0 * value for name, value in G1.action_scales().items()}
    assert cfg.rewards["feet_slip_l2"].func is mdp.FeetSlipL2
