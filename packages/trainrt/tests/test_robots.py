"""Robots as data: the G1's description loads a model that matches it, and the description's rules (gains,
action scales, gait offsets, lookups) hold on their own."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest
from g1_assets import require_g1_assets

import simcore
from trainrt.robots import G1, ROBOTS, EffortOverStiffness, ExplicitGains, get_robot
from trainrt.robots.__main__ import main as robots_main


@pytest.fixture(scope="module")
def g1_model() -> mujoco.MjModel:
    require_g1_assets()
    return G1.model()


def test_every_robot_is_registered_under_its_own_name():
    assert ROBOTS == {"g1": G1}
    assert get_robot("g1") is G1
    with pytest.raises(ValueError, match="unknown robot 'nope'; valid: g1"):
        get_robot("nope")


def test_the_g1_model_follows_its_description(g1_model):
    driven = [g1_model.joint(int(g1_model.actuator_trnid[i, 0])).name for i in range(g1_model.nu)]
    assert tuple(driven) == G1.joint_names and len(G1.joint_names) == 29
    assert g1_model.body(G1.root_body).id == 1 and g1_model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE
    reference = simcore.pd_gains_from_armature(g1_model)  # the servo gains the loaded model carries
    np.testing.assert_array_equal(G1.pd_gains().kp, reference.kp)
    np.testing.assert_array_equal(G1.pd_gains().effort_limit, reference.effort_limit)
    np.testing.assert_array_equal(g1_model.actuator_gainprm[:, 0], G1.pd_gains().kp)


def test_the_default_pose_rests_the_soles_at_the_clearance(g1_model):
    data = mujoco.MjData(g1_model)
    data.qpos[:] = G1.default_qpos(g1_model)
    mujoco.mj_kinematics(g1_model, data)
    feet = {g1_model.body(name).id for name in G1.feet}
    soles = [g for g in range(g1_model.ngeom) if int(g1_model.geom_bodyid[g]) in feet]
    # the sole capsules: lowest point = centre - radius - half length * |axis z|
    lowest = min(
        data.geom_xpos[g][2]
        - g1_model.geom_size[g][0]
        - g1_model.geom_size[g][1] * abs(data.geom_xmat[g].reshape(3, 3)[2, 2])
        for g in soles
    )
    assert lowest == pytest.approx(G1.sole_clearance, abs=1e-9)
    assert data.qpos[2] == G1.standing_root_height()


def test_effort_based_action_scales_are_a_quarter_of_peak_torque_over_stiffness(g1_model):
    gains = G1.pd_gains()
    expected = {n: 0.25 * e / kp for n, kp, e in zip(G1.joint_names, gains.kp, gains.effort_limit)}
    assert G1.action_scales() == pytest.approx(expected, rel=1e-12)
    assert G1.action_scale == EffortOverStiffness(0.25)
    uniform = dataclasses.replace(G1, action_scale=0.25, _computed={})
    assert set(uniform.action_scales().values()) == {0.25}


def test_the_g1_scene_reads_its_feet_and_starts_standing(g1_model):
    scene = G1.scene(("pelvis",))
    assert scene.contact_bodies == G1.feet and scene.foot_bodies == G1.feet
    assert scene.init_root_height == G1.standing_root_height()
    assert scene.default_joint_pos == dict(G1.default_joint_pos)
    assert simcore.SELF_COLLISION_SENSOR in scene.sensors
    assert G1.scene(("torso_link",)).model_factory is scene.model_factory  # one factory per robot


def test_explicit_gains_take_the_first_full_match_and_name_an_unmatched_joint():
    gains = ExplicitGains(
        kp={r".*_knee": 200.0, r"left_.*": 50.0, r".*": 20.0},
        kd={r".*": 2.0},
        effort_limit={r".*_knee": 100.0, r".*": 30.0},
    )
    resolved = gains.resolve(None, ("left_knee", "left_ankle", "right_ankle"))
    np.testing.assert_array_equal(resolved.kp, [200.0, 50.0, 20.0])
    np.testing.assert_array_equal(resolved.effort_limit, [100.0, 30.0, 30.0])
    partial = dataclasses.replace(gains, kd={r"left_.*": 2.0})
    with pytest.raises(
        ValueError, match=r"ExplicitGains.kd: no pattern of \['left_\.\*'\] matches joint 'right_ankle'"
    ):
        partial.resolve(None, ("left_knee", "right_ankle"))


def test_a_description_needs_one_gait_offset_per_foot_and_known_pose_joints():
    with pytest.raises(ValueError, match="must give one phase per foot"):
        dataclasses.replace(G1, gait_offsets=(0.0,), _computed={})
    with pytest.raises(ValueError, match=r"default_joint_pos names joints it lacks: \['tail'\]"):
        dataclasses.replace(G1, default_joint_pos={"tail": 1.0}, _computed={})


def test_missing_assets_name_the_fetch_command(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMCORE_ASSET_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(
        FileNotFoundError,
        match=r"g1 model not found .* run `make setup` \(or `uv run python -m trainrt.robots fetch`\)",
    ):
        G1.mjcf_path()
    assert robots_main(["path", "g1"]) == 2
    assert robots_main(["path", "nope"]) == 2


def test_the_command_line_prints_a_robot_mjcf_path(g1_model, capsys):
    assert robots_main(["path", "g1"]) == 0
    assert capsys.readouterr().out.strip() == str(G1.mjcf_path())
