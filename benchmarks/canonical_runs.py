"""Run the canonical workloads interleaved and tabulate their run summaries.

    python benchmarks/canonical_runs.py --repeats 2 --sets preset,sequential --out results.json

Each repeat runs SAC / g1_walk_flat and FlashSAC / g1_motion_tracking back to back for every named
override set (interleaved, so drift of the machine hits all alike) at the canonical settings
(docs/performance.md): 2048 envs, 160 iterations, presets unchanged apart from the set's overrides.

Override sets (``SETS``): ``preset`` (the presets: the reference learner schedules, collector and learner
overlapped), ``sequential`` (the same work, collector then learner), ``one_update_per_step`` (the earlier
presets' lighter learner: one update per vector step), ``eager`` (no CUDA graphs; ~10x slower, run
with ``--eager-iterations``) and ``eager_collector`` (the collector's term math not compiled). The exit
status is 1 when a run did not complete. With ``--physics`` the bare physics is timed first on the same machine
(``trainrt bench physics``) and every row reports its ratio to that physics-only rate. The number that
counts is each run's ``tail_env_steps_per_sec`` from its ``run_summary.json``.

A/B runs of a learner setting (a kernel or compiler variant, say) take ``--override-set
NAME:KEY=VALUE[,KEY=VALUE...]`` (repeatable): set NAME runs the presets with those config overrides added, as
``trainrt train`` takes them, interleaved with the other sets; the runs' ``config.json`` records them, e.g.

    python benchmarks/canonical_runs.py --algos sac --sets preset \
        --override-set programs_64:algo.params.norm_backward_programs=64

``--learner-variant NAME`` (repeatable) makes a set of one of ``learner_variants.py``'s variants (no bf16 weight
copies, inductor options for the update's parts, ...): its learner config overrides
(``learner_variants.config_overrides``) for each workload, so the same change measured on the learner alone is
measured end to end, e.g.

    python benchmarks/canonical_runs.py --algos flashsac --sets preset \
        --learner-variant cast_unfused --learner-variant cast_weights

``--tree NAME:PATH`` (repeatable) makes a set that runs the presets from another checkout of this repository
(its ``packages/*/src`` go first on ``PYTHONPATH``), so code before and after a change is measured interleaved
on one machine, e.g. a worktree of the previous commit:

    git worktree add /tmp/before HEAD~1
    python benchmarks/canonical_runs.py --sets preset --tree before:/tmp/before

``--algos`` limits every set to some of the workloads.
"""

from __future__ import annotations

import argparse
import json
import os
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


def end_to_end_variants() -> dict[str, dict]:
    """``learner_variants.VARIANTS`` that a training run can carry: those made of learner settings alone (not
    ``learner_variants.MEASUREMENTS``)."""
    variants = _learner_variants()
    return {
        name: changes
        for name, changes in variants.VARIANTS.items()
        if not set(changes) & variants.MEASUREMENTS
    }


def variant_overrides(variant: str, algo: str) -> list[str]:
    """The config overrides of learner variant ``variant`` for ``algo``."""
    return _learner_variants().config_overrides(variant, algo)


def _learner_variants():
    """``benchmarks/learner_variants.py``, imported from this script's folder."""
    sys.path.insert(0, str(Path(__file__).parent))
    try:
        import learner_variants
    finally:
        sys.path.pop(0)
    return learner_variants


def parse_override_set(text: str) -> tuple[str, list[str]]:
    """``NAME:KEY=VALUE[,...]`` -> (NAME, ["KEY=VALUE", ...]): config overrides as ``trainrt train`` takes them."""
    name, sep, assignments = text.partition(":")
    valid = bool(name) and bool(sep) and name not in SETS
    overrides: list[str] = []
    for item in assignments.split(",") if valid else []:
        key, eq, raw = item.strip().partition("=")
        if not eq or not raw or "." not in key.strip("."):
            valid = False
            break
        overrides.append(f"{key.strip()}={raw}")
    if not valid or not overrides:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME:KEY=VALUE[,KEY=VALUE...] (config overrides) with a NAME that is not one of "
            f"the override sets {list(SETS)}, e.g. unpadded:algo.params.gemm_alignment=1"
        )
    return name, overrides


