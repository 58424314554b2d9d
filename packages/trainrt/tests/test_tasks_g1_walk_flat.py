"""``g1_walk_flat`` on the real env (mujoco backend): layout, rollout, commands, gait clock, events, terms."""

from __future__ import annotations

import math

import pytest
import torch

from trainrt import mdp
from trainrt.envs import ManagerBasedRlEnv
from trainrt.mdp.math import quat_from_euler_xyz, wrap_to_pi, yaw_from_quat
from trainrt.mdp.term_bases import contact_mask
from trainrt.robots import G1
from trainrt.robots.g1 import G1_FOOT_BODIES
from trainrt.tasks import TASKS, make_task_cfg

NUM_ENVS = 4


@pytest.fixture(scope="module")
def env() -> ManagerBasedRlEnv:
    try:
        cfg = make_task_cfg("g1_walk_flat")
        return ManagerBasedRlEnv(cfg, sim="mujoco", num_envs=NUM_ENVS, device="cpu", seed=0)
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")


def _set_root_state(
    env, pos=(0.0, 0.0, None), rpy=(0.0, 0.0, 0.0), lin_vel=(0.0, 0.0, 0.0), ang_vel_b=(0, 0, 0)
):
    """Put every row in the default pose with the given root state, through a reset transaction."""
    payload = env.reset_payload
    qpos, qvel = payload["qpos"], payload["qvel"]
    for name in payload:
        payload[name].zero_()
    qpos.copy_(env.robot.default_qpos.to(qpos.dtype).expand_as(qpos))
    z = G1.standing_root_height() if pos[2] is None else pos[2]
    qpos[:, :3] = torch.tensor([pos[0], pos[1], z], dtype=qpos.dtype)
    quat = quat_from_euler_xyz(*(torch.tensor(a, dtype=torch.float64) for a in rpy))
    qpos[:, 3:7] = quat.to(qpos.dtype)
    qvel[:, :3] = torch.tensor(lin_vel, dtype=qvel.dtype)
    qvel[:, 3:6] = torch.tensor(ang_vel_b, dtype=qvel.dtype)
    if "ctrl" in payload:
        env.action_manager.write_reset_ctrl(payload["ctrl"])
    env.backend.reset(torch.ones(env.num_envs, dtype=torch.bool), payload, env.reset_spec)


def test_registry_lists_both_tasks_and_rejects_unknown_names():
    assert set(TASKS) == {"g1_walk_flat", "g1_walk_rough", "g1_motion_tracking", "t1_walk_flat"}
    with pytest.raises(
        ValueError,
        match=r"unknown task 'nope'; valid: g1_motion_tracking, g1_walk_flat, g1_walk_rough, t1_walk_flat",
    ):
        make_task_cfg("nope")


def test_config_records_the_issue_terms_and_timing():
    cfg = make_task_cfg("g1_walk_flat")
    assert cfg.decimation == 4 and cfg.episode_length_s == 20.0
    weights = {name: term.weight for name, term in cfg.rewards.items()}
    for bonus in ("track_lin_vel_xy_exp", "track_ang_vel_z_exp", "feet_contact_phase", "alive"):
        assert weights[bonus] > 0, bonus
    for penalty in ("lin_vel_z_l2", "ang_vel_xy_l2", "flat_orientation_l2", "base_height_l2", "action_rate_l2",
                    "joint_pos_limits", "joint_torques_l2", "feet_slip_l2", "hip_deviation_l1",
                    "waist_deviation_l1", "arm_deviation_l1"):  # fmt: skip
        assert weights[penalty] < 0, penalty
    assert {name: term.mode for name, term in cfg.events.items()} == {
        "foot_friction": "startup", "reset_base": "reset", "reset_joints": "reset", "push_robot": "interval"
    }  # fmt: skip
    assert cfg.events["push_robot"].interval_range_s == (5.0, 10.0)
    assert set(cfg.terminations) == {"time_out", "fell_over", "base_too_low"}
    assert cfg.terminations["time_out"].time_out and not cfg.terminations["fell_over"].time_out
    twist = cfg.commands["twist"].params
    assert (twist["lin_vel_x"], twist["lin_vel_y"], twist["ang_vel_z"]) == (
        (-1.0, 1.0),
        (-0.5, 0.5),
        (-1.0, 1.0),
    )


def test_layout_timing_and_action_scale(env):
    assert env.physics_dt == pytest.approx(0.005) and env.step_dt == pytest.approx(0.02)
    assert env.max_episode_length == 1000
    assert env.obs_dims == {"policy": 3 + 3 + 3 + 29 + 29 + 29 + 2, "critic": 98 + 3 + 1 + 2 + 2}
    assert env.num_actions == 29
    meta = env.action_meta()
    # the export metadata carries the term's own per-joint scales (their values against the MuJoCo model's
    # gains: test_action_bounds.py)
    assert meta["joint_names"] == list(G1.joint_names)
    assert meta["action_scale"] == pytest.approx(env.action_manager.get_term("joint_pos").scale.tolist())


