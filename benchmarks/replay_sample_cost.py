"""DIAGNOSTIC: what the replay sample costs the learner, alone, at a preset's sizes.

    python benchmarks/replay_sample_cost.py --algo sac --task g1_walk_flat [--iterations 50] [--out result.json]

The learner draws one batch per update from the replay's frozen view (``DeviceReplayBuffer.sample``), inside
the graph that replays all the updates of an iteration. This fills a replay of the preset's sizes (envs, steps
per env, observation groups, n-step window) with random rows, a few of them terminated, truncated or invalid,
captures ``updates_per_iteration`` samples in one CUDA graph, and reports the ms per sample and the GPU kernels
per sample (from one profiled replay). Without CUDA it times eager samples and counts no kernels. Compare the
ms with the update's own (``trainrt bench learner``): the sample's share bounds what any change to it can save.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import torch

import simcore
from trainrt.config.resolve import resolve_train_config
from trainrt.replay import DeviceReplayBuffer
from trainrt.runner.build import build_env


def fill_randomly(replay: DeviceReplayBuffer, rows: int, generator: torch.Generator) -> None:
    """``rows`` adds of random transitions; about 0.1% each terminated, truncated and invalid."""
    n, device = replay.num_envs, replay.device

    def rand(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=generator, device=device)

    def flags(p: float) -> torch.Tensor:
        return torch.rand(n, generator=generator, device=device) < p

    for _ in range(rows):
        replay.add(
            {g: rand(n, d) for g, d in replay.obs_dims.items()},
            rand(n, replay.num_actions).tanh(),
            rand(n),
            {g: rand(n, d) for g, d in replay.obs_dims.items()},
            flags(1e-3),
            flags(1e-3),
            ~flags(1e-3),
        )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", default="sac")
    parser.add_argument("--task", default="g1_walk_flat")
    parser.add_argument("--iterations", type=int, default=50, help="graph replays timed per round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rows", type=int, default=None, help="rows to fill (default: the whole ring)")
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. algo.num_envs=512")
    args = parser.parse_args(argv)
    cfg, _ = resolve_train_config(args.algo, args.task, "mujoco", list(args.overrides), "canonical")
    params = cfg.algo.params
    probe = build_env(cfg, num_envs=1)  # the observation group sizes and action count, on the CPU
    obs_dims, num_actions = dict(probe.obs_dims), probe.num_actions
    probe.close()
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    replay = DeviceReplayBuffer(
        num_envs=cfg.algo.num_envs,
        capacity_per_env=params.buffer_size_per_env,
        obs_dims=obs_dims,
        num_actions=num_actions,
        device=device,
        n_step=params.n_step,
        gamma=params.gamma,
    )
    generator = torch.Generator(device=device).manual_seed(0)
    fill_randomly(replay, args.rows or params.buffer_size_per_env, generator)
    replay.freeze_view()
    samples = params.updates_per_iteration

    def draw() -> None:
        for _ in range(samples):
            replay.sample(params.batch_size, generator, from_view=True)

    run: Any = draw
    kernels_per_sample = None
    if device.type == "cuda":
        graph = torch.cuda.CUDAGraph()
        graph.register_generator_state(generator)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            draw()  # warm-up outside capture
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(graph):
            draw()
        run = graph.replay
        run()
        torch.cuda.synchronize()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profile:
            run()
            torch.cuda.synchronize()
        kernels = [e for e in profile.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        kernels_per_sample = len(kernels) / samples
    ms_per_sample = []
    for _ in range(args.rounds):
        seconds = simcore.wall_seconds(run, args.iterations, device)
        ms_per_sample.append(1e3 * seconds / (args.iterations * samples))
        print(f"{ms_per_sample[-1]:.4f} ms per sample", flush=True)
    result = {
        "algo": args.algo,
        "task": args.task,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "num_envs": cfg.algo.num_envs,
        "buffer_size_per_env": params.buffer_size_per_env,
        "batch_size": params.batch_size,
        "n_step": params.n_step,
        "obs_dims": obs_dims,
        "samples_per_graph": samples,
        "graph": device.type == "cuda",
        "ms_per_sample": ms_per_sample,
        "median_ms_per_sample": statistics.median(ms_per_sample),
        "kernels_per_sample": kernels_per_sample,
    }
    print(
        f"{args.algo} {args.task}: median {result['median_ms_per_sample']:.4f} ms per sample "
        f"(batch {params.batch_size}, {kernels_per_sample} kernels per sample)"
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