def parse_tree(text: str) -> tuple[str, Path]:
    """``NAME:PATH`` -> (NAME, PATH) for a checkout whose ``packages/trainrt/src`` exists."""
    name, _, path = text.partition(":")
    root = Path(path).expanduser()
    if not name or not path or name in SETS or not (root / "packages" / "trainrt" / "src").is_dir():
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected NAME:PATH with a NAME that is not one of the override sets {list(SETS)} and "
            "PATH a checkout of this repository (it must hold packages/trainrt/src), e.g. before:/tmp/before"
        )
    return name, root.resolve()


def tree_environment(root: Path) -> dict[str, str]:
    """The environment of a run from the checkout at ``root``: its package sources first on PYTHONPATH."""
    sources = [str(root / "packages" / name / "src") for name in ("trainrt", "simcore")]
    rest = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([*sources, *([rest] if rest else [])])}


def train_command(algo: str, task: str, run_dir: Path, extra: list[str]) -> list[str]:
    """The command line of one canonical run, with the overrides ``extra`` after the canonical ones."""
    cmd = [sys.executable, "-m", "trainrt", "train", "--algo", algo, "--task", task, "--sim", "mjwarp"]
    return [*cmd, *CANONICAL, f"training.run_dir={run_dir}", *extra]


def summary_fields(summary: dict) -> dict:
    """The fields of a run summary we tabulate; the tail's collect/learn means are None when the run ended
    before completing an iteration."""
    row: dict = {}
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
    collector = summary.get("collector_graph") or {}
    row["collector_graph_enabled"] = collector.get("graph_enabled")
    row["collector_fallback"] = collector.get("eager_fallback_reason")
    learner = summary.get("learner_graph") or {}
    row["learner_graph_enabled"] = learner.get("update_graph_enabled")
    for key in (
        "compile_enabled",
        "overlap_enabled",
        "overlap_fallback_reason",
        "updates_per_graph_replay",
    ):
        row[key] = learner.get(key)
    row["updates_per_iteration"] = summary.get("updates_per_iteration")
    tail = summary.get("tail_iteration_count") or 0
    iters = (
        (summary.get("iterations") or [])[-tail:] if tail else []
    )  # none when the run ended before its first
    row["tail_collect_ms"] = 1e3 * statistics.mean(i["collect_time_sec"] for i in iters) if iters else None
    row["tail_learn_ms"] = 1e3 * statistics.mean(i["learn_time_sec"] for i in iters) if iters else None
    row["episode_statistics"] = summary.get("episode_statistics")
    row["memory"] = summary.get("memory")  # the pre-flight estimate beside what the device held at the end
    return row


