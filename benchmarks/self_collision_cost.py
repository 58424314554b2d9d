"""DIAGNOSTIC: what the G1's limb self-collision pairs cost the physics step.

    python benchmarks/self_collision_cost.py [--num-envs 2048] [--steps 300] [--rounds 3] [--out result.json]

Both G1 tasks load the robot with ``G1_SELF_COLLISION_PAIRS`` enabled (legs against legs, forearms and hands
against the trunk) so the self-collision penalty has contacts to count. This steps the bare backend
(``trainrt bench physics``: decimation substeps, PD targets at the default pose) with the task's model and with
the same model without the pairs, alternating within each round, eager and as one graph replay per control
step, and reports the ratio. Standing at the default pose no pair touches, so this measures what the pairs add
to collision detection, not the cost of resolving limb contacts (which the penalty keeps rare).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from typing import Any

from trainrt.config.resolve import resolve_train_config
from trainrt.robots import G1
from trainrt.runner.bench import bench_physics

MODELS = {"with_pairs": G1.scene_model, "without_pairs": G1.model}
"""Variant -> the G1 model it steps: the tasks' model, and the same model with self-collision off."""


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="g1_walk_flat", help="whose scene (decimation, contact buffers)")
    parser.add_argument("--sim", default="mjwarp")
    parser.add_argument("--num-envs", type=int, default=2048)
    parser.add_argument("--steps", type=int, default=300, help="control steps timed per variant and mode")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=None, help="write the results as JSON here")
    args = parser.parse_args(argv)
    cfg, _ = resolve_train_config("sac", args.task, args.sim, [f"algo.num_envs={args.num_envs}"], "auto")
    models = {name: factory() for name, factory in MODELS.items()}
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in MODELS}
    for round_index in range(args.rounds):
        for name, model in models.items():
            result = bench_physics(cfg, args.steps, model=model)
            runs[name].append(result)
            print(
                f"round {round_index + 1} {name:>13}: eager {result['eager_ms_per_step']:.3f} ms, "
                f"graph {result['graph_ms_per_step']:.3f} ms per control step",
                flush=True,
            )
    medians = {
        name: {
            mode: statistics.median(r[f"{mode}_ms_per_step"] for r in results) for mode in ("eager", "graph")
        }
        for name, results in runs.items()
    }
    summary = {
        "task": args.task,
        "sim": args.sim,
        "num_envs": args.num_envs,
        "steps": args.steps,
        "rounds": args.rounds,
        "geom_pairs_enabled": {name: _enabled_robot_pairs(model) for name, model in models.items()},
        "median_ms_per_step": medians,
        "with_over_without": {
            mode: medians["with_pairs"][mode] / medians["without_pairs"][mode] for mode in ("eager", "graph")
        },
        "runs": runs,
    }
    for mode in ("eager", "graph"):
        print(
            f"{mode}: {medians['with_pairs'][mode]:.3f} ms with the pairs, {medians['without_pairs'][mode]:.3f} "
            f"without: {summary['with_over_without'][mode]:.3f}x"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(summary, f, indent=2)
    return summary


def _enabled_robot_pairs(model: Any) -> int:
    """Geom pairs of the robot (not the floor) whose contype/conaffinity bits let them collide."""
    robot = [g for g in range(model.ngeom) if model.geom_bodyid[g] != 0]
    count = 0
    for i, a in enumerate(robot):
        for b in robot[i + 1 :]:
            if model.geom_bodyid[a] == model.geom_bodyid[b]:
                continue
            if (model.geom_contype[a] & model.geom_conaffinity[b]) or (
                model.geom_contype[b] & model.geom_conaffinity[a]
            ):
                count += 1
    return count


if __name__ == "__main__":
    main(sys.argv[1:])
