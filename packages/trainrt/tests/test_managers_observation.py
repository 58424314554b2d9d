"""Observation manager: noise (and its switch), clip, scale, history stacks, groups, dims, table."""

from __future__ import annotations

import pytest
import torch
from managers_toy_scene import constant, episode_step, make_env, row_index, toy_cfg

from trainrt.managers import GaussianNoiseCfg, ObsGroupCfg, ObsTermCfg, UniformNoiseCfg


def _column(env, value: float = 1.0):
    return constant(env, value).unsqueeze(1).expand(-1, 3)


def _rows(env):
    return row_index(env).unsqueeze(1)


def _obs_cfg(**groups):
    return toy_cfg(observations=groups)


def test_noise_applies_only_when_the_group_enables_corruption():
    noisy = ObsTermCfg(_column, params={"value": 1.0}, noise=UniformNoiseCfg(-0.1, 0.2))
    env = make_env(
        _obs_cfg(
            policy=ObsGroupCfg({"x": noisy}),
            critic=ObsGroupCfg({"x": noisy}, enable_corruption=False),
        )
    )
    obs = env.reset()
    policy, critic = obs["policy"], obs["critic"]
    assert torch.all(critic == 1.0)
    assert torch.all((policy >= 0.9) & (policy < 1.2))
    assert policy.unique().numel() > 1
    first = policy.clone()
    env.step(torch.zeros(env.num_envs, env.num_actions))
    assert not torch.equal(first, obs["policy"])  # fresh noise every step, same buffer object


def test_gaussian_noise_has_the_configured_spread():
    term = ObsTermCfg(_column, params={"value": 0.0}, noise=GaussianNoiseCfg(0.5))
    env = make_env(_obs_cfg(policy=ObsGroupCfg({"x": term})), num_envs=64)
    samples = torch.cat([env.reset()["policy"].clone() for _ in range(20)])
    assert samples.std().item() == pytest.approx(0.5, rel=0.1)
    assert abs(samples.mean().item()) < 0.05


def test_clip_then_scale():
    term = ObsTermCfg(_rows, clip=(0.5, 2.0), scale=10.0)
    env = make_env(_obs_cfg(policy=ObsGroupCfg({"rows": term})))
    obs = env.reset()["policy"]
    assert obs[:, 0].tolist() == [5.0, 10.0, 20.0, 20.0]


def test_per_dimension_scale_and_shape_check():
    term = ObsTermCfg(_column, scale=[1.0, 2.0, 3.0])
    env = make_env(_obs_cfg(policy=ObsGroupCfg({"x": term})))
    assert env.reset()["policy"][0].tolist() == [1.0, 2.0, 3.0]
    with pytest.raises(ValueError, match="scale"):
        make_env(_obs_cfg(policy=ObsGroupCfg({"x": ObsTermCfg(_column, scale=[1.0, 2.0])})))


def test_history_stacks_oldest_first_and_refills_after_reset():
    term = ObsTermCfg(episode_step, history_length=3)
    env = make_env(_obs_cfg(policy=ObsGroupCfg({"t": term, "rows": ObsTermCfg(_rows)})))
    assert env.obs_dims == {"policy": 4}
    obs = env.reset()
    assert obs["policy"][0].tolist() == [0.0, 0.0, 0.0, 0.0]
    action = torch.zeros(env.num_envs, env.num_actions)
    result = env.step(action)
    assert result.obs["policy"][:, :3].tolist() == [[0.0, 0.0, 1.0]] * env.num_envs
    result = env.step(action)
    assert result.obs["policy"][:, :3].tolist() == [[0.0, 1.0, 2.0]] * env.num_envs
    for _ in range(env.max_episode_length - 2):
        result = env.step(action)
    # time-out: the final observation includes the last frame; the new episode's history is refilled
    assert result.final_obs["policy"][:, :3].tolist() == [[3.0, 4.0, 5.0]] * env.num_envs
    assert result.obs["policy"][:, :3].tolist() == [[0.0, 0.0, 0.0]] * env.num_envs
    result = env.step(action)
    assert result.obs["policy"][:, :3].tolist() == [[0.0, 0.0, 1.0]] * env.num_envs


def test_non_concatenated_group_returns_terms():
    env = make_env(
        _obs_cfg(
            policy=ObsGroupCfg({"rows": ObsTermCfg(_rows)}),
            extra=ObsGroupCfg({"x": ObsTermCfg(_column), "rows": ObsTermCfg(_rows)}, concatenate=False),
        )
    )
    obs = env.reset()
    assert set(obs["extra"]) == {"x", "rows"}
    assert obs["extra"]["x"].shape == (env.num_envs, 3)
    assert env.obs_dims["extra"] == 4
    result = env.step(torch.zeros(env.num_envs, env.num_actions))
    assert result.final_obs["extra"]["rows"][:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]


def test_returned_buffers_are_persistent():
    env = make_env()
    obs = env.reset()
    first = env.step(torch.zeros(env.num_envs, env.num_actions))
    second = env.step(torch.ones(env.num_envs, env.num_actions))
    assert first is second
    for group in obs:
        assert obs[group].data_ptr() == second.obs[group].data_ptr()
    assert env.obs_dims == {g: t.shape[1] for g, t in obs.items()}


def test_term_returning_a_wrong_shape_fails_at_construction():
    bad = ObsTermCfg(lambda env: torch.zeros(env.num_envs + 1, 2))
    with pytest.raises(ValueError, match="num_envs"):
        make_env(_obs_cfg(policy=ObsGroupCfg({"bad": bad})))


def test_observation_table_lists_groups_and_processing():
    text = str(make_env().observation_manager)
    for needle in ("'policy'", "'critic'", "GaussianNoiseCfg", "joint_vel", "0.1"):
        assert needle in text