def run_one(
    algo: str,
    task: str,
    run_dir: Path,
    extra: list[str],
    variant: str | None = None,
    tree: Path | None = None,
) -> dict:
    """Train one run through the CLI (from the checkout at ``tree`` when given); return the fields of its
    summary we tabulate. ``variant`` names the learner variant whose overrides ``extra`` holds."""
    cmd = train_command(algo, task, run_dir, extra)
    env = tree_environment(tree) if tree is not None else None
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.perf_counter() - start
    row = {
        "algo": algo,
        "task": task,
        "overrides": extra,
        "learner_variant": variant,
        "tree": str(tree) if tree is not None else None,
        "exit_code": proc.returncode,
        "process_wall_sec": wall,
    }
    summary_path = run_dir / "run_summary.json"
    if summary_path.is_file():
        row.update(summary_fields(json.loads(summary_path.read_text())))
    if row.get("status") != "completed":
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
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if not path.is_file():
        print(f"physics bench failed (exit {proc.returncode}): {proc.stderr[-1500:]}", file=sys.stderr)
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
    parser.add_argument(
        "--override-set",
        action="append",
        default=[],
        type=parse_override_set,
        metavar="NAME:KEY=VALUE[,...]",
        help="a set that runs the presets with these config overrides added",
    )
    parser.add_argument(
        "--learner-variant",
        action="append",
        default=[],
        metavar="NAME",
        help="a set that runs the presets with learner_variants.py's variant NAME (its config overrides)",
    )
    parser.add_argument(
        "--tree",
        action="append",
        default=[],
        type=parse_tree,
        metavar="NAME:PATH",
        help="a set that runs the presets from another checkout of this repository",
    )
    parser.add_argument(
        "--algos", default=None, help="comma-separated algorithms to run (default: all workloads)"
    )
    parser.add_argument("--root", type=Path, default=Path("runs/canonical"))
    parser.add_argument("--out", type=Path, default=Path("canonical_runs.json"))
    args = parser.parse_args()
    names = [name.strip() for name in args.sets.split(",") if name.strip()]
    unknown = sorted(set(names) - set(SETS))
    if unknown:
        parser.error(f"unknown override sets {unknown}; valid: {list(SETS)}")
    override_sets = dict(args.override_set)
    if len(override_sets) != len(args.override_set):
        parser.error("two --override-set options share a NAME; give each set its own")
    variants = list(dict.fromkeys(args.learner_variant))
    if variants:
        carried = end_to_end_variants()
        bad = [v for v in variants if v not in carried]
        if bad:
            parser.error(f"--learner-variant {bad}: a training run can carry {sorted(carried)}")
        clash = sorted((set(variants) & set(override_sets)) | (set(variants) & set(SETS)))
        if clash:
            parser.error(f"--learner-variant {clash}: already the name of another set")
    trees = dict(args.tree)
    clash = sorted(set(trees) & (set(override_sets) | set(variants)))
    if len(trees) != len(args.tree) or clash:
        parser.error(
            f"--tree: each tree needs its own NAME, not shared with another set ({clash or 'repeated'})"
        )
    algos = [w[0] for w in WORKLOADS] if args.algos is None else [a for a in args.algos.split(",") if a]
    if not algos or set(algos) - {w[0] for w in WORKLOADS}:
        parser.error(
            f"--algos {args.algos!r}: name one or more of the workloads' {[w[0] for w in WORKLOADS]}"
        )
    workloads = [w for w in WORKLOADS if w[0] in algos]
    args.root.mkdir(parents=True, exist_ok=True)
    physics = physics_rate(args.root) if args.physics else None
    rows = []
    for repeat in range(args.repeats):
        for name in [*names, *override_sets, *variants, *trees]:
            iterations = args.eager_iterations if name == "eager" else args.iterations
            for algo, task in workloads:
                variant = name if name in variants else None
                if name in SETS:
                    overrides = SETS[name][algo]
                elif variant:
                    overrides = variant_overrides(variant, algo)
                else:
                    overrides = override_sets.get(name, [])
                extra = [*overrides, f"algo.max_iterations={iterations}", "training.overwrite=true"]
                run_dir = args.root / f"{algo}_{task}_{name}_{repeat}"
                row = run_one(algo, task, run_dir, extra, variant, trees.get(name))
                row["set"] = name
                row["physics_env_steps_per_sec"] = physics
                if physics and row.get("tail_env_steps_per_sec"):
                    row["fraction_of_physics"] = row["tail_env_steps_per_sec"] / physics
                rows.append(row)
                args.out.write_text(json.dumps(rows, indent=1))
    if args.physics:
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
    failed = [r for r in rows if r.get("status") != "completed"]
    if failed:
        print(f"{len(failed)} of {len(rows)} runs did not complete (their stderr_tail is in {args.out})")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
