"""Run the canonical workloads interleaved and tabulate their run summaries.

    python benchmarks/canonical_runs.py --repeats 2 --sets preset,sequential --out results.json

Each repeat runs SAC / g1_walk_flat and FlashSAC / g1_motion_tracking back to back for every named
override set (interleaved, so drift of the machine hits all alike) at the canonical settings
(docs/performance.md): 2048 envs, 160 iterations, presets unchanged apart from the set's overrides.

Override sets (``SETS``): ``preset`` (the presets: the reference learner schedules, collector and learner
overlapped), ``sequential`` (the same work, collector then learner), ``one_update_per_step`` (the earlier
presets' lighter learner: one update per vector step) and ``eager`` (no CUDA graphs; ~10x slower, run
with ``--eager-iterations``). With ``--physics`` the bare physics is timed first on the same machine
(``trainrt bench physics``) and every row reports its ratio to that physics-only rate. The number that
counts is each run's ``tail_env_steps_per_sec`` from its ``run_summary.json``.
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
SETS: dict[str, dict[str, list[str]]] = {
    "preset": {"sac": [], "flashsac": []},
    "sequential": {"sac": ["training.overlap=false"], "flashsac": ["training.overlap=false"]},
    "one_update_per_step": {
        "sac": [
            "algo.params.updates_per_iteration=8",
            "algo.params.actor_update_period=1",
            "algo.params.tau=0.1",
        ],
        "flashsac": [
            "algo.params.updates_per_iteration=8",
            "algo.params.batch_size=8192",
            "algo.params.tau=0.01",
        ],
    },
    "eager": {"sac": ["training.cuda_graph=false"], "flashsac": ["training.cuda_graph=false"]},
    "eager_collector": {
        "sac": ["training.compile_collector=false"],
        "flashsac": ["training.compile_collector=false"],
    },
}
"""Named override sets; each entry lists the overrides per algorithm."""
CANONICAL = [
    "algo.num_envs=2048",
    "algo.max_iterations=160",
    "training.final_eval=false",
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
        learner = summary["learner_graph"]
        row["learner_graph_enabled"] = learner.get("update_graph_enabled")
        for key in (
            "compile_enabled",
            "overlap_enabled",
            "overlap_fallback_reason",
            "updates_per_graph_replay",
        ):
            row[key] = learner.get(key)
        row["updates_per_iteration"] = summary.get("updates_per_iteration")
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


def physics_rate(out_dir: Path) -> float | None:
    """Graph-replayed env steps/s of the bare G1 physics at 2048 envs (``trainrt bench physics``)."""
    path = out_dir / "physics.json"
    cmd = [sys.executable, "-m", "trainrt", "bench", "physics", "--sim", "mjwarp", "--num-envs", "2048"]
    cmd += ["--steps", "200", "--output", str(path)]
    subprocess.run(cmd, capture_output=True, text=True, check=False)
    if not path.is_file():
        return None
    results = json.loads(path.read_text())
    rows = results if isinstance(results, list) else [results]
    return next((r["graph_env_steps_per_sec"] for r in rows if r.get("bench") == "physics"), None)


def main() -> int:
    """Parse arguments, run the interleaved schedule, write JSON and print a table."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--sets", default="preset,sequential", help=f"comma-separated, from {list(SETS)}")
    parser.add_argument("--iterations", type=int, default=160)
    parser.add_argument("--eager-iterations", type=int, default=20)
    parser.add_argument("--physics", action="store_true", help="time the bare physics first")
    parser.add_argument("--root", type=Path, default=Path("runs/canonical"))
    parser.add_argument("--out", type=Path, default=Path("canonical_runs.json"))
    args = parser.parse_args()
    names = [name.strip() for name in args.sets.split(",") if name.strip()]
    unknown = sorted(set(names) - set(SETS))
    if unknown:
        parser.error(f"unknown override sets {unknown}; valid: {list(SETS)}")
    args.root.mkdir(parents=True, exist_ok=True)
    physics = physics_rate(args.root) if args.physics else None
    rows = []
    for repeat in range(args.repeats):
        for name in names:
            iterations = args.eager_iterations if name == "eager" else args.iterations
            for algo, task in WORKLOADS:
                extra = [*SETS[name][algo], f"algo.max_iterations={iterations}", "training.overwrite=true"]
                row = run_one(algo, task, args.root / f"{algo}_{task}_{name}_{repeat}", extra)
                row["set"] = name
                row["physics_env_steps_per_sec"] = physics
                if physics and row.get("tail_env_steps_per_sec"):
                    row["fraction_of_physics"] = row["tail_env_steps_per_sec"] / physics
                rows.append(row)
                args.out.write_text(json.dumps(rows, indent=1))
    print(f"\nphysics only (graph, 2048 envs): {physics or float('nan'):,.0f} env steps/s")
    print(
        "set                  algo      updates  tail_env_steps/s  collect_ms  learn_ms  vs_physics  status"
    )
    for r in rows:
        print(
            f"{r['set']:<20} {r['algo']:<9} {r.get('updates_per_iteration')!s:<8} "
            f"{r.get('tail_env_steps_per_sec') or 0:>16,.0f}  {r.get('tail_collect_ms') or 0:>10.1f} "
            f"{r.get('tail_learn_ms') or 0:>9.1f}  {r.get('fraction_of_physics') or 0:>10.2f}  {r.get('status')}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
