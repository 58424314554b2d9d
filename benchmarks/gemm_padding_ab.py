"""DIAGNOSTIC: the compiled learner with the twin critics' GEMMs padded vs unpadded, interleaved in one process.

    python benchmarks/gemm_padding_ab.py --algo sac --task g1_walk_flat [--rounds 2] [--out result.json]

Fills one replay buffer from the preset's own collector, then alternates ``networks.GEMM_ALIGNMENT`` between
8 (the default: inner and output widths zero-padded to a multiple of 8) and 1 (no padding), each round
building a fresh agent from the same seed, capturing all updates of an iteration as one compiled graph
and timing it as `trainrt bench learner` does (``fused`` mode). Reports ms per update for each setting and
their ratio. The acceptance number stays ``tail_env_steps_per_sec`` of a training run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

import torch

from trainrt.algos import networks
from trainrt.algos.bench import learner_benchmark
from trainrt.cli import resolve_train_config
from trainrt.runner.build import build_agent, build_env, build_replay
from trainrt.runner.collector import Collector

ALIGNMENTS = (8, 1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", default="sac")
    parser.add_argument("--task", default="g1_walk_flat")
    parser.add_argument("--sim", default="mjwarp")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--out", default=None)
    parser.add_argument("overrides", nargs="*", help="key=value overrides, as for trainrt train")
    args = parser.parse_args(argv)
    cfg, _ = resolve_train_config(args.algo, args.task, args.sim, list(args.overrides), "auto")
    params = cfg.algo.params
    env = build_env(cfg)
    replay = build_replay(cfg, env)
    filler = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    collector = Collector(env, filler, replay, env.reset(), steps_per_replay=1, use_graph=False)
    collector.prefill(max(params.learning_starts, 32))
    replay.freeze_view()

    def sample(g: torch.Generator) -> Any:
        return replay.sample(params.batch_size, g, from_view=True)

    runs: dict[int, list[float]] = {a: [] for a in ALIGNMENTS}
    for round_index in range(args.rounds):
        for alignment in ALIGNMENTS:
            networks.GEMM_ALIGNMENT = alignment
            agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
            timing = learner_benchmark(
                agent,
                sample,
                updates_per_iteration=params.updates_per_iteration,
                iterations=args.iterations,
                modes=("fused",),
            )
            ms = timing["fused_ms_per_update"]
            runs[alignment].append(ms)
            print(f"round {round_index} alignment {alignment}: {ms:.4f} ms per update", flush=True)
    networks.GEMM_ALIGNMENT = ALIGNMENTS[0]
    medians = {a: statistics.median(v) for a, v in runs.items()}
    result = {
        "diagnostic": True,
        "algo": args.algo,
        "task": args.task,
        "batch_size": params.batch_size,
        "updates_per_iteration": params.updates_per_iteration,
        "obs_dims": env.obs_dims,
        "num_actions": env.num_actions,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "ms_per_update": {str(a): v for a, v in runs.items()},
        "median_ms_per_update": {str(a): m for a, m in medians.items()},
        "padded_speedup": medians[1] / medians[8],
    }
    print(
        f"median ms per update: padded {medians[8]:.4f}, unpadded {medians[1]:.4f}, "
        f"speedup {result['padded_speedup']:.3f}x"
    )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
