"""Reward manager: weights, dt scaling, per-term episode sums, skipped zero weights, published returns."""

from __future__ import annotations

import pytest
import torch
from managers_toy_scene import constant, make_env, row_index, toy_cfg

from trainrt.managers import RewardTermCfg


def _never_called(env):
    raise AssertionError("a zero-weight reward term must not be evaluated")


def _rewards():
    return {
        "alive": RewardTermCfg(constant, weight=2.0, params={"value": 1.0}),
        "row": RewardTermCfg(row_index, weight=-0.5),
        "off": RewardTermCfg(_never_called, weight=0.0),
    }


def test_reward_is_weighted_and_scaled_by_step_dt():
    env = make_env(toy_cfg(rewards=_rewards()))
    env.reset()
    result = env.step(torch.zeros(env.num_envs, env.num_actions))
    rows = torch.arange(env.num_envs, dtype=torch.float32)
    expected = (2.0 * 1.0 - 0.5 * rows) * env.step_dt
    torch.testing.assert_close(result.reward, expected)
    per_term = env.reward_manager.step_reward
    torch.testing.assert_close(per_term[:, 0], torch.full((env.num_envs,), 2.0 * env.step_dt))
    torch.testing.assert_close(per_term[:, 1], -0.5 * rows * env.step_dt)
    assert torch.all(per_term[:, 2] == 0)


def test_episode_sums_accumulate_and_reset_with_the_episode():
    env = make_env(toy_cfg(rewards=_rewards()))
    env.reset()
    action = torch.zeros(env.num_envs, env.num_actions)
    for k in range(1, env.max_episode_length):
        env.step(action)
        torch.testing.assert_close(
            env.reward_manager.episode_sums[:, 0], torch.full((env.num_envs,), 2.0 * env.step_dt * k)
        )
    env.step(action)  # time-out: every row resets, sums restart from zero
    assert torch.all(env.reward_manager.episode_sums == 0)
    stats = env.episode_stats()
    assert stats["Episode/num_finished"] == env.num_envs
    assert stats["Episode/length"] == env.max_episode_length
    assert stats["Episode/rew_alive"] == pytest.approx(2.0 * env.step_dt * env.max_episode_length, rel=1e-5)
    mean_row = sum(range(env.num_envs)) / env.num_envs
    assert stats["Episode/rew_row"] == pytest.approx(
        -0.5 * mean_row * env.step_dt * env.max_episode_length, rel=1e-5
    )
    assert stats["Episode/rew_off"] == 0.0
    # published statistics are consumed: the next call reports no finished episodes
    again = env.episode_stats()
    assert again["Episode/num_finished"] == 0 and "Episode/rew_alive" not in again


def test_reward_table_lists_terms_and_weights():
    env = make_env(toy_cfg(rewards=_rewards()))
    table = str(env.reward_manager)
    for name in ("alive", "row", "off", "-0.5"):
        assert name in table


def test_misspelled_reward_param_fails_at_construction():
    rewards = {"alive": RewardTermCfg(constant, weight=1.0, params={"valu": 1.0})}
    with pytest.raises(ValueError, match="alive"):
        make_env(toy_cfg(rewards=rewards))
