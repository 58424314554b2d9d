"""Collector and learner on two CUDA streams equal the same overlapped schedule on one stream (GPU).

From one saved state, one iteration runs with the collector graph and the learner graph concurrently on
two streams, the state is put back, and the same iteration runs with both parts one after the other on
one stream. A race (the learner reading a row the collector is writing, or the collector acting with
weights the learner is changing) would make them differ. Integers, booleans and generator states must
agree exactly. The physics runs with its constraint solver off (``state_snapshot.without_constraints``):
with contacts, two executions of one step from the same state are not repeatable on a GPU.
"""

import pytest
import torch
from state_snapshot import StateSnapshot, compare, without_constraints

from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.envs import ManagerBasedRlEnv
from trainrt.runner.build import build_agent, build_replay, make_env_cfg
from trainrt.runner.collector import Collector
from trainrt.runner.iteration_clock import IterationClock
from trainrt.runner.schedule import IterationSchedule

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

STEPS, UPDATES = 4, 4


@pytest.mark.parametrize(("algo", "task"), [("sac", "g1_walk_flat"), ("flashsac", "g1_motion_tracking")])
def test_two_stream_overlap_equals_the_serialized_overlap(algo, task):
    cfg = apply_overrides(
        cpu_demo_preset(algo, task, "mjwarp"),
        [
            "algo.num_envs=256",
            "sim.device=cuda",
            "algo.params.buffer_size_per_env=12",  # the ring wraps during the test
            "algo.params.batch_size=1024",
            "algo.params.actor_update_period=2",
            "algo.params.bf16_autocast=false",
        ],
    )
    env = ManagerBasedRlEnv(
        without_constraints(make_env_cfg(cfg)), sim="mjwarp", num_envs=256, device="cuda", seed=0
    )
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    replay = build_replay(cfg, env)
    collector = Collector(env, agent, replay, env.reset(), steps_per_replay=2, use_graph=True)
    collector.prefill(4)
    collector.capture()
    replay.freeze_view()
    agent.capture_update(lambda g: replay.sample(1024, g, from_view=True), updates_per_replay=UPDATES)
    kwargs = dict(steps_per_iteration=STEPS, updates_per_iteration=UPDATES, overlap=True)
    concurrent = IterationSchedule(collector, agent, replay, **kwargs)
    serial = IterationSchedule(collector, agent, replay, serialize=True, **kwargs)
    assert concurrent.concurrent and not serial.concurrent, concurrent.diagnostics()
    clock = IterationClock("cuda")
    state = StateSnapshot(env, agent, replay, collector)
    for _ in range(4):
        start = state.current()
        host = (agent.num_updates, agent.policy_version, collector.steps_collected)
        clock.start()
        concurrent.run(clock)
        clock.synchronize_split()
        after_concurrent = start.current()
        start.restore()
        agent.num_updates, agent.policy_version, collector.steps_collected = host
        clock.start()
        serial.run(clock)
        clock.synchronize_split()
        compare(after_concurrent, start.current(), rtol=1e-4, atol=1e-4)
    assert concurrent.records == serial.records
