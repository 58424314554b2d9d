"""Learning against wall-clock time: train for a time budget, then `trainrt eval` checkpoints along the way.

    python benchmarks/learning_curve.py --algo sac --task g1_walk_flat --minutes 5 [--checkpoint-every 250]
        [--evals 4] [--eval-envs 64] [--preset NAME] [--run-dir DIR] [--out curve.json] [key=value ...]

1. ``trainrt train`` with the preset plus the overrides, ``training.time_limit_sec`` = the budget (set-up
   and warm-up count), a checkpoint every ``--checkpoint-every`` iterations and none of the end-of-run
   extras (final eval, ONNX export);
2. ``trainrt eval`` (deterministic; walk: the fixed commands, tracking: the clip from its first frame) of up
   to ``--evals`` checkpoints spread over the run, the last always among them;
3. one row per evaluated checkpoint: iteration, wall-clock seconds since set-up began (the summary's
   ``elapsed_sec`` of that iteration), and the headline eval numbers (walk: worst fall
   fraction, mean and worst linear-velocity error, mean yaw-rate error over the commands; tracking:
   completion and the body, anchor and joint errors).

The table goes to the console (markdown) and, with ``--out``, to JSON with every eval result. The run's
``tail_env_steps_per_sec`` is reported too; it is the throughput of this same run.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

from trainrt.runner import load_run_summary
from trainrt.runner.checkpoint import checkpoints_newest_first
from trainrt.runner.evaluate import evaluate_run


def spread(items: list[int], count: int) -> list[int]:
    """Up to ``count`` of ``items`` (sorted), evenly spread, the last always included."""
    if count >= len(items):
        return list(items)
    if count == 1:
        return [items[-1]]
    picks = {items[round(i * (len(items) - 1) / (count - 1))] for i in range(count)}
    return sorted(picks)


def headline(task: str, result: dict[str, Any]) -> dict[str, float]:
    """The numbers of one eval result that go into the curve table."""
    if task == "g1_walk_flat":
        rows = list(result["commands"].values())
        lin = [r["lin_vel_error_xy"] for r in rows]
        return {
            "worst_fell": max(r["failed_fraction"] for r in rows),
            "mean_lin_vel_error": sum(lin) / len(lin),
            "worst_lin_vel_error": max(lin),
            "mean_yaw_rate_error": sum(r["ang_vel_error_z"] for r in rows) / len(rows),
        }
    row = result["tracking"]
    return {
        key: float(row[key])
        for key in (
            "completed_fraction",
            "failed_fraction",
            "body_pos_error",
            "anchor_pos_error",
            "joint_pos_error",
        )
    }


def wall_clock_at(summary: Any) -> dict[int, float]:
    """Seconds since set-up began at the end of each iteration (``elapsed_sec`` of the run's timings)."""
    return {t.iteration: t.elapsed_sec for t in summary.iterations if t.elapsed_sec is not None}


def markdown(rows: list[dict[str, Any]]) -> str:
    """The curve as a markdown table."""
    keys = list(rows[0])
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        cells = [f"{v:.4g}" if isinstance(v, float) else str(v) for v in row.values()]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", default="sac")
    parser.add_argument("--task", default="g1_walk_flat")
    parser.add_argument("--sim", default="mjwarp")
    parser.add_argument("--preset", default=None, help="as trainrt train --preset (default: its own)")
    parser.add_argument("--minutes", type=float, default=5.0)
    parser.add_argument("--checkpoint-every", type=int, default=250)
    parser.add_argument("--evals", type=int, default=4)
    parser.add_argument("--eval-envs", type=int, default=64)
    parser.add_argument("--run-dir", default=None)
    parser.add_argument("--out", default=None)
    parser.add_argument("overrides", nargs="*", help="key=value overrides, as for trainrt train")
    args = parser.parse_args(argv)
    if not (math.isfinite(args.minutes) and args.minutes > 0) or args.evals < 1 or args.checkpoint_every < 1:
        parser.error("--minutes must be positive, --evals and --checkpoint-every at least 1")
    run_dir = Path(args.run_dir or f"runs/curve_{args.algo}_{args.task}")
    command = [
        sys.executable, "-m", "trainrt", "train", f"--algo={args.algo}", f"--task={args.task}",
        f"--sim={args.sim}", *([f"--preset={args.preset}"] if args.preset else []),
        "algo.max_iterations=1000000", f"training.time_limit_sec={60 * args.minutes:g}",
        f"training.checkpoint_every={args.checkpoint_every}", "training.final_eval=false",
        "training.export_onnx=false", f"training.run_dir={run_dir}", *args.overrides,
    ]  # fmt: skip
    print("$", " ".join(command), flush=True)
    trained = subprocess.run(command)
    if trained.returncode != 0:
        print(f"training exited with {trained.returncode}; no curve", file=sys.stderr)
        return trained.returncode
    summary = load_run_summary(run_dir)
    at = wall_clock_at(summary)
    iterations = sorted(int(p.stem.split("_")[1]) for p in checkpoints_newest_first(run_dir))
    episode_length = summary.episode_statistics.get("Episode/length")
    rows, results = [], []
    for iteration in spread(iterations, args.evals):
        result = evaluate_run(run_dir, checkpoint=iteration, num_envs=args.eval_envs, log=lambda line: None)
        results.append(result)
        rows.append({"iteration": iteration, "wall_clock_s": at.get(iteration, math.nan),
                     **headline(summary.task, result)})  # fmt: skip
    table = markdown(rows)
    print(table)
    print(f"tail env steps/s {summary.tail_env_steps_per_sec:,.0f}; final training episode length "
          f"{episode_length}; time limit reached: {summary.time_limit_reached}")  # fmt: skip
    if args.out:
        out = {
            "algo": args.algo,
            "task": args.task,
            "minutes": args.minutes,
            "run_dir": str(run_dir),
            "commit": summary.commit,
            "tail_env_steps_per_sec": summary.tail_env_steps_per_sec,
            "completed_iterations": summary.completed_iterations,
            "time_limit_reached": summary.time_limit_reached,
            "warmup_time_sec": summary.warmup_time_sec,
            "rows": rows,
            "evals": results,
        }
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