def test_random_action_rollout_is_finite(env):
    obs = env.reset()
    assert obs["policy"].shape == (NUM_ENVS, 98) and obs["critic"].shape == (NUM_ENVS, 106)
    g = torch.Generator().manual_seed(1)
    for _ in range(25):
        result = env.step(torch.rand(NUM_ENVS, env.num_actions, generator=g) * 2 - 1)
        assert bool(torch.isfinite(result.reward).all())
        assert bool(torch.isfinite(result.obs["policy"]).all()) and bool(
            torch.isfinite(result.obs["critic"]).all()
        )
        assert bool(result.valid.all())
    stats = env.episode_stats()
    assert "Episode/rew_track_lin_vel_xy_exp" in stats or stats["Episode/num_finished"] == 0.0


def test_reset_events_place_the_robot_around_the_default_pose(env):
    env.reset()
    robot = env.robot
    root = robot.root_pos_w
    assert bool((root[:, :2].abs() <= 0.5 + 1e-6).all())
    torch.testing.assert_close(
        root[:, 2], torch.full((NUM_ENVS,), G1.standing_root_height()), atol=1e-6, rtol=0
    )
    quat = robot.root_quat_w
    torch.testing.assert_close(quat[:, 1:3], torch.zeros(NUM_ENVS, 2), atol=1e-6, rtol=0)  # yaw only
    assert yaw_from_quat(quat).std() > 0.1  # headings are drawn, not all equal
    offset = robot.joint_pos - robot.default_joint_pos
    assert bool((offset.abs() <= 0.1 + 1e-5).all()) and offset.abs().max() > 0.01
    torch.testing.assert_close(robot.joint_vel, torch.zeros(NUM_ENVS, 29), atol=1e-6, rtol=0)


def test_startup_friction_is_per_world_on_the_foot_geoms_only(env):
    friction = env.backend.model_fields["geom_friction"][:, :, 0]
    model = env.backend.mj_model
    foot_bodies = {model.body(n).id for n in G1_FOOT_BODIES}
    feet = [g for g in range(model.ngeom) if int(model.geom_bodyid[g]) in foot_bodies]
    others = [g for g in range(model.ngeom) if g not in feet]
    assert len(feet) == 14
    values = friction[:, feet]
    assert bool(((values >= 0.4) & (values <= 1.2)).all())
    torch.testing.assert_close(values, values[:, :1].expand_as(values))  # shared within a world
    assert values[:, 0].unique().numel() == NUM_ENVS  # differs across worlds
    expected = torch.as_tensor(model.geom_friction[others, 0], dtype=friction.dtype)
    torch.testing.assert_close(friction[:, others], expected.expand(NUM_ENVS, -1))


def test_velocity_command_resamples_masked_rows_within_ranges(env):
    env.reset()
    twist = env.command_manager.get_term("twist")
    before = twist.vel_command_b.clone()
    mask = torch.tensor([True, False, True, False])
    twist.resample(mask)
    torch.testing.assert_close(twist.vel_command_b[~mask], before[~mask])
    standing = heading = 0
    draws = []
    for _ in range(300):
        twist.resample(torch.ones(NUM_ENVS, dtype=torch.bool))
        standing += int(twist.is_standing_env.sum())
        heading += int(twist.is_heading_env.sum())
        # a standing row's command is zero from the moment it is drawn (its first observation)
        assert not twist.vel_command_b[twist.is_standing_env].any()
        draws.append(twist.vel_command_b[~twist.is_standing_env].clone())
    values = torch.cat(draws)
    for axis, (low, high) in enumerate(((-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0))):
        assert values[:, axis].min() >= low and values[:, axis].max() <= high
        assert values[:, axis].min() < low + 0.1 and values[:, axis].max() > high - 0.1
    assert standing / 1200 == pytest.approx(0.1, abs=0.04)
    assert heading / 1200 == pytest.approx(0.25, abs=0.05)


def test_velocity_command_heading_control_and_standing_rows(env):
    env.reset()
    twist = env.command_manager.get_term("twist")
    twist.vel_command_b.copy_(torch.tensor([[0.5, 0.2, 0.3]]).expand(NUM_ENVS, 3))
    twist.heading_target.copy_(torch.tensor([2.0, -2.0, 0.1, 3.0]))
    twist.is_heading_env.copy_(torch.tensor([True, True, False, True]))
    twist.is_standing_env.copy_(torch.tensor([False, False, False, True]))
    twist._update()
    error = wrap_to_pi(twist.heading_target - env.robot.heading_w)
    expected_wz = torch.clamp(0.5 * error, -1.0, 1.0)
    cmd = twist.command
    torch.testing.assert_close(cmd[:2, 2], expected_wz[:2])
    torch.testing.assert_close(cmd[2], torch.tensor([0.5, 0.2, 0.3]))
    torch.testing.assert_close(cmd[3], torch.zeros(3))


