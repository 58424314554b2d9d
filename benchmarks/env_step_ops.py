"""DIAGNOSTIC: count the work one env step dispatches (torch ops and Warp kernel launches), per task.

    uv run --frozen python benchmarks/env_step_ops.py [--task g1_walk_flat] [--sim mjwarp] [--num-envs 4]

Inside a CUDA graph every kernel node costs a few microseconds however small it is, so at training sizes the
number of kernels an env step launches matters as much as their arithmetic. This tool runs a few env steps
on the CPU and counts, per step:

- torch ops dispatched (``TorchDispatchMode``: every aten op, including views and in-place writes; views
  launch no kernel, so ``torch_kernel_ops`` leaves out pure view/metadata ops);
- Warp launches (``wp.launch`` / ``wp.launch_tiled`` calls, plus the Warp array copies and fills that become
  memcpy/memset nodes);
- the same counts for the parts of a step: the physics call, the reset transaction and each manager;
- with ``--terms``, each reward, termination, metric, event and command term on its own (a term that first
  reads a quantity shared through the env's state cache is charged for computing it);
- with ``--collector``, the whole collector step of the canonical workloads (SAC / g1_walk_flat, FlashSAC /
  g1_motion_tracking presets): policy act, env step, replay write and the collector's bookkeeping.

The counts do not depend on the device, only on the code path, so a CPU run predicts the node count of the
GPU graph (Warp's CPU device runs the same launches). Use ``--steps`` to average over more steps (the reset
path runs every step; which rows it selects does not change the count).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_VIEW_OPS = {
    "view",
    "_unsafe_view",
    "reshape",
    "expand",
    "unsqueeze",
    "squeeze",
    "select",
    "slice",
    "t",
    "transpose",
    "permute",
    "as_strided",
    "alias",
    "detach",
    "lift_fresh",
    "unbind",
    "split",
    "split_with_sizes",
    "chunk",
    "narrow",
    "diagonal",
    "view_as_real",
    "view_as_complex",
    "_reshape_alias",
    "empty",
    "empty_like",
    "empty_strided",
    "new_empty",
    "new_empty_strided",
    "sym_size",
    "sym_stride",
    "is_same_size",
    "_to_copy_noop",
}


class OpCounter(TorchDispatchMode):
    """Counts aten ops by name while active (``ops``: Counter of ``aten.<name>``)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: collections.Counter[str] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[func.overloadpacket.__name__] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        """Every dispatched op."""
        return sum(self.ops.values())

    @property
    def kernel_ops(self) -> int:
        """Ops that launch work on a device (views, shape queries and empty allocations excluded)."""
        return sum(v for k, v in self.ops.items() if k not in _VIEW_OPS)


class WarpLaunchCounter:
    """Counts Warp kernel launches and array copies/fills while installed (patches the ``warp`` module)."""

    def __init__(self) -> None:
        self.launches: collections.Counter[str] = collections.Counter()

    @contextlib.contextmanager
    def installed(self) -> Iterator[WarpLaunchCounter]:
        try:
            import warp as wp
        except ImportError:
            yield self
            return
        originals: dict[str, Callable] = {}

        def wrap(name: str, original: Callable) -> Callable:
            def counted(*args: Any, **kwargs: Any) -> Any:
                if name.startswith("launch"):
                    kernel = args[0] if args else kwargs.get("kernel")
                    label = getattr(kernel, "key", None) or getattr(kernel, "__name__", "kernel")
                else:
                    label = name
                self.launches[label] += 1
                return original(*args, **kwargs)

            return counted

        for name in ("launch", "launch_tiled", "copy"):
            if hasattr(wp, name):
                originals[name] = getattr(wp, name)
                setattr(wp, name, wrap(name, originals[name]))
        try:
            yield self
        finally:
            for name, original in originals.items():
                setattr(wp, name, original)

    @property
    def total(self) -> int:
        """Launches plus copies."""
        return sum(self.launches.values())


