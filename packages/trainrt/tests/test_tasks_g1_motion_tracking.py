"""``g1_motion_tracking`` on the real env (mujoco backend): reset to the reference, rewards, adaptive sampling."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from trainrt.envs import ManagerBasedRlEnv
from trainrt.mdp.math import quat_error_magnitude
from trainrt.tasks import make_task_cfg
from trainrt.tasks.g1_motion_tracking.env_cfg import (
    DEFAULT_MOTION_FILE,
    TRACKED_BODIES,
    g1_motion_tracking_env_cfg,
)
from trainrt.tasks.tracking import mdp as tracking
from trainrt.tasks.tracking.command import resolve_motion_file

NUM_ENVS = 4
EXP_REWARDS = (
    "motion_anchor_pos_exp", "motion_anchor_ori_exp", "motion_body_pos_exp", "motion_body_ori_exp",
    "motion_body_lin_vel_exp", "motion_body_ang_vel_exp",
)  # fmt: skip


def _make_env(exact_reset: bool = False, seed: int = 0) -> ManagerBasedRlEnv:
    try:
        cfg = make_task_cfg("g1_motion_tracking")
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")
    if exact_reset:
        motion = cfg.commands["motion"]
        params = {**motion.params, "pose_range": {}, "velocity_range": {}, "joint_position_range": (0.0, 0.0)}
        cfg.commands["motion"] = dataclasses.replace(motion, params=params)
    try:
        return ManagerBasedRlEnv(cfg, sim="mujoco", num_envs=NUM_ENVS, device="cpu", seed=seed)
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")


@pytest.fixture(scope="module")
def env() -> ManagerBasedRlEnv:
    return _make_env()


@pytest.fixture(scope="module")
def exact_env() -> ManagerBasedRlEnv:
    return _make_env(exact_reset=True)


def test_config_matches_the_issue():
    cfg = g1_motion_tracking_env_cfg()
    assert cfg.decimation == 4 and cfg.episode_length_s == 10.0
    assert len(TRACKED_BODIES) == 14 and cfg.commands["motion"].params["anchor_body"] == "torso_link"
    stds = {name: cfg.rewards[name].params["std"] for name in EXP_REWARDS}
    assert stds == {
        "motion_anchor_pos_exp": 0.3, "motion_anchor_ori_exp": 0.4, "motion_body_pos_exp": 0.3,
        "motion_body_ori_exp": 0.4, "motion_body_lin_vel_exp": 1.0, "motion_body_ang_vel_exp": 3.14,
    }  # fmt: skip
    weights = {name: term.weight for name, term in cfg.rewards.items()}
    assert weights["action_rate_l2"] == -0.1 and weights["joint_pos_limits"] == -10.0
    assert weights["undesired_contacts"] == -0.1
    thresholds = {name: t.params.get("threshold") for name, t in cfg.terminations.items()}
    assert thresholds == {
        "time_out": None, "motion_finished": None, "anchor_height": 0.25, "anchor_orientation": 0.8,
        "end_effector_height": 0.25,
    }  # fmt: skip
    assert cfg.terminations["motion_finished"].time_out


def test_layout_and_random_action_rollout(env):
    assert env.obs_dims == {
        "policy": 58 + 3 + 6 + 3 + 3 + 29 + 29 + 29,
        "critic": 58 + 3 + 6 + 14 * 3 + 14 * 6 + 3 + 3 + 29 + 29 + 29,
    }
    env.reset()
    g = torch.Generator().manual_seed(2)
    for _ in range(20):
        result = env.step(0.5 * (torch.rand(NUM_ENVS, env.num_actions, generator=g) * 2 - 1))
        assert bool(torch.isfinite(result.reward).all()) and bool(result.valid.all())
        assert bool(torch.isfinite(result.obs["critic"]).all())
    stats = env.episode_stats()
    assert 0.0 <= stats["Metrics/sampling_entropy"] <= 1.0 or stats["Episode/num_finished"] == 0.0


def test_reset_places_the_robot_exactly_on_the_reference(exact_env):
    env = exact_env
    env.reset()
    m = env.command_manager.get_term("motion")
    assert bool((m.frame >= 0).all()) and bool((m.frame <= m.num_frames - 2).all())
    torch.testing.assert_close(m.robot_body_pos_w, m.ref_body_pos_w, atol=1e-5, rtol=0)
    assert quat_error_magnitude(m.robot_body_quat_w, m.ref_body_quat_w).max() < 1e-4
    torch.testing.assert_close(
        env.robot.body_lin_vel_w[:, m.robot_body_ids], m.ref_body_lin_vel_w, atol=1e-4, rtol=0
    )
    torch.testing.assert_close(
        env.robot.body_ang_vel_w[:, m.robot_body_ids], m.ref_body_ang_vel_w, atol=1e-4, rtol=0
    )
    torch.testing.assert_close(env.robot.joint_pos, m.ref_joint_pos, atol=1e-6, rtol=0)
    for name in EXP_REWARDS:
        value = getattr(tracking, name)(env, "motion", env.cfg.rewards[name].params["std"])
        assert bool((value > 0.9999).all()), name
    torch.testing.assert_close(
        tracking.motion_anchor_pos_b(env, "motion"), torch.zeros(NUM_ENVS, 3), atol=1e-5, rtol=0
    )
    identity_6d = torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]).expand(NUM_ENVS, 6)
    torch.testing.assert_close(tracking.motion_anchor_ori_b(env, "motion"), identity_6d, atol=1e-5, rtol=0)
    assert not bool(tracking.anchor_height_error(env, "motion", 0.25).any())
    assert not bool(tracking.anchor_orientation_error(env, "motion", 0.8).any())


def test_relative_targets_follow_the_robot_anchor_in_xy_and_yaw(exact_env):
    env = exact_env
    env.reset()
    m = env.command_manager.get_term("motion")
    target, quat = m.relative_body_targets()
    # On the reference: the relative targets are the reference itself.
    torch.testing.assert_close(target, m.ref_body_pos_w, atol=1e-5, rtol=0)
    assert quat_error_magnitude(quat, m.ref_body_quat_w).max() < 1e-4
    # Move the robot 1 m along x: targets move with it, heights stay the reference's.
    qpos = env.reset_payload["qpos"]
    qpos.copy_(env.backend.qpos)
    qpos[:, 0] += 1.0
    env.reset_payload["qvel"].copy_(env.backend.qvel)
    env.backend.reset(torch.ones(NUM_ENVS, dtype=torch.bool), env.reset_payload, env.reset_spec)
    moved, _ = m.relative_body_targets()
    expected = m.ref_body_pos_w.clone()
    expected[..., 0] += 1.0
    torch.testing.assert_close(moved, expected, atol=1e-5, rtol=0)
    body_reward = tracking.motion_body_pos_exp(env, "motion", 0.3)
    anchor_reward = tracking.motion_anchor_pos_exp(env, "motion", 0.3)
    assert bool((body_reward > 0.9999).all())  # posture is unchanged
    torch.testing.assert_close(
        anchor_reward, torch.full((NUM_ENVS,), math.exp(-1.0 / 0.09)), atol=1e-6, rtol=0
    )
    env.reset()


def test_reset_perturbations_stay_within_their_ranges(env):
    env.reset()
    m = env.command_manager.get_term("motion")
    offset = env.robot.root_pos_w - m.clip.root_pos_w[m.frame]
    assert bool((offset[:, :2].abs() <= 0.05 + 1e-5).all()) and bool(
        (offset[:, 2].abs() <= 0.01 + 1e-5).all()
    )
    assert offset.abs().max() > 1e-3
    joint_offset = env.robot.joint_pos - m.clip.joint_pos[m.frame]
    assert joint_offset.abs().max() <= 0.1 + 1e-5


def test_adaptive_sampling_is_uniform_without_failures_and_follows_them(env):
    env.reset()
    m = env.command_manager.get_term("motion")
    m.bin_failure_rate.zero_()
    m._sample_start_frames()
    torch.testing.assert_close(m.sampling_probabilities, torch.full((m.num_bins,), 1.0 / m.num_bins))
    assert float(m.sampling_entropy) == pytest.approx(1.0, abs=1e-6)

    failing_bin = m.num_bins - 2
    m.bin_failure_rate[failing_bin] = 1.0
    frames = torch.cat([m._sample_start_frames() for _ in range(200)])
    bins = frames * m.num_bins // m.num_frames
    near = (bins <= failing_bin) & (bins >= failing_bin - 2)  # the kernel looks ahead: starts before failures
    assert near.float().mean() > 0.75
    assert float(m.sampling_entropy) < 0.8
    assert bool((frames <= m.num_frames - 2).all()) and bool((frames >= 0).all())
    m.bin_failure_rate.zero_()


def test_failures_are_counted_in_the_bin_of_the_failing_frame(env):
    env.reset()
    m = env.command_manager.get_term("motion")
    m.bin_failure_rate.zero_()
    m._bin_failures_now.zero_()
    m.frame.copy_(torch.tensor([0, 60, 60, 200]))
    env.terminated.copy_(torch.tensor([False, True, True, True]))
    mask = torch.tensor([True, True, False, True])  # row 2 failed but is not resetting: not counted
    m.resample(mask)
    expected = torch.zeros(m.num_bins)
    expected[60 * m.num_bins // m.num_frames] += 1
    expected[200 * m.num_bins // m.num_frames] += 1
    torch.testing.assert_close(m._bin_failures_now, expected)
    assert int(m.frame[2]) == 61 - 1  # unmasked rows keep their frame
    m._update()
    m._bin_failures_now.zero_()
    env.reset()  # a full reset clears the step's failures: nothing is counted twice
    torch.testing.assert_close(m._bin_failures_now, torch.zeros(m.num_bins))
    torch.testing.assert_close(m.bin_failure_rate, 0.001 * expected)
    env.termination_manager.failures.zero_()
    m.bin_failure_rate.zero_()
    env.reset()


def test_clip_end_is_a_time_out_and_frames_advance_one_per_step(exact_env):
    env = exact_env
    env.reset()
    m = env.command_manager.get_term("motion")
    before = m.frame.clone()
    result = env.step(torch.zeros(NUM_ENVS, env.num_actions))
    kept = ~(result.terminated | result.truncated)
    torch.testing.assert_close(m.frame[kept], before[kept] + 1)
    m.frame.copy_(torch.tensor([m.num_frames - 1, m.num_frames - 2, 0, m.num_frames - 1]))
    torch.testing.assert_close(
        tracking.motion_finished(env, "motion"), torch.tensor([True, False, False, True])
    )
    env.reset()


def test_unknown_motion_file_names_the_available_clips():
    with pytest.raises(
        FileNotFoundError, match=r"motion file 'no_such_clip.npz' not found \(G1 asset clips: \["
    ):
        resolve_motion_file("no_such_clip.npz")
    assert resolve_motion_file(None).name == DEFAULT_MOTION_FILE


def test_the_clip_refuses_a_step_other_than_its_frame_time(env):
    m = env.command_manager.get_term("motion")
    assert m.frame_dt == env.step_dt
    before = m.frame.clone()
    with pytest.raises(ValueError, match=r"advances in frames of .* got dt=0\.005"):
        m.compute(0.005)
    torch.testing.assert_close(m.frame, before)
