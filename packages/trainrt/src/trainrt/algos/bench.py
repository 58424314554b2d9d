"""Learner-only benchmark (diagnostic): milliseconds per update and achieved TFLOP/s, per execution mode.

Modes, all on the same agent and replay contents:
- ``eager``: sample + update launched op by op;
- ``graph``: one CUDA-graph replay per update (uncompiled network math);
- ``fused``: the network math compiled with torch.compile and all updates of an iteration replayed as
  one graph, as the runner does.

FLOPs per update are counted once on the eager path with torch's FLOP counter (matrix products and
their backward passes; elementwise work is not counted), averaged over the actor period. It
attributes learner time; it is not the end-to-end throughput number (``tail_env_steps_per_sec``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

import simcore
from trainrt.algos.agent import Agent
from trainrt.algos.execution import SampleFn
from trainrt.hotpath import cold_path


@cold_path
def update_flops(agent: Agent, sample_fn: SampleFn) -> float:
    """Mean FLOPs of one update over the actor period (counted on eager updates; state is restored)."""
    state = agent.state_dict()
    counts = []
    for index in range(agent.actor_update_period):
        batch = sample_fn(agent.update_rng)  # outside the counter: a compiled sample refuses dispatch modes
        with FlopCounterMode(display=False) as counter:
            agent._update_step(batch, update_actor=index == 0)
        counts.append(counter.get_total_flops())
    agent.load_state_dict(state)
    return sum(counts) / len(counts)


@cold_path
def learner_benchmark(
    agent: Agent,
    sample_fn: SampleFn,
    *,
    updates_per_iteration: int,
    iterations: int = 10,
    modes: tuple[str, ...] = ("eager", "graph", "fused"),
    compile_sample: Callable[[], object] | None = None,
) -> dict[str, Any]:
    """Time ``iterations`` iterations of ``updates_per_iteration`` updates in each mode.

    ``compile_sample`` (e.g. the replay's `compile_sample`) runs just before the ``fused`` mode, so that
    mode samples as training does and the earlier modes sample eagerly.

    Returns ``{mode}_ms_per_update`` for each mode that ran, ``flops_per_update``,
    ``{mode}_tflops`` (achieved), and the learner diagnostics of the last capture. Each mode starts
    from the same agent state; updates are real (weights change).
    """
    device = agent.device
    flops = update_flops(agent, sample_fn)
    result: dict[str, Any] = {
        "updates_per_iteration": updates_per_iteration,
        "actor_update_period": agent.actor_update_period,
        "flops_per_update": flops,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "diagnostic": True,
    }
    start = agent.state_dict()
    for mode in modes:
        agent.load_state_dict(start)
        if mode == "eager":
            agent.capture_update(sample_fn, enabled=False)
        else:
            if mode == "fused" and compile_sample is not None:
                compile_sample()
            agent.capture_update(
                sample_fn,
                updates_per_replay=updates_per_iteration if mode == "fused" else 1,
                compile=mode == "fused",
            )
            if mode == "graph":
                agent._multi_graph = None  # one replay per update
        agent.replay_updates(updates_per_iteration)  # first replay outside the timing
        seconds = simcore.wall_seconds(
            lambda: agent.replay_updates(updates_per_iteration), iterations, device
        )
        ms = 1e3 * seconds / (iterations * updates_per_iteration)
        result[f"{mode}_ms_per_update"] = ms
        result[f"{mode}_tflops"] = flops / (ms * 1e-3) / 1e12
        result[f"{mode}_learner"] = agent.update_diagnostics()
    if "eager_ms_per_update" in result and "fused_ms_per_update" in result:
        result["fused_speedup_vs_eager"] = result["eager_ms_per_update"] / result["fused_ms_per_update"]
    if "graph_ms_per_update" in result and "fused_ms_per_update" in result:
        result["fused_speedup_vs_graph"] = result["graph_ms_per_update"] / result["fused_ms_per_update"]
    return result
