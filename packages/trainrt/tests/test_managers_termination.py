"""Termination manager: failures go to ``terminated``, time-outs to ``truncated``; causes are counted."""

from __future__ import annotations

import pytest
import torch
from managers_toy_scene import make_env, row_fails_at, time_out, toy_cfg

from trainrt.managers import TerminationTermCfg


def _terminations():
    return {
        "time_out": TerminationTermCfg(time_out, time_out=True),
        "row0_fails": TerminationTermCfg(row_fails_at, params={"row": 0, "step": 2}),
    }


def test_time_out_and_failure_are_kept_apart():
    env = make_env(toy_cfg(terminations=_terminations()))
    env.reset()
    action = torch.zeros(env.num_envs, env.num_actions)
    result = env.step(action)
    assert not result.terminated.any() and not result.truncated.any()
    result = env.step(action)  # row 0 reaches 2 steps: failure, not a time-out
    assert result.terminated.tolist() == [True, False, False, False]
    assert not result.truncated.any()
    assert env.episode_length_buf.tolist() == [0, 2, 2, 2]
    for _ in range(env.max_episode_length - 2):
        result = env.step(action)
    # rows 1..3 time out together; row 0 restarted two steps later and is mid-episode
    assert result.truncated.tolist() == [False, True, True, True]
    assert not result.terminated[1:].any()
    assert env.termination_manager.dones.tolist() == [False, True, True, True]


def test_termination_causes_are_published_as_fractions():
    env = make_env(toy_cfg(terminations=_terminations()))
    env.reset()
    action = torch.zeros(env.num_envs, env.num_actions)
    for _ in range(env.max_episode_length):
        env.step(action)
    stats = env.episode_stats()
    # finished: row 0 twice (steps 2 and 4), rows 1..3 once (time-out at step 5)
    assert stats["Episode/num_finished"] == 5
    assert stats["Episode/term_row0_fails"] == pytest.approx(2 / 5)
    assert stats["Episode/term_time_out"] == pytest.approx(3 / 5)


def test_no_termination_terms_never_done():
    env = make_env(toy_cfg(terminations={}))
    env.reset()
    for _ in range(env.max_episode_length + 2):
        result = env.step(torch.zeros(env.num_envs, env.num_actions))
        assert not result.terminated.any() and not result.truncated.any()
    assert env.episode_length_buf.tolist() == [env.max_episode_length + 2] * env.num_envs


def test_max_episode_length_does_not_round_up_float_noise():
    assert 0.07 / 0.01 > 7  # 7.000000000000001
    assert make_env(toy_cfg(episode_length_s=0.07)).max_episode_length == 7
