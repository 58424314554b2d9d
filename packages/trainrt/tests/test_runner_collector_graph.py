"""The graph-replayed collector equals the eager one, proven one replay at a time from the same state (GPU).

Every replay starts from one saved state (every tensor of env, managers, agent, replay and collector, the
physics through ``state_tensors()``, every generator): the graph replays K steps, the state is put back,
the same K steps run eagerly, and the two results are compared: every integer and boolean tensor
(termination and time-out flags, episode counters, the replay cursor and validity flags, command and event
timers) and every generator state exactly, floating-point tensors to a tolerance far below any semantic
difference (a skipped reset, a shifted step or a wrong row changes values by O(1)). The next replay
continues from the eager result, so the comparison never drifts.

The physics runs with its constraint solver off (``state_snapshot.without_constraints``): with contacts,
two executions of one step from the same state differed on the H200 by up to 0.4 rad/s in a joint
velocity, which no tolerance separates from a bug. The robot falls through the floor instead, so
terminations and resets happen within the compared replays.
"""

import dataclasses

import pytest
import torch
from state_snapshot import StateSnapshot, compare, without_constraints

import simcore
from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.envs import ManagerBasedRlEnv
from trainrt.runner.build import build_agent, build_replay, make_env_cfg
from trainrt.runner.collector import Collector

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

NUM_ENVS = 64
K = 2
REPLAYS = 10
EPISODE_STEPS = 6  # short episodes: time-outs and resets happen inside the compared replays


@pytest.mark.parametrize(("algo", "task"), [("sac", "g1_walk_flat"), ("flashsac", "g1_motion_tracking")])
def test_each_graph_replay_equals_eager_steps_from_the_same_state(algo, task):
    cfg = apply_overrides(
        cpu_demo_preset(algo, task, "mujoco"),
        [
            f"algo.num_envs={NUM_ENVS}",
            "algo.params.buffer_size_per_env=32",
            "algo.params.actor_hidden_dim=32",
            "algo.params.critic_hidden_dim=32",
        ],
    )
    env_cfg = without_constraints(
        dataclasses.replace(make_env_cfg(cfg), episode_length_s=EPISODE_STEPS * 0.02 - 1e-6)
    )
    env = ManagerBasedRlEnv(env_cfg, sim="mjwarp", num_envs=NUM_ENVS, device="cuda", seed=0)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    replay = build_replay(cfg, env)
    collector = Collector(env, agent, replay, env.reset(), steps_per_replay=K, use_graph=True)
    collector.prefill(3, use_policy=True)
    collector.capture()
    assert collector.diagnostics()["graph_enabled"] is True, collector.diagnostics()
    eager = simcore.CapturedWork(
        collector.step, backend=env.backend, name="eager", steps_per_replay=K, enabled=False
    )
    eager.capture()
    state = StateSnapshot(env, agent, replay, collector)
    worst = 0.0
    finished_before = float(collector._finished_count)
    for _ in range(REPLAYS):
        start = state.current()
        collector.work.replay()
        torch.cuda.synchronize()
        after_graph = start.current()
        start.restore()
        eager.replay()
        torch.cuda.synchronize()
        facts = compare(after_graph, start.current(), rtol=1e-4, atol=1e-4)
        worst = max(worst, facts["max_float_difference"])
    assert float(collector._finished_count) > finished_before  # episodes ended inside compared replays
    assert facts["exact_tensors"] > 20 and facts["float_tensors"] > 20
    print(f"largest float difference over {REPLAYS} replays: {worst:.3g}")
