"""The collector against the real env and replay buffer on the CPU (eager path; the graph path is the same step)."""

import dataclasses

import pytest
import torch

from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.envs import ManagerBasedRlEnv
from trainrt.runner.build import build_agent, build_replay, make_env_cfg
from trainrt.runner.collector import Collector

NUM_ENVS = 2
EPISODE_STEPS = 5


@pytest.fixture(scope="module")
def parts():
    """A 2-env walking env with 5-step episodes, a tiny SAC agent and a replay buffer."""
    cfg = apply_overrides(
        cpu_demo_preset("sac", "g1_walk_flat", "mujoco"),
        [
            f"algo.num_envs={NUM_ENVS}",
            "algo.params.actor_hidden_dim=8",
            "algo.params.critic_hidden_dim=8",
            "algo.params.buffer_size_per_env=64",
        ],
    )
    env_cfg = make_env_cfg(cfg)
    env_cfg = dataclasses.replace(env_cfg, episode_length_s=EPISODE_STEPS * 0.02 - 1e-6)
    env = ManagerBasedRlEnv(env_cfg, sim="mujoco", num_envs=NUM_ENVS, device="cpu", seed=0)
    assert env.max_episode_length == EPISODE_STEPS
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    return cfg, env, agent


def _collector(parts, **kwargs):
    cfg, env, agent = parts
    replay = build_replay(cfg, env)
    return Collector(env, agent, replay, env.reset(), **kwargs), replay


def test_every_step_writes_one_row_and_observations_chain(parts):
    collector, replay = _collector(parts, steps_per_replay=2)
    collector.prefill(3)
    collector.capture()
    collector.collect(8)
    rows = 3 + 8
    assert replay.num_rows() == rows
    assert bool(replay.valid[:rows].all())
    done = replay.terminated[:rows] | replay.truncated[:rows]
    for policy_group in replay.obs:
        # where an episode continues, the next row starts from this row's next observation
        same = torch.isclose(replay.obs[policy_group][1:rows], replay.next_obs[policy_group][: rows - 1]).all(
            -1
        )
        assert bool(same[~done[: rows - 1]].all())
        # where it ended, next_obs is the final (pre-reset) observation, not the new episode's first one
        assert not bool(same[done[: rows - 1]].any())
    # 11 steps of 5-step episodes: every env finished at least two
    assert int(done.sum()) >= 2 * NUM_ENVS


def test_episode_statistics_match_the_env_accounting(parts):
    _, env, _ = parts
    collector, _ = _collector(parts)
    env.episode_stats()  # start both accumulators from zero
    collector.capture()
    collector.collect(12)
    ours = collector.episode_summary()
    theirs = env.episode_stats()
    assert ours["Train/num_episodes"] == theirs["Episode/num_finished"] >= NUM_ENVS
    assert ours["Train/mean_episode_length"] == pytest.approx(theirs["Episode/length"])
    term_returns = sum(v for k, v in theirs.items() if k.startswith("Episode/rew_"))
    assert ours["Train/mean_reward"] == pytest.approx(term_returns, rel=1e-4, abs=1e-5)
    # publishing zeroes the sums
    assert collector.episode_summary() == {"Train/num_episodes": 0.0}


def test_eager_fallback_is_recorded_with_its_reason(parts):
    collector, _ = _collector(parts)
    collector.capture()
    facts = collector.diagnostics()
    assert facts["graph_enabled"] is False
    assert facts["eager_fallback_reason"] == "cpu device"
    assert facts["steps_per_replay"] == 1
    disabled, _ = _collector(parts, use_graph=False)
    disabled.capture()
    facts = disabled.diagnostics()
    assert facts["graph_enabled"] is False
    assert facts["disabled_by"] == "training.cuda_graph=false"
    assert facts["eager_fallback_reason"] == "disabled by config"


def test_collect_takes_whole_replays_only(parts):
    collector, _ = _collector(parts, steps_per_replay=2)
    collector.capture()
    with pytest.raises(ValueError, match="not a multiple of steps_per_replay=2"):
        collector.collect(3)
    with pytest.raises(ValueError, match="steps_per_replay must be >= 1"):
        _collector(parts, steps_per_replay=0)
