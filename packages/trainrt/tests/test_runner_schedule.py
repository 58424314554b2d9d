"""The iteration schedule: which policy acted and which rows the learner saw, sequential and overlapped.

The overlapped schedule's learner reads only the replay view frozen at the iteration boundary and the
collector only the acting copy of the policy, so the two parts may run in either order (or at once on
two CUDA streams) with identical results. On the CPU that is checked bit for bit by running the parts
in both orders from the same state.
"""

import copy
from functools import partial

import pytest
import torch

from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.runner.build import build_agent, build_env, build_replay
from trainrt.runner.collector import Collector
from trainrt.runner.iteration_clock import IterationClock
from trainrt.runner.schedule import IterationSchedule

STEPS, UPDATES, PREFILL = 2, 3, 4

pytestmark = pytest.mark.usefixtures("one_thread")


def _parts(seed: int = 0):
    cfg = apply_overrides(
        cpu_demo_preset("sac", "g1_walk_flat", "mujoco"),
        [
            "algo.num_envs=2",
            "algo.params.actor_hidden_dim=8",
            "algo.params.critic_hidden_dim=8",
            "algo.params.batch_size=16",
            "algo.params.buffer_size_per_env=6",
            f"algo.params.learning_starts={PREFILL}",  # the warm-up fits the ring (it prefills PREFILL rows)
            "algo.params.actor_update_period=1",
            f"training.seed={seed}",
        ],
    )
    env = build_env(cfg)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    replay = build_replay(cfg, env)
    collector = Collector(env, agent, replay, env.reset(), steps_per_replay=1, use_graph=False)
    collector.prefill(PREFILL)
    collector.capture()
    replay.freeze_view()
    agent.capture_update(lambda g: replay.sample(16, g, from_view=True), updates_per_replay=UPDATES)
    return cfg, env, agent, replay, collector


@pytest.mark.parametrize("overlap", [False, True])
def test_records_name_the_acting_policy_and_the_learner_view(overlap):
    _, _, agent, replay, collector = _parts()
    schedule = IterationSchedule(
        collector, agent, replay, steps_per_iteration=STEPS, updates_per_iteration=UPDATES, overlap=overlap
    )
    assert schedule.overlap_enabled is overlap
    clock = IterationClock("cpu")
    for _ in range(4):  # the 6-row ring wraps: overwritten rows must stay outside the view
        clock.start()
        schedule.run(clock)
        clock.synchronize_split()
    for i, record in enumerate(schedule.records):
        # The collector of iteration i always acts with the weights after iteration i-1's updates.
        assert record.acting_policy_version == i * UPDATES
        # Sequential: the learner sees this iteration's rows; overlapped: rows up to the boundary.
        assert record.learner_view_steps == PREFILL + (i + (0 if overlap else 1)) * STEPS
    assert agent.num_updates == 4 * UPDATES
    assert schedule.diagnostics()["data_staleness_iterations"] == (1 if overlap else 0)


def test_a_ring_no_longer_than_an_iteration_learns_sequentially_and_says_why():
    # Overlapped, the learner's view leaves out the rows an iteration overwrites: with no row left it would
    # fail in freeze_view. The schedule falls back on every device, with the reason.
    _, _, agent, replay, collector = _parts()
    schedule = IterationSchedule(
        collector, agent, replay, steps_per_iteration=6, updates_per_iteration=UPDATES, overlap=True
    )
    assert not schedule.overlap_enabled
    assert "capacity_per_env=6 (algo.params.buffer_size_per_env)" in schedule.overlap_fallback_reason
    clock = IterationClock("cpu")
    clock.start()
    schedule.run(clock)
    clock.synchronize_split()
    assert schedule.records[0].learner_view_steps == PREFILL + 6  # sequential: this iteration's rows too


def _state(agent, replay):
    tensors = [p.detach().clone() for p in [*agent.actor.parameters(), *agent.critic.parameters()]]
    tensors += [replay.obs["policy"].clone(), replay.reward.clone(), replay.valid.clone()]
    return tensors


def _one_iteration_in_both_orders(*, use_view: bool) -> list[list[torch.Tensor]]:
    """From the same state, one overlapped iteration by hand, learner first and collector first."""
    results = []
    for learner_first in (False, True):
        _, _, agent, replay, collector = _parts(seed=3)
        if not use_view:  # the learner samples the live buffer instead of the frozen view
            agent.capture_update(lambda g, r=replay: r.sample(16, g), updates_per_replay=UPDATES)
        collector.collect(STEPS)  # some history first
        agent.replay_updates(UPDATES)
        agent.publish_policy()
        replay.freeze_view(exclude_next_rows=STEPS)
        parts = [partial(agent.replay_updates, UPDATES, publish=False), partial(collector.collect, STEPS)]
        for part in parts if learner_first else parts[::-1]:
            part()
        results.append(_state(agent, replay))
    return results


def test_overlapped_parts_give_the_same_result_in_either_order():
    """Learner first or collector first, from the same state: the same weights and the same replay."""
    for a, b in zip(*_one_iteration_in_both_orders(use_view=True)):
        assert torch.equal(a, b)


def test_a_learner_reading_the_live_buffer_would_see_the_collector():
    """The order test above can fail: without the view, learner-first and collector-first differ."""
    results = _one_iteration_in_both_orders(use_view=False)
    assert any(not torch.equal(a, b) for a, b in zip(*results))


def test_the_collector_acts_with_the_published_copy_not_the_live_weights():
    _, _, agent, _, collector = _parts()
    obs = copy.deepcopy(collector.obs)
    before = agent.act(obs, deterministic=True)
    agent.replay_updates(UPDATES, publish=False)  # live weights move
    assert torch.equal(agent.act(obs, deterministic=True), before)
    agent.publish_policy()
    assert not torch.equal(agent.act(obs, deterministic=True), before)
    assert agent.policy_version == agent.num_updates
