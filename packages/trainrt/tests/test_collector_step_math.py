"""The compiled collector step math (``Collector.compile_math``: the agent's stochastic action and the
transition's record) against the eager one, from the same saved state.

From one snapshot of everything the collector reaches (env, managers, agent, replay, collector, the physics
and every generator), collector steps with the action and the record compiled must leave what the eager steps
leave: integers, flags, the replay cursor, the held-noise timers and generator states exactly, floats to
float32 rounding (fusion may reorder a sum; the physics carries an action's last-bit difference into the next
observations). Episodes end inside the compared steps (short time-outs), so the
done flags, the episode sums and the per-episode noise resets are part of it. On the CPU inductor compiles C++
(MuJoCo Warp on its CPU device); on a CUDA device (marked ``gpu``) Triton, with the constraint solver off so
the physics itself repeats.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from state_snapshot import StateSnapshot, compare, without_constraints

from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.envs import ManagerBasedRlEnv
from trainrt.runner.build import build_agent, build_replay, make_env_cfg
from trainrt.runner.collector import Collector

NUM_ENVS = 4
STEPS = 8
EPISODE_STEPS = 4  # time-outs, and so resets, inside the compared steps
WORKLOADS = [("sac", "g1_walk_flat"), ("flashsac", "g1_motion_tracking")]
_CUDA = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _collector(algo: str, task: str, device: str, *, constraints: bool = True) -> Collector:
    cfg = apply_overrides(
        cpu_demo_preset(algo, task, "mjwarp"),
        [
            f"algo.num_envs={NUM_ENVS}",
            "algo.params.buffer_size_per_env=16",
            "algo.params.actor_hidden_dim=16",
            "algo.params.critic_hidden_dim=16",
        ],
    )
    env_cfg = dataclasses.replace(make_env_cfg(cfg), episode_length_s=EPISODE_STEPS * 0.02 - 1e-6)
    if not constraints:
        env_cfg = without_constraints(env_cfg)
    try:
        env = ManagerBasedRlEnv(env_cfg, sim="mjwarp", num_envs=NUM_ENVS, device=device, seed=3)
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")
    except ImportError as err:
        pytest.skip(f"backend mjwarp unavailable: {err}")
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    replay = build_replay(cfg, env)
    return Collector(env, agent, replay, env.reset(), use_graph=False)


def _steps(collector: Collector, count: int) -> None:
    for _ in range(count):
        collector.step()
    if collector.device.type == "cuda":
        torch.cuda.synchronize()


def _same_steps_compiled_and_eager(collector: Collector, *, atol: float = 1e-5) -> dict[str, float]:
    collector.prefill(2, use_policy=True)  # the first act creates FlashSAC's held-noise buffers
    state = StateSnapshot(collector.env, collector.agent, collector.replay, collector)
    finished_before = float(collector._finished_count)
    _steps(collector, STEPS)
    eager = state.current()
    assert float(collector._finished_count) > finished_before  # episodes ended inside the compared steps
    state.restore()
    assert collector.compile_math()
    _steps(collector, STEPS)
    diagnostics = collector.math_diagnostics()
    assert collector.agent.act_compiled and collector._record.compiled, diagnostics
    # a compiled action differs from the eager one in its last bits, and the physics carries that into the
    # next observations: far below a semantic difference (a skipped reset or a wrong row is O(1))
    facts = compare(eager, state.current(), rtol=1e-4, atol=atol)
    assert facts["exact_tensors"] > 10 and facts["float_tensors"] > 10
    return facts


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "task"), WORKLOADS)
def test_compiled_collector_math_leaves_the_eager_state_on_the_cpu(algo, task):
    collector = _collector(algo, task, "cpu")
    assert collector.math_diagnostics() == {
        "step_math_compiled": False,
        "step_math_fallback_reason": "not requested",
    }
    # With contacts on and the presets' 5 solver iterations a contact solution converges less: the tracking run
    # carried a last-bit action difference into one observation of 18,304 as 2.9e-5 (at 0.023).
    _same_steps_compiled_and_eager(collector, atol=1e-4)


@pytest.mark.parametrize(("algo", "task"), [pytest.param(*w, marks=_CUDA) for w in WORKLOADS])
def test_compiled_collector_math_leaves_the_eager_state_on_the_gpu(algo, task):
    collector = _collector(algo, task, "cuda", constraints=False)
    facts = _same_steps_compiled_and_eager(collector)
    print(f"largest float difference: {facts['max_float_difference']:.3g}")


def test_the_collector_compiles_nothing_on_the_cpu_and_says_so():
    collector = _collector("sac", "g1_walk_flat", "cpu")
    diagnostics = Collector(
        collector.env, collector.agent, collector.replay, collector.obs, use_graph=False, compile_math=True
    ).math_diagnostics()
    assert diagnostics == {
        "step_math_compiled": False,
        # the env here is built without build_env, which compiles its term math where asked to
        "step_math_fallback_reason": "terms: not requested; observations: not requested; "
        "reset_payload: not requested; after_reset: not requested; act: cpu device; record: cpu device",
    }


@pytest.mark.slow
def test_a_record_that_cannot_compile_runs_eagerly_and_says_why():
    collector = _collector("sac", "g1_walk_flat", "cpu")
    add = collector.replay.add

    def untraceable(*args: torch.Tensor) -> None:
        torch._dynamo.graph_break()  # a host-side step torch.compile(fullgraph=True) refuses
        add(*args)

    collector.replay.add = untraceable
    collector.prefill(1, use_policy=True)
    state = StateSnapshot(collector.env, collector.agent, collector.replay, collector)
    _steps(collector, 3)
    eager = state.current()
    state.restore()
    assert collector.compile_math()  # accepted; the first step decides
    _steps(collector, 3)
    reason = collector.math_diagnostics()["step_math_fallback_reason"]
    assert reason.startswith(
        "terms: not requested; observations: not requested; reset_payload: not requested; "
        "after_reset: not requested; record: compiling failed:"
    )
    assert collector.agent.act_compiled  # the action stays compiled
    # the failed step ran eagerly once (twice would write two replay rows and double the episode sums: the
    # cursor and counters compare exactly). The action is compiled here and not in the eager steps, so its
    # last-bit differences reach the next observations through the contacts, as in the test above (3.5e-5
    # on some processors).
    compare(eager, state.current(), rtol=1e-4, atol=1e-4)
    collector.uncompile_math("disabled")
    assert collector.math_diagnostics()["step_math_fallback_reason"].endswith(
        "act: disabled; record: disabled"
    )
