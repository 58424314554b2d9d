"""Run the canonical workloads interleaved and tabulate their run summaries.

    python benchmarks/canonical_runs.py --repeats 3 --out results.json [--eager-iterations 20]

Each repeat runs SAC / g1_walk_flat and FlashSAC / g1_motion_tracking back to back (interleaved, so drift of
the machine hits both alike) at the canonical settings (docs/performance.md): 2048 envs, 160 iterations,
presets unchanged.
``--eager-iterations N`` adds one `training.cuda_graph=false` run per workload with N iterations (eager runs
are ~10x slower; their tail covers all N iterations). The number reported is each run's
``tail_env_steps_per_sec`` from its ``run_summary.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

WORKLOADS = (("sac", "g1_walk_flat"), ("flashsac", "g1_motion_tracking"))
CANONICAL = [
    "algo.num_envs=2048",
    "algo.max_iterations=160",
    "training.no_play=true",
    "training.export_onnx=false",
]


def run_one(algo: str, task: str, run_dir: Path, extra: list[str]) -> dict:
    """Train one run through the CLI; return the fields of its summary we tabulate."""
    cmd = [sys.executable, "-m", "trainrt", "train", "--algo", algo, "--task", task, "--sim", "mjwarp"]
    cmd += [*CANONICAL, f"training.run_dir={run_dir}", *extra]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    row = {
        "algo": algo,
        "task": task,
        "overrides": extra,
        "exit_code": proc.returncode,
        "process_wall_sec": wall,
    }
    summary_path = run_dir / "run_summary.json"
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text())
        for key in (
            "status",
            "error",
            "tail_env_steps_per_sec",
            "tail_iteration_count",
            "final_env_steps_per_sec",
            "completed_iterations",
            "total_env_steps",
            "training_wall_time_sec",
            "warmup_time_sec",
            "effective_steps_per_replay",
            "gpu_name",
            "versions",
            "commit",
        ):
            row[key] = summary.get(key)
        row["collector_graph_enabled"] = summary["collector_graph"].get("graph_enabled")
        row["collector_fallback"] = summary["collector_graph"].get("eager_fallback_reason")
        row["learner_graph_enabled"] = summary["learner_graph"].get("graph_enabled")
        iters = summary["iterations"][-summary["tail_iteration_count"] :]
        row["tail_collect_ms"] = 1e3 * statistics.mean(i["collect_time_sec"] for i in iters)
        row["tail_learn_ms"] = 1e3 * statistics.mean(i["learn_time_sec"] for i in iters)
        row["episode_statistics"] = summary.get("episode_statistics")
    else:
        row["stderr_tail"] = proc.stderr[-2000:]
    print(
        json.dumps({k: v for k, v in row.items() if k not in ("versions", "episode_statistics")}), flush=True
    )
    return row


def main() -> int:
    """Parse arguments, run the interleaved schedule, write JSON and print a table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--eager-iterations", type=int, default=0)
    parser.add_argument("--root", type=Path, default=Path("runs/canonical"))
    parser.add_argument("--out", type=Path, default=Path("canonical_runs.json"))
    args = parser.parse_args()
    rows = []
    for repeat in range(args.repeats):
        for algo, task in WORKLOADS:
            rows.append(run_one(algo, task, args.root / f"{algo}_{task}_graph_{repeat}", []))
            args.out.write_text(json.dumps(rows, indent=1))
    if args.eager_iterations:
        for algo, task in WORKLOADS:
            extra = ["training.cuda_graph=false", f"algo.max_iterations={args.eager_iterations}"]
            rows.append(run_one(algo, task, args.root / f"{algo}_{task}_eager", extra))
            args.out.write_text(json.dumps(rows, indent=1))
    args.out.write_text(json.dumps(rows, indent=1))
    print("\nalgo      task                graph  iters  tail_env_steps/s  collect_ms  learn_ms  status")
    for r in rows:
        graph = "off" if r["overrides"] else "on"
        print(
            f"{r['algo']:<9} {r['task']:<19} {graph:<6} {r.get('completed_iterations')!s:<6} "
            f"{r.get('tail_env_steps_per_sec') or 0:>16,.0f}  {r.get('tail_collect_ms') or 0:>10.1f} "
            f"{r.get('tail_learn_ms') or 0:>9.1f}  {r.get('status')}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
