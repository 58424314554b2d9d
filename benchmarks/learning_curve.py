"""Learning against wall-clock time: train for a time budget, then `trainrt eval` checkpoints along the way.

    python benchmarks/learning_curve.py --algo sac --task g1_walk_flat --minutes 5 [--checkpoint-every 250]
        [--evals 4] [--eval-envs 64] [--preset NAME] [--run-dir DIR] [--out curve.json]
        [--warmup] [--arm NAME="key=value ..." ...] [--one-at-a-time]
        [--check-sim mujoco] [--check-solver-iterations N] [--check-envs 16] [key=value ...]

1. ``trainrt train`` with the preset plus the overrides, ``training.time_limit_sec`` = the budget (set-up
   and warm-up count), a checkpoint every ``--checkpoint-every`` iterations and none of the end-of-run
   extras (final eval, ONNX export);
2. ``trainrt eval`` (deterministic; walk: the fixed commands, tracking: the clip from its first frame) of up
   to ``--evals`` checkpoints spread over the run, the last always among them;
3. one row per evaluated checkpoint: iteration, wall-clock seconds since set-up began (the summary's
   ``elapsed_sec`` of that iteration), and the headline eval numbers (walk: worst fall
   fraction, mean and worst linear-velocity error, mean yaw-rate error over the commands, and on terrain
   each type's fall fraction and the error on flat ground; tracking: completion and the body, anchor and
   joint errors; both: the fraction of saturated action components). The JSON also keeps the run's last
   terrain curriculum statistics (mean level, share per level) where the task has one.

The run's ``algo.max_iterations`` is raised so that only the budget ends it; a learning-rate schedule whose
horizon the config leaves to the run (``lr_decay_updates`` unset) keeps the preset's horizon
(``algo.params.lr_decay_updates`` = its max_iterations x updates per iteration), so the curve shows the
preset's learning, not a schedule stretched over a million iterations.

``--check-sim`` and ``--check-solver-iterations`` evaluate each run's last checkpoint once more, on that
backend and under that solver iteration limit (``trainrt eval --sim ... --solver-iterations ...``): the
sim-to-sim check of an arm that trains with other physics. It is one more row, and every row then says
what it was evaluated on (``eval_on``).

The table goes to the console (markdown) and, with ``--out``, to JSON with every eval result. The run's
``tail_env_steps_per_sec`` is reported too; it is the throughput of this same run.

``--warmup`` first runs every arm's config for one iteration (all at once, in ``<run-dir>/_warmup``, or in
``<run-dir>_warmup`` beside a run without arms; their run directories are removed afterwards, the arms' logs
stay), so the one-time kernel compilation of a fresh machine (Warp's kernels, the compiled learner: minutes)
falls outside the budgets; the JSON records how long it took.

``--arm NAME="key=value ..."`` (repeatable) makes it an A/B: one run per arm, each with the common
overrides plus its own, all started at once on the same device with the same time budget, in
``<run-dir>/<NAME>`` (its console output in ``<run-dir>/<NAME>.log``); then every arm's checkpoints are
evaluated and the table gets an ``arm`` column. The arms share the GPU, so each trains at a fraction of the
whole machine's rate: a comparison at equal wall clock and equal share, not the number one run alone would
reach.

``--one-at-a-time`` runs the arms one after another instead, each alone on the device with the whole budget
(the JSON then has ``sequential_arms``). Use it where what is compared depends on how many iterations a run
does in the budget (a late degradation, a schedule's horizon), which a shared GPU cuts to a fraction.
"""

from __future__ import annotations

import argparse
import json
import math
import shlex
import shutil
import subprocess
import sys
import time
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