@contextlib.contextmanager
def _counting_calls(
    obj: Any,
    attr: str,
    sink: dict[str, list[int]],
    label: str,
    torch_counter: OpCounter,
    warp_counter: WarpLaunchCounter,
) -> Iterator[None]:
    """Attribute the ops of ``obj.attr(...)`` calls to ``label`` (torch kernel ops, Warp launches)."""
    original = getattr(obj, attr)
    setattr(obj, attr, _counted(original, label, sink, torch_counter, warp_counter))
    try:
        yield
    finally:
        setattr(obj, attr, original)


def _counted(
    fn: Callable,
    label: str,
    sink: dict[str, list[int]],
    torch_counter: OpCounter,
    warp_counter: WarpLaunchCounter,
) -> Callable:
    """``fn`` wrapped to add the torch kernel ops and Warp launches of each call to ``sink[label]``.

    A counted call inside another counted call of the same sink (a command term's update calling its own
    counted resample, say) belongs to the outer one and is not counted again."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if id(sink) in _OPEN_SINKS:
            return fn(*args, **kwargs)
        _OPEN_SINKS.add(id(sink))
        t0, w0 = torch_counter.kernel_ops, warp_counter.total
        try:
            return fn(*args, **kwargs)
        finally:
            _OPEN_SINKS.discard(id(sink))
            entry = sink.setdefault(label, [0, 0])
            entry[0] += torch_counter.kernel_ops - t0
            entry[1] += warp_counter.total - w0

    return wrapped


_OPEN_SINKS: set[int] = set()
"""Sinks with a counted call in progress (`_counted`)."""


def _term_targets(env: Any) -> Iterator[tuple[list, int, int, str]]:
    """``(entries, row, column, label)`` of every term callable in the managers' term lists.

    ``entries[row][column]`` is the callable; the label names the manager and the term.
    """
    from trainrt.managers import EventTerm

    managers = (
        ("reward", env.reward_manager, "_evaluated", 0, 1),
        ("termination", env.termination_manager, "_terms", 0, 1),
        ("metric", env.metrics_manager, "_terms", 0, 1),
    )
    for kind, manager, attr, name_col, fn_col in managers:
        entries = getattr(manager, attr, None)
        names = getattr(manager, "_term_names", [])
        for row, entry in enumerate(entries or []):
            index = entry[name_col]
            yield entries, row, fn_col, f"{kind}: {names[index] if index < len(names) else index}"
    for mode in ("reset", "interval"):
        entries = getattr(env.event_manager, "_by_mode", {}).get(mode, [])
        for row, entry in enumerate(entries):
            if not isinstance(entry[1], EventTerm):  # split terms are counted through their methods
                yield entries, row, 1, f"event ({mode}): {entry[0]}"


def _method_targets(env: Any) -> Iterator[tuple[Any, str, str]]:
    """``(term, method, label)`` of the term methods counted in place of a call: an `EventTerm`'s draw and
    apply, and a command term's draws and math of its reset and compute."""
    from trainrt.managers import EventTerm

    for mode in ("reset", "interval"):
        for name, fn, _ in getattr(env.event_manager, "_by_mode", {}).get(mode, []):
            if isinstance(fn, EventTerm):
                for attr in ("draw_", "apply"):
                    yield fn, attr, f"event ({mode}): {name}"
    for name, term in getattr(env.command_manager, "_terms", {}).items():
        for attr in ("compute", "reset"):
            for method in (f"draw_{attr}_", f"apply_{attr}"):
                yield term, method, f"command ({attr}): {name}"


@contextlib.contextmanager
def _counting_terms(
    env: Any, sink: dict[str, list[int]], torch_counter: OpCounter, warp_counter: WarpLaunchCounter
) -> Iterator[None]:
    """Attribute the ops of every term call (and of the term methods of `_method_targets`) to the term."""
    restore: list[tuple[list, int, tuple]] = []
    for entries, row, column, label in _term_targets(env):
        entry = entries[row]
        restore.append((entries, row, entry))
        entries[row] = (
            *entry[:column],
            _counted(entry[column], label, sink, torch_counter, warp_counter),
            *entry[column + 1 :],
        )
    with contextlib.ExitStack() as stack:
        for term, attr, label in _method_targets(env):
            stack.enter_context(_counting_calls(term, attr, sink, label, torch_counter, warp_counter))
        try:
            yield
        finally:
            for entries, row, entry in restore:
                entries[row] = entry