def test_gait_clock_advances_and_is_drawn_at_reset(env):
    env.reset()
    gait = env.command_manager.get_term("gait")
    assert gait.phase.unique().numel() == NUM_ENVS  # drawn per row from the env RNG
    before = gait.phase.clone()
    result = env.step(torch.zeros(NUM_ENVS, env.num_actions))
    kept = ~(result.terminated | result.truncated)
    expected = torch.remainder(before + env.step_dt / 0.8, 1.0)
    torch.testing.assert_close(gait.phase[kept], expected[kept])
    angle = 2 * math.pi * gait.phase
    torch.testing.assert_close(
        env.command_manager.command("gait"), torch.stack((angle.sin(), angle.cos()), 1)
    )
    torch.testing.assert_close(gait.foot_phase[:, 1], torch.remainder(gait.phase + 0.5, 1.0))


def test_push_changes_only_masked_rows_root_velocity(env):
    env.reset()
    push = env.event_manager.get_term("push_robot")
    qvel_before = env.backend.qvel.clone()
    mask = torch.tensor([True, False, False, True])
    push(env, mask)  # the configured velocity_range: x, y in (-0.5, 0.5)
    qvel = env.backend.qvel
    torch.testing.assert_close(qvel[~mask], qvel_before[~mask], atol=0, rtol=0)
    kick = qvel[mask] - qvel_before[mask]
    assert bool((kick[:, :2].abs() <= 0.5).all()) and kick[:, :2].abs().max() > 0
    torch.testing.assert_close(kick[:, 2:], torch.zeros(2, qvel.shape[1] - 2, dtype=qvel.dtype))


def test_velocity_rewards_and_terminations_against_hand_values(env):
    _set_root_state(env, rpy=(0.0, 0.0, 0.7), lin_vel=(0.3, 0.1, 0.0))
    twist = env.command_manager.get_term("twist")
    v_b = env.robot.root_lin_vel_b
    twist.vel_command_b.copy_(torch.cat((v_b[:, :2], torch.zeros(NUM_ENVS, 1)), dim=1))
    torch.testing.assert_close(mdp.track_lin_vel_xy_exp(env, "twist", 0.5), torch.ones(NUM_ENVS))
    twist.vel_command_b.zero_()
    expected = torch.exp(-(0.3**2 + 0.1**2) / torch.tensor(0.25)).expand(NUM_ENVS)
    torch.testing.assert_close(mdp.track_lin_vel_xy_exp(env, "twist", 0.5), expected)
    torch.testing.assert_close(mdp.flat_orientation_l2(env), torch.zeros(NUM_ENVS), atol=1e-7, rtol=0)
    assert not bool(mdp.bad_orientation(env, math.radians(70)).any())

    _set_root_state(env, rpy=(math.radians(80.0), 0.0, 0.0))
    assert bool(mdp.bad_orientation(env, math.radians(70)).all())
    torch.testing.assert_close(
        mdp.flat_orientation_l2(env), torch.full((NUM_ENVS,), math.sin(math.radians(80)) ** 2)
    )
    _set_root_state(env, rpy=(0.0, math.radians(60.0), 0.0))
    assert not bool(mdp.bad_orientation(env, math.radians(70)).any())
    _set_root_state(env, pos=(0.0, 0.0, 0.25))
    assert bool(mdp.root_height_below_minimum(env, 0.3).all())
    env.reset()


def test_feet_contact_phase_and_slip_on_a_standing_robot(env):
    _set_root_state(env)
    for _ in range(10):  # settle onto both feet with the default targets held
        env.backend.step()
    cfg = env.cfg.rewards["feet_contact_phase"]
    phase_term = mdp.FeetContactPhase(cfg, env)
    twist = env.command_manager.get_term("twist")
    gait = env.command_manager.get_term("gait")
    assert bool(contact_mask(env, phase_term.contact_ids, 1.0).all()), "the default pose stands on both feet"
    twist.vel_command_b.zero_()
    torch.testing.assert_close(phase_term(env), torch.ones(NUM_ENVS))
    twist.vel_command_b[:, 0] = 0.8
    gait.phase.fill_(0.6)  # left foot in swing (0.6 >= 0.55), right foot in stance (0.1)
    torch.testing.assert_close(phase_term(env), torch.full((NUM_ENVS,), 0.5))
    slip_cfg = env.cfg.rewards["feet_slip_l2"]
    slip = mdp.FeetSlipL2(slip_cfg, env)(env)
    feet_speed = env.robot.body_lin_vel_w[:, env.robot.body_ids(G1_FOOT_BODIES), :2]
    torch.testing.assert_close(slip, feet_speed.square().sum(dim=(1, 2)))
    env.reset()