def headline(result: dict[str, Any]) -> dict[str, float]:
    """The numbers of one eval result that go into the curve table."""
    if "tracking" not in result:  # a walk: fixed commands (and on rough ground, terrain types)
        rows = list(result["commands"].values())
        lin = [r["lin_vel_error_xy"] for r in rows]
        terrain = {
            f"fell_{name}": float(found["failed_fraction"])
            for name, found in result.get("terrain", {}).items()
        }
        if result.get("flat_lin_vel_error_xy") is not None:
            terrain["flat_lin_vel_error"] = float(result["flat_lin_vel_error_xy"])
        return {
            **terrain,
            "worst_fell": max(r["failed_fraction"] for r in rows),
            "mean_lin_vel_error": sum(lin) / len(lin),
            "worst_lin_vel_error": max(lin),
            "mean_yaw_rate_error": sum(r["ang_vel_error_z"] for r in rows) / len(rows),
            "action_saturation": sum(r["action_saturation"] for r in rows) / len(rows),
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
            "action_saturation",
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


def parse_arms(specs: list[str]) -> dict[str, list[str]]:
    """``NAME=OVERRIDES`` specs -> arm name -> its overrides; ValueError naming a malformed or repeated spec."""
    arms: dict[str, list[str]] = {}
    for spec in specs:
        name, sep, overrides = spec.partition("=")
        if not sep or not name or not name.replace("_", "").replace("-", "").isalnum():
            raise ValueError(
                f'--arm {spec!r}: expected NAME="key=value ..." with a name of letters, digits, - or _'
            )
        if name in arms:
            raise ValueError(f"--arm {name!r} is given twice")
        arms[name] = shlex.split(overrides)
    return arms


def pinned_lr_horizon(algo: str, task: str, sim: str, preset: str | None, overrides: list[str]) -> list[str]:
    """The override that keeps the config's learning-rate horizon once max_iterations is raised (or none)."""
    from trainrt.config.resolve import resolve_train_config

    cfg, _ = resolve_train_config(algo, task, sim, list(overrides), preset or "auto")
    params = cfg.algo.params
    if getattr(params, "lr_schedule", "constant") == "constant" or params.lr_decay_updates is not None:
        return []
    return [f"algo.params.lr_decay_updates={cfg.algo.max_iterations * params.updates_per_iteration}"]


def train_command(
    args: argparse.Namespace, run_dir: Path, overrides: list[str], *, warmup: bool = False
) -> list[str]:
    """The ``trainrt train`` command of one run: the budgeted run, or (``warmup``) one iteration of it."""
    horizon = pinned_lr_horizon(args.algo, args.task, args.sim, args.preset, overrides)
    budget = ["algo.max_iterations=1"] if warmup else [f"training.time_limit_sec={60 * args.minutes:g}"]
    return [
        sys.executable, "-m", "trainrt", "train", f"--algo={args.algo}", f"--task={args.task}",
        f"--sim={args.sim}", *([f"--preset={args.preset}"] if args.preset else []),
        "algo.max_iterations=1000000", f"training.checkpoint_every={args.checkpoint_every}",
        "training.final_eval=false", "training.export_onnx=false", f"training.run_dir={run_dir}",
        *overrides, *horizon, *budget,
    ]  # fmt: skip


def run_all(commands: dict[str | None, list[str]], logs: Path | None) -> dict[str | None, int]:
    """Start every command at once (they share the device), wait for all; name -> exit code.

    With ``logs`` each named command's console goes to ``<logs>/<name>.log``.
    """
    procs = {}
    for name, command in commands.items():
        print("$", " ".join(command), flush=True)
        if name is None or logs is None:
            procs[name] = subprocess.Popen(command)
        else:
            logs.mkdir(parents=True, exist_ok=True)
            with open(logs / f"{name}.log", "w") as log:
                procs[name] = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    return {name: proc.wait() for name, proc in procs.items()}


def check_label(sim: str | None, solver_iterations: int | None) -> str:
    """How a check evaluation differs from the run's own: ``"mujoco, 10 solver iterations"``."""
    parts = [sim] if sim else []
    if solver_iterations is not None:
        parts.append(f"{solver_iterations} solver iterations")
    return ", ".join(parts)


def curve(
    run_dir: Path, evals: int, eval_envs: int, check: dict[str, Any] | None = None
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The curve rows of one finished run and its facts (summary numbers, every eval result).

    ``check`` (``sim``, ``solver_iterations``, ``num_envs``) also evaluates the last checkpoint that way, as
    one more row; every row then says what it was evaluated on (``eval_on``: ``run`` or the check's label).
    """
    summary = load_run_summary(run_dir)
    at = wall_clock_at(summary)
    iterations = sorted(int(p.stem.split("_")[1]) for p in checkpoints_newest_first(run_dir))
    rows, results = [], []
    on_run = {"eval_on": "run"} if check else {}
    for iteration in spread(iterations, evals):
        result = evaluate_run(run_dir, checkpoint=iteration, num_envs=eval_envs, log=lambda line: None)
        results.append(result)
        rows.append({"iteration": iteration, "wall_clock_s": at.get(iteration, math.nan), **on_run,
                     **headline(result)})  # fmt: skip
    if check:
        result = evaluate_run(
            run_dir,
            checkpoint=iterations[-1],
            sim=check["sim"],
            solver_iterations=check["solver_iterations"],
            num_envs=check["num_envs"],
            out=run_dir / "eval" / f"check_{iterations[-1]}.json",
            log=lambda line: None,
        )
        results.append(result)
        rows.append({"iteration": iterations[-1], "wall_clock_s": at.get(iterations[-1], math.nan),
                     "eval_on": check_label(check["sim"], check["solver_iterations"]),
                     **headline(result)})  # fmt: skip
    facts = {
        "run_dir": str(run_dir),
        "commit": summary.commit,
        "tail_env_steps_per_sec": summary.tail_env_steps_per_sec,
        "completed_iterations": summary.completed_iterations,
        "time_limit_reached": summary.time_limit_reached,
        "warmup_time_sec": summary.warmup_time_sec,
        "final_episode_length": summary.episode_statistics.get("Episode/length"),
        # a terrain curriculum's mean level and level shares (Curriculum/<term>/...), as the summary has them
        "curriculum": {k: v for k, v in summary.episode_statistics.items() if k.startswith("Curriculum/")},
        "rows": rows,
        "evals": results,
    }
    return rows, facts


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
    parser.add_argument(
        "--warmup", action="store_true",
        help="first run each arm's config for one iteration, so kernel compilation falls outside the budgets",
    )  # fmt: skip
    parser.add_argument(
        "--arm", action="append", default=[], metavar='NAME="key=value ..."',
        help="one run per arm with these extra overrides (repeatable); concurrent unless --one-at-a-time",
    )  # fmt: skip
    parser.add_argument(
        "--one-at-a-time", action="store_true",
        help="run the arms one after another, each alone on the device with the whole budget",
    )  # fmt: skip
    parser.add_argument(
        "--check-sim", choices=["mjwarp", "mujoco"], default=None,
        help="also evaluate each run's last checkpoint on this backend (a sim-to-sim check)",
    )  # fmt: skip
    parser.add_argument(
        "--check-solver-iterations", type=int, default=None, metavar="N",
        help="also evaluate each run's last checkpoint under this solver iteration limit (on --check-sim's "
        "backend, or the run's)",
    )  # fmt: skip
    parser.add_argument("--check-envs", type=int, default=16, help="envs of the check evaluation")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, as for trainrt train")
    args = parser.parse_args(argv)
    if args.check_solver_iterations is not None and args.check_solver_iterations < 1:
        parser.error("--check-solver-iterations must be at least 1")
    if args.check_envs < 1:
        parser.error("--check-envs must be at least 1")
    wants_check = args.check_sim is not None or args.check_solver_iterations is not None
    check = (
        {
            "sim": args.check_sim,
            "solver_iterations": args.check_solver_iterations,
            "num_envs": args.check_envs,
        }
        if wants_check
        else None
    )
    if not (math.isfinite(args.minutes) and args.minutes > 0) or args.evals < 1 or args.checkpoint_every < 1:
        parser.error("--minutes must be positive, --evals and --checkpoint-every at least 1")
    try:
        arms = parse_arms(args.arm)
    except ValueError as err:
        parser.error(str(err))
    if args.one_at_a_time and not arms:
        parser.error("--one-at-a-time orders the runs of --arm: give at least one --arm")
    base = Path(args.run_dir or f"runs/curve_{args.algo}_{args.task}")
    runs = {name: (base / name, extra) for name, extra in arms.items()} if arms else {None: (base, [])}
    warmup_sec = None
    if args.warmup:
        # beside a single run's directory, which must start empty; inside an A/B's, beside its arms
        scratch = base / "_warmup" if arms else base.with_name(f"{base.name}_warmup")
        started = time.monotonic()
        codes = run_all(
            {
                name: train_command(args, scratch / (name or "run"), [*args.overrides, *extra], warmup=True)
                for name, (_, extra) in runs.items()
            },
            scratch,
        )
        warmup_sec = time.monotonic() - started
        if any(codes.values()):
            print(f"the warm-up runs exited with {codes} (logs in {scratch}); no curve", file=sys.stderr)
            return next(code for code in codes.values() if code)
        for name in runs:
            shutil.rmtree(scratch / (name or "run"))  # the logs stay
        print(f"warm-up (one iteration of every arm, compilation included): {warmup_sec:.0f} s", flush=True)
    # all arms start together and share the device, or (--one-at-a-time) each runs alone after the previous;
    # each arm's console goes to <run-dir>/<NAME>.log
    commands = {
        name: train_command(args, run_dir, [*args.overrides, *extra])
        for name, (run_dir, extra) in runs.items()
    }
    log_dir = base if arms else None
    if args.one_at_a_time:
        codes = {}
        for name, command in commands.items():
            codes |= run_all({name: command}, log_dir)
    else:
        codes = run_all(commands, log_dir)
    failed = {name: code for name, code in codes.items() if code != 0}
    if failed:
        logs = "".join(f"; {name}: see {base / f'{name}.log'}" for name in failed if name is not None)
        print(f"training exited with {failed if arms else failed[None]}{logs}; no curve", file=sys.stderr)
        return next(iter(failed.values()))
    rows, facts = [], {}
    for name, (run_dir, _) in runs.items():
        arm_rows, facts[name] = curve(run_dir, args.evals, args.eval_envs, check)
        rows += [{"arm": name, **row} for row in arm_rows] if arms else arm_rows
    print(markdown(rows))
    for name, f in facts.items():
        print(f"{'' if name is None else name + ': '}tail env steps/s {f['tail_env_steps_per_sec']:,.0f}; final "
              f"training episode length {f['final_episode_length']}; time limit reached: {f['time_limit_reached']}")  # fmt: skip
    if args.out:
        head = {
            "algo": args.algo,
            "task": args.task,
            "minutes": args.minutes,
            "overrides": args.overrides,
            "warmup_sec": warmup_sec,
            "check": check,
        }
        if arms:
            key = "sequential_arms" if args.one_at_a_time else "concurrent_arms"
            out = {**head, key: {name: {"overrides": arms[name], **facts[name]} for name in arms}}
        else:
            out = {**head, **facts[None]}
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
