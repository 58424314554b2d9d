"""The test helper that restores a whole training step's state is complete: a restored step repeats exactly."""

import pytest
import torch
from state_snapshot import StateSnapshot, compare

from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.runner.build import build_agent, build_env, build_replay
from trainrt.runner.collector import Collector

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
def test_restoring_a_snapshot_repeats_collector_steps_bit_for_bit(task):
    cfg = apply_overrides(
        cpu_demo_preset("flashsac", task, "mjwarp"),
        [
            "algo.num_envs=2",
            "algo.params.buffer_size_per_env=8",
            "algo.params.learning_starts=2",  # the warm-up fits the ring (the test prefills 2 rows)
            "algo.params.actor_hidden_dim=8",
        ],
    )
    env = build_env(cfg)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    replay = build_replay(cfg, env)
    collector = Collector(env, agent, replay, env.reset(), use_graph=False)
    collector.prefill(2, use_policy=True)
    snapshot = StateSnapshot(env, agent, replay, collector)
    for _ in range(3):
        collector.step()
    first = snapshot.current()
    snapshot.restore()
    for _ in range(3):
        collector.step()
    again = snapshot.current()
    compare(first, again, rtol=0.0, atol=0.0)  # Warp's CPU device and torch on CPU are deterministic
    assert any(
        not (a == b).all() for a, b in zip(snapshot.values, first.values)
    )  # the steps did change state


def test_compare_names_every_mismatch_and_gives_solver_outputs_a_force_tolerance():
    cfg = apply_overrides(cpu_demo_preset("sac", "g1_walk_flat", "mjwarp"), ["algo.num_envs=2"])
    env = build_env(cfg)
    env.reset()
    snapshot = StateSnapshot(env)
    with torch.no_grad():
        env.backend.qacc_warmstart.add_(1e-3)  # a solver output: within its tolerance
    compare(snapshot, snapshot.current(), rtol=1e-4, atol=1e-4)
    with torch.no_grad():
        env.backend.qpos[0, 7] += 1e-2  # a joint angle: must be reported by name
        env.episode_length_buf[1] += 1
    with pytest.raises(AssertionError, match="qpos") as failure:
        compare(snapshot, snapshot.current(), rtol=1e-4, atol=1e-4)
    assert "differs" in str(failure.value)  # the integer counter is listed too