def _counts(bench, what, task, sim, num_envs, steps, torch_counter, warp_counter, per_step) -> dict:
    """The result record of one op count: totals per step, per part, and the most frequent ops."""
    return {
        "bench": bench,
        "label": f"DIAGNOSTIC (op counts per {what} on the CPU; predicts CUDA graph node counts)",
        "task": task,
        "sim": sim,
        "num_envs": num_envs,
        "steps": steps,
        "torch_ops_per_step": torch_counter.total / steps,
        "torch_kernel_ops_per_step": torch_counter.kernel_ops / steps,
        "warp_launches_per_step": warp_counter.total / steps,
        "parts": per_step,
        "top_torch_ops": dict(torch_counter.ops.most_common(15)),
        "top_warp_kernels": dict(warp_counter.launches.most_common(15)),
    }


def count_env_step(
    task: str, sim: str, num_envs: int, steps: int, seed: int = 0, per_term: bool = False
) -> dict[str, Any]:
    """Per-step op counts of ``ManagerBasedRlEnv.step`` for ``task`` (random actions, CPU).

    With ``per_term``, the result also carries ``terms``: the counts of each term (``_term_targets``).
    """
    from trainrt.envs import ManagerBasedRlEnv
    from trainrt.tasks import make_task_cfg

    env = ManagerBasedRlEnv(make_task_cfg(task), sim=sim, num_envs=num_envs, device="cpu", seed=seed)
    env.reset()
    gen = torch.Generator().manual_seed(seed)
    actions = [torch.rand(num_envs, env.num_actions, generator=gen) * 0.4 - 0.2 for _ in range(steps + 2)]
    for action in actions[:2]:  # warm up: first calls may build caches
        env.step(action)

    torch_counter = OpCounter()
    warp_counter = WarpLaunchCounter()
    parts: dict[str, list[int]] = {}
    terms: dict[str, list[int]] = {}
    targets = [
        (env.backend, "step", "physics (backend.step)"),
        (env.backend, "reset", "reset transaction (backend.reset)"),
        (env.action_manager, "process_action", "action manager"),
        (env.action_manager, "apply_action", "action manager"),
        (env.termination_manager, "compute", "termination manager"),
        (env.reward_manager, "compute", "reward manager"),
        (env.metrics_manager, "compute", "metrics manager"),
        (env.observation_manager, "compute", "observation manager"),
        # the step's draws first, then the math
        (env.command_manager, "draw_compute_", "command manager (update)"),
        (env.command_manager, "apply_compute", "command manager (update)"),
        (env.command_manager, "draw_reset_", "command manager (reset)"),
        (env.command_manager, "apply_reset", "command manager (reset)"),
        (env.event_manager, "draw_reset_", "event manager (reset)"),
        (env.event_manager, "apply_reset", "event manager (reset)"),
        (env.event_manager, "draw_interval_", "event manager (interval)"),
        (env.event_manager, "apply_interval", "event manager (interval)"),
        (env.curriculum_manager, "compute", "curriculum manager"),
    ]
    with contextlib.ExitStack() as stack:
        for obj, attr, label in targets:
            stack.enter_context(_counting_calls(obj, attr, parts, label, torch_counter, warp_counter))
        if per_term:
            stack.enter_context(_counting_terms(env, terms, torch_counter, warp_counter))
        stack.enter_context(warp_counter.installed())
        with torch_counter:
            for action in actions[2:]:
                env.step(action)
    per_step = {
        label: {"torch_kernel_ops": t / steps, "warp_launches": w / steps} for label, (t, w) in parts.items()
    }
    accounted_torch = sum(v[0] for v in parts.values())
    accounted_warp = sum(v[1] for v in parts.values())
    per_step["env step (rest)"] = {
        "torch_kernel_ops": (torch_counter.kernel_ops - accounted_torch) / steps,
        "warp_launches": (warp_counter.total - accounted_warp) / steps,
    }
    result = _counts(
        "env_step_ops", "env step", task, sim, num_envs, steps, torch_counter, warp_counter, per_step
    )
    if per_term:
        result["terms"] = {
            label: {"torch_kernel_ops": t / steps, "warp_launches": w / steps}
            for label, (t, w) in terms.items()
        }
    return result


