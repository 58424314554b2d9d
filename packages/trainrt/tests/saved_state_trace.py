"""Compare the env step of two versions of the code from one saved state, bit for bit (a tool, not a test).

For each task (CPU MuJoCo, 3 envs, seed 5): reset, three steps, then the saved state (every tensor the env
reaches and its generator); from it, 30 steps with forced time-outs every 7 steps and a full ``reset()``
halfway. ``save`` records the saved state, every step's result and the final state with the code on
``PYTHONPATH``; ``check`` restores the saved state into an env built by the code on ``PYTHONPATH``, repeats
the steps and compares everything exactly (names of the state tensors included). For example::

    git worktree add /tmp/before <commit>
    PYTHONPATH=/tmp/before/packages/trainrt/src:/tmp/before/packages/simcore/src \\
        python packages/trainrt/tests/saved_state_trace.py save /tmp/trace.pt
    PYTHONPATH=packages/trainrt/src:packages/simcore/src \\
        python packages/trainrt/tests/saved_state_trace.py check /tmp/trace.pt

The trace file holds only tensors, strings and numbers and is read with ``weights_only=True``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from state_snapshot import _walk_named

from trainrt.envs import ManagerBasedRlEnv
from trainrt.tasks import make_task_cfg

TASKS = ("g1_walk_flat", "t1_walk_flat", "g1_motion_tracking", "g1_walk_rough")
NUM_ENVS, WARMUP, STEPS, SEED = 3, 3, 30, 5


def _clone(value: Any) -> Any:
    return {k: _clone(v) for k, v in value.items()} if isinstance(value, dict) else value.clone()


def _state(env: ManagerBasedRlEnv) -> tuple[dict[str, torch.Tensor], list[torch.Generator]]:
    tensors, generators, names = _walk_named([env])
    return {names[id(t)]: t for t in tensors}, generators


def run(task: str, saved: Any = None) -> tuple[Any, list[Any], Any, int]:
    """The saved state, the trace of the steps from it, the final state, the finished episodes."""
    env = ManagerBasedRlEnv(make_task_cfg(task), sim="mujoco", num_envs=NUM_ENVS, device="cpu", seed=SEED)
    env.reset()
    gen = torch.Generator().manual_seed(3)
    actions = [torch.rand(NUM_ENVS, env.num_actions, generator=gen) * 2 - 1 for _ in range(WARMUP + STEPS)]
    for action in actions[:WARMUP]:
        env.step(action)
    tensors, generators = _state(env)
    if saved is None:
        saved = ({k: v.clone() for k, v in tensors.items()}, [g.get_state() for g in generators])
    else:
        differ = sorted(set(saved[0]) ^ set(tensors))
        assert not differ, f"{task}: the state tensors' names differ: {differ}"
        for name, value in saved[0].items():
            tensors[name].copy_(value)
        for generator, value in zip(generators, saved[1], strict=True):
            generator.set_state(value)
    trace: list[Any] = []
    force = torch.tensor([True, False, True])
    for i, action in enumerate(actions[WARMUP:]):
        if i % 7 == 3:
            env.episode_length_buf[force] = env.max_episode_length  # time-outs: resets inside the step
        if i == STEPS // 2:
            trace.append(("reset", _clone(env.reset())))
        r = env.step(action)
        trace.append((i, r.reward.clone(), r.terminated.clone(), r.truncated.clone(), _clone(r.obs)))
        trace.append(_clone(r.final_obs))
    tensors, generators = _state(env)
    final = ({k: v.clone() for k, v in tensors.items()}, [g.get_state() for g in generators])
    return saved, trace, final, int(env._finished_episodes)


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Paths where ``a`` and ``b`` differ (tensors exactly, NaN equal to NaN)."""
    if isinstance(a, torch.Tensor):
        same = a.dtype == b.dtype and a.shape == b.shape and torch.equal(a.isnan(), b.isnan())
        return [] if same and torch.equal(a.nan_to_num(), b.nan_to_num()) else [path]
    if isinstance(a, dict):
        if set(a) != set(b):
            return [f"{path}: keys {sorted(set(a) ^ set(b))}"]
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list | tuple):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def main(mode: str, trace_file: str) -> int:
    torch.set_num_threads(1)
    if mode == "save":
        torch.save({task: run(task) for task in TASKS}, trace_file)
        return 0
    reference = torch.load(trace_file, weights_only=True)
    failed = False
    for task in TASKS:
        saved, trace, final, finished = reference[task]
        _, trace_now, final_now, finished_now = run(task, saved)
        problems = differences((trace, final, finished), (trace_now, final_now, finished_now))
        print(
            f"{task}: {finished} episodes ended, {len(final[0])} state tensors and the generator: "
            f"{'bit for bit equal' if not problems else 'DIFFER ' + ', '.join(problems[:10])}"
        )
        failed |= bool(problems)
    return int(failed)


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
