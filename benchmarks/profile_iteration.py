"""DIAGNOSTIC: where one training iteration's GPU time goes, kernel by kernel, for the canonical workloads.

    python benchmarks/profile_iteration.py --algo sac --task g1_walk_flat [--iterations 5] [--out result.json]

Builds the runner's own parts (env, agent, replay, collector graph, the learner graph of all updates of an
iteration, the two-stream schedule) from the preset plus any ``key=value`` overrides, then:

1. times the collector alone, the learner alone, and both as the runner overlaps them (``training.overlap``),
   each over ``--iterations`` iterations after one untimed iteration, so the slowdown each part suffers from
   sharing the GPU is a ratio measured in one process;
2. profiles one collector iteration and one learner iteration (CUDA graph replays; the profiler sees the
   kernels inside them; on a machine without CUDA it lists CPU ops instead, as a smoke test) and reports GPU time per kernel family: physics (Warp), compiled (Triton), matrix
   products, other torch kernels, copies and fills; and the kernels that take the most time (``--top``, 25 by
   default, 0 for every kernel);
3. finds where the device sat idle in those two profiles: the idle time between consecutive kernels summed by
   the families on either side, and the largest single gaps (``--trace-dir`` also writes both timelines, for
   Perfetto or chrome://tracing). The profiler does not see the kernels of a conditional node's body after
   its first pass, so the gaps after a conditional node are reported apart (``conditional_body_ms``): in the
   collector they are the constraint solver's later iterations, not idle time;
4. last, times the bare physics step from the collector's own states (a graph of K control steps, no env
   work around it), so ``collector_vs_physics`` compares the two on the same machine, in one process.

It attributes time; the acceptance number stays ``tail_env_steps_per_sec`` of a training run.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import sys
from typing import Any

import torch

import simcore
from trainrt.config.resolve import resolve_train_config
from trainrt.runner.build import build_agent, build_env, build_replay
from trainrt.runner.collector import Collector
from trainrt.runner.iteration_clock import IterationClock
from trainrt.runner.schedule import IterationSchedule

_GEMM_MARKERS = ("gemm", "nvjet", "xmma", "cutlass", "wgmma", "cublas")


CONDITIONAL_FAMILY = "conditional node"
"""The kernel that sets a CUDA graph conditional node's handle (Warp's ``capture_while``/``capture_if``)."""


def kernel_family(name: str) -> str:
    """The family of a GPU kernel, from its name."""
    lowered = name.lower()
    if lowered.startswith("set_conditional"):
        return CONDITIONAL_FAMILY
    if lowered.startswith("triton"):
        return "compiled (triton)"
    if any(marker in lowered for marker in _GEMM_MARKERS):
        return "matrix products"
    if "memcpy" in lowered or "memset" in lowered:
        return "copies and fills"
    if "_cuda_kernel_" in lowered or lowered.endswith("_kernel_forward"):
        return "physics and env (warp)"
    return "other torch kernels"


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def idle_gaps(kernels: list[tuple[float, float, str]], top: int = 12) -> dict[str, Any]:
    """Where the device sat idle between kernels: ``kernels`` are (start_us, end_us, name) of one stream's
    work. Returns the idle total, the idle time summed by (family before -> family after), and the largest
    single gaps with the kernels on either side.

    The profiler does not trace the kernels a conditional node's body runs after its first pass (the
    constraint solver's repeated iterations in MuJoCo Warp's ``capture_while``), so a gap that follows a
    conditional node's handle kernel is mostly that body at work, not idle time: ``conditional_body_ms``
    sums those gaps and ``idle_outside_conditional_ms`` is the rest."""
    ordered = sorted(kernels)
    by_transition: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    gaps: list[tuple[float, str, str]] = []
    frontier = ordered[0][1] if ordered else 0.0
    previous = ordered[0][2] if ordered else ""
    for start, end, name in ordered[1:]:
        gap = start - frontier
        if gap > 0:
            entry = by_transition[f"{kernel_family(previous)} -> {kernel_family(name)}"]
            entry[0] += gap
            entry[1] += 1
            gaps.append((gap, previous, name))
        if end > frontier:
            frontier, previous = end, name
    gaps.sort(key=lambda g: -g[0])
    conditional = sum(g[0] for g in gaps if kernel_family(g[1]) == CONDITIONAL_FAMILY)
    idle = sum(g[0] for g in gaps)
    return {
        "idle_ms": idle / 1e3,
        "conditional_body_ms": conditional / 1e3,
        "idle_outside_conditional_ms": (idle - conditional) / 1e3,
        "span_ms": (frontier - ordered[0][0]) / 1e3 if ordered else 0.0,
        "idle_by_transition": {
            k: {"ms": v[0] / 1e3, "gaps": v[1]}
            for k, v in sorted(by_transition.items(), key=lambda kv: -kv[1][0])[:top]
        },
        "largest_gaps": [
            {"us": gap, "after": before[:90], "before": after[:90]} for gap, before, after in gaps[:top]
        ],
    }


def profile_kernels(fn: Any, trace: str | None = None, top: int = 25) -> dict[str, Any]:
    """GPU time per kernel family, the ``top`` kernels by time (0: every kernel) and the idle gaps of one call
    of ``fn``; with ``trace``, the profiler's timeline is also written there (chrome://tracing or Perfetto)."""
    from torch.profiler import ProfilerActivity, profile

    on_gpu = torch.cuda.is_available()
    wanted = torch.autograd.DeviceType.CUDA if on_gpu else torch.autograd.DeviceType.CPU
    _sync()
    with profile(activities=[ProfilerActivity.CUDA if on_gpu else ProfilerActivity.CPU]) as prof:
        fn()
        _sync()
    if trace:
        prof.export_chrome_trace(trace)
    per_kernel: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0])
    spans: list[tuple[float, float, str]] = []
    for event in prof.events():
        if event.device_type != wanted:
            continue
        spans.append((event.time_range.start, event.time_range.end, event.name))
        entry = per_kernel[event.name]
        entry[0] += event.time_range.elapsed_us()
        entry[1] += 1
    families: dict[str, dict[str, float]] = collections.defaultdict(lambda: {"us": 0.0, "kernels": 0})
    for name, (us, count) in per_kernel.items():
        family = families[kernel_family(name)]
        family["us"] += us
        family["kernels"] += count
    total = sum(f["us"] for f in families.values())
    ranked = sorted(per_kernel.items(), key=lambda item: -item[1][0])
    ranked = ranked[:top] if top > 0 else ranked
    return {
        "gpu_busy_ms": total / 1e3,
        "kernel_launches": sum(f["kernels"] for f in families.values()),
        "families": {
            k: {**v, "ms": v["us"] / 1e3, "share": v["us"] / total if total else 0.0}
            for k, v in families.items()
        },
        "top_kernels": [
            {"name": name[:120], "ms": us / 1e3, "calls": count, "family": kernel_family(name)}
            for name, (us, count) in ranked
        ],
        **idle_gaps(spans),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", default="sac")
    parser.add_argument("--task", default="g1_walk_flat")
    parser.add_argument("--sim", default="mjwarp")
    parser.add_argument("--iterations", type=int, default=5)
    parser.add_argument(
        "--top", type=int, default=25, help="kernels listed per profile, by GPU time (0: all)"
    )
    parser.add_argument("--out", default=None)
    parser.add_argument(
        "--trace-dir",
        default=None,
        help="also write the two profiled timelines here (collector.json, learner.json)",
    )
    parser.add_argument("overrides", nargs="*", help="key=value overrides, as for trainrt train")
    args = parser.parse_args(argv)
    cfg, _ = resolve_train_config(args.algo, args.task, args.sim, list(args.overrides), "auto")
    params = cfg.algo.params
    env = build_env(cfg)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    replay = build_replay(cfg, env)
    collector = Collector(
        env,
        agent,
        replay,
        env.reset(),
        steps_per_replay=cfg.training.collector_steps_per_replay,
        use_graph=True,
        compile_math=cfg.training.compile_collector,
    )
    collector.prefill(params.learning_starts)
    collector.capture()
    replay.freeze_view()
    updates, steps = params.updates_per_iteration, cfg.algo.steps_per_iteration
    agent.capture_update(
        lambda g: replay.sample(params.batch_size, g, from_view=True),
        updates_per_replay=updates,
        compile=cfg.training.compile_learner,
    )
    agent.replay_updates(updates)
    collector.collect(steps)

    def collect() -> None:
        collector.collect(steps)

    def learn() -> None:
        agent.replay_updates(updates, publish=False)

    clock = IterationClock(env.device)
    overlapped = IterationSchedule(
        collector, agent, replay, steps_per_iteration=steps, updates_per_iteration=updates, overlap=True
    )

    def both() -> None:
        clock.start()
        overlapped.run(clock)

    both()
    n = args.iterations
    collect_s, learn_s, both_s = (
        simcore.wall_seconds(fn, n, env.device) / n for fn in (collect, learn, both)
    )
    result: dict[str, Any] = {
        "diagnostic": True,
        "algo": args.algo,
        "task": args.task,
        "num_envs": cfg.algo.num_envs,
        "steps_per_iteration": steps,
        "updates_per_iteration": updates,
        "batch_size": params.batch_size,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "collect_alone_ms": 1e3 * collect_s,
        "learn_alone_ms": 1e3 * learn_s,
        "overlapped_ms": 1e3 * both_s,
        "sequential_sum_ms": 1e3 * (collect_s + learn_s),
        "overlap_gain": (collect_s + learn_s) / both_s,
        "overlap_vs_ideal": max(collect_s, learn_s) / both_s,
        "env_steps_per_sec_overlapped": cfg.algo.num_envs * steps / both_s,
        "learner_ms_per_update": 1e3 * learn_s / updates,
        "collector_ms_per_step": 1e3 * collect_s / steps,
        "schedule": overlapped.diagnostics(),
        "collector_profile": profile_kernels(collect, _trace(args.trace_dir, "collector"), args.top),
        # the constraint solver's iterations in the collector's latest substep (its conditional loop runs
        # as long as the slowest world needs)
        "collector_solver_iterations": env.backend.diagnostics().solver_iterations,
        "learner_profile": profile_kernels(learn, _trace(args.trace_dir, "learner"), args.top),
    }
    # Last, because it advances the physics without the env around it (no resets, no commands): the bare
    # physics step from the collector's own states, replayed as a graph of K control steps.
    k = cfg.training.collector_steps_per_replay
    physics = simcore.CapturedWork(env.backend.step, backend=env.backend, name="physics", steps_per_replay=k)
    physics.capture()
    physics.replay()
    physics_s = simcore.wall_seconds(physics.replay, n * steps // k, env.device) / n
    result["physics_alone_ms"] = 1e3 * physics_s
    result["physics_solver_iterations"] = env.backend.diagnostics().solver_iterations
    result["collector_vs_physics"] = collect_s / physics_s
    for part in ("collector_profile", "learner_profile"):
        prof = result[part]
        print(f"[{part}] GPU busy {prof['gpu_busy_ms']:.2f} ms over {prof['kernel_launches']} kernels")
        for family, f in sorted(prof["families"].items(), key=lambda kv: -kv[1]["ms"]):
            print(f"  {family:>24}: {f['ms']:8.2f} ms  {100 * f['share']:5.1f}%  {int(f['kernels'])} kernels")
        for k in prof["top_kernels"][:12]:
            print(f"    {k['ms']:7.2f} ms x{k['calls']:<5} {k['name'][:90]}")
    for part in ("collector_profile", "learner_profile"):
        prof = result[part]
        print(
            f"[{part}] idle {prof['idle_ms']:.2f} ms of a {prof['span_ms']:.2f} ms span, of which "
            f"{prof['conditional_body_ms']:.2f} ms follow a conditional node (its untraced body); by transition:"
        )
        for transition, t in prof["idle_by_transition"].items():
            print(f"    {t['ms']:7.2f} ms over {t['gaps']:5d} gaps  {transition}")
    keys = ("collect_alone_ms", "learn_alone_ms", "overlapped_ms", "overlap_gain", "overlap_vs_ideal")
    for key in (*keys, "physics_alone_ms", "collector_vs_physics"):
        print(f"{key}: {result[key]:.3f}")
    for key in ("collector_solver_iterations", "physics_solver_iterations"):
        print(f"{key}: mean {result[key]['mean']:.2f}, max {result[key]['max']:.0f}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


def _trace(directory: str | None, name: str) -> str | None:
    if directory is None:
        return None
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, f"{name}.json")


if __name__ == "__main__":
    sys.exit(main())