def count_collector_step(algo: str, task: str, sim: str, num_envs: int, steps: int) -> dict[str, Any]:
    """Per-step op counts of the whole collector step (policy act + env step + replay write), as trained."""
    from trainrt.config import apply_overrides, preset
    from trainrt.runner.build import build_agent, build_env, build_replay
    from trainrt.runner.collector import Collector

    cfg = apply_overrides(
        preset(algo, task), [f"sim.backend={sim}", "sim.device=cpu", f"algo.num_envs={num_envs}"]
    )
    env = build_env(cfg)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    replay = build_replay(cfg, env)
    collector = Collector(env, agent, replay, env.reset(), use_graph=False)
    for _ in range(2):
        collector.step()
    torch_counter, warp_counter = OpCounter(), WarpLaunchCounter()
    parts: dict[str, list[int]] = {}
    with contextlib.ExitStack() as stack:
        for obj, attr, label in (
            (agent, "act", "policy act"),
            (env, "step", "env step"),
            (replay, "add", "replay write"),
        ):
            stack.enter_context(_counting_calls(obj, attr, parts, label, torch_counter, warp_counter))
        stack.enter_context(warp_counter.installed())
        with torch_counter:
            for _ in range(steps):
                collector.step()
    per_step = {
        label: {"torch_kernel_ops": t / steps, "warp_launches": w / steps} for label, (t, w) in parts.items()
    }
    per_step["collector bookkeeping"] = {
        "torch_kernel_ops": (torch_counter.kernel_ops - sum(v[0] for v in parts.values())) / steps,
        "warp_launches": (warp_counter.total - sum(v[1] for v in parts.values())) / steps,
    }
    return _counts(
        "collector_step_ops",
        "collector step",
        f"{algo}/{task}",
        sim,
        num_envs,
        steps,
        torch_counter,
        warp_counter,
        per_step,
    )


def _format(result: dict[str, Any]) -> str:
    lines = [
        f"[diagnostic] {result['bench']}: {result['task']} on {result['sim']} ({result['num_envs']} envs, "
        f"{result['steps']} steps)",
        f"  torch ops / step:        {result['torch_ops_per_step']:8.1f}",
        f"  torch kernel ops / step: {result['torch_kernel_ops_per_step']:8.1f}",
        f"  warp launches / step:    {result['warp_launches_per_step']:8.1f}",
        "  per part (torch kernel ops, warp launches):",
    ]
    for label, counts in result["parts"].items():
        lines.append(f"    {label:<36} {counts['torch_kernel_ops']:8.1f} {counts['warp_launches']:8.1f}")
    if "terms" in result:
        lines.append("  per term (torch kernel ops; included in the parts above):")
        for label, counts in result["terms"].items():
            lines.append(f"    {label:<52} {counts['torch_kernel_ops']:8.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", action="append", choices=("g1_walk_flat", "g1_motion_tracking"))
    parser.add_argument("--sim", default="mjwarp", choices=("mujoco", "mjwarp"))
    parser.add_argument("--num-envs", type=int, default=4)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument(
        "--collector",
        action="store_true",
        help="also count the whole collector step of the canonical presets (SAC walk, FlashSAC tracking)",
    )
    parser.add_argument("--terms", action="store_true", help="also count each manager term on its own")
    parser.add_argument("--json", help="also write the results to this file")
    args = parser.parse_args(argv)
    if args.num_envs < 1 or args.steps < 1:
        parser.error("--num-envs and --steps must be >= 1")
    torch.set_num_threads(1)
    results = []
    for task in args.task or ["g1_walk_flat", "g1_motion_tracking"]:
        result = count_env_step(task, args.sim, args.num_envs, args.steps, per_term=args.terms)
        print(_format(result), flush=True)
        results.append(result)
        if args.collector:
            algo = {"g1_walk_flat": "sac", "g1_motion_tracking": "flashsac"}[task]
            result = count_collector_step(algo, task, args.sim, args.num_envs, args.steps)
            print(_format(result), flush=True)
            results.append(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
