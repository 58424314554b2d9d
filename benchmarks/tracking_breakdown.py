"""DIAGNOSTIC: where a tracking policy's error lives, joint by joint and body by body.

    python benchmarks/tracking_breakdown.py RUN_DIR [--checkpoint N] [--num-envs 64] [--sim mujoco]
        [--steps N] [--top 10] [--out breakdown.json]

Runs the rollout of ``trainrt eval`` on a ``g1_motion_tracking`` run: every env starts at the clip's first
frame, pushes are off and actions are deterministic. Over the steps each env was still tracking, it
reports:
- per joint: the mean |q_ref - q| (rad) and how often the policy's action for that joint was saturated
  (|a| >= ``ACTION_SATURATION_LEVEL``);
- per tracked body: the mean anchor-relative position error (m) and orientation error (rad), the
  quantities the ``motion_body_pos_exp`` and ``motion_body_ori_exp`` rewards are built from.

The console shows the ``--top`` worst of each, worst first; ``--out`` writes every value as JSON. The
headline numbers (completion, mean errors) stay ``trainrt eval``'s. As a diagnostic it reuses the eval's
own rollout and agent loading (``runner.evaluate._rollout``, ``_load_agent``), so both see the same steps.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainrt.mdp.math import quat_error_magnitude
from trainrt.runner.build import build_env, resolve_device
from trainrt.runner.checkpoint import load_run_checkpoint
from trainrt.runner.evaluate import ACTION_SATURATION_LEVEL, _load_agent, _rollout
from trainrt.runner.manifest import load_resolved_config
from trainrt.tasks.tracking.evaluation import tracking_eval_config

Metric = Callable[[Any], torch.Tensor]


def breakdown_metrics(env: Any) -> dict[str, Metric]:
    """Per-row metrics of a tracking env, one per joint and per body: ``joint/``, ``saturated/``,
    ``body_pos/`` and ``body_ori/`` followed by the joint or body name."""
    motion = env.command_manager.get_term("motion")
    term = env.action_manager.get_term("joint_pos")
    metrics: dict[str, Metric] = {}
    for j, name in enumerate(env.robot.joint_names):
        metrics[f"joint/{name}"] = lambda env, j=j: (
            motion.ref_joint_pos[:, j] - env.robot.joint_pos[:, j]
        ).abs()
    for column, name in enumerate(term.joint_names):
        metrics[f"saturated/{name}"] = lambda env, c=column: (
            env.action_manager.action[:, c].abs() >= ACTION_SATURATION_LEVEL
        ).float()
    for b, name in enumerate(motion.body_names):
        metrics[f"body_pos/{name}"] = lambda env, b=b: (
            motion.relative_body_targets()[0][:, b] - motion.robot_body_pos_w[:, b]
        ).norm(dim=-1)
        metrics[f"body_ori/{name}"] = lambda env, b=b: quat_error_magnitude(
            motion.relative_body_targets()[1][:, b], motion.robot_body_quat_w[:, b]
        )
    return metrics


def tracking_breakdown(
    run_dir: str | Path,
    *,
    checkpoint: str | None = None,
    sim: str | None = None,
    num_envs: int = 64,
    steps: int | None = None,
) -> dict[str, Any]:
    """The per-joint and per-body errors of a tracking run's checkpoint (see the module docstring)."""
    cfg = load_resolved_config(run_dir)
    if cfg.task.name != "g1_motion_tracking":
        raise ValueError(f"{run_dir} is a {cfg.task.name} run; the breakdown is for g1_motion_tracking runs")
    if sim is not None and sim != cfg.sim.backend:
        cfg = cfg.model_copy(update={"sim": cfg.sim.model_copy(update={"backend": sim, "device": None})})
    state = load_run_checkpoint(run_dir, checkpoint, map_location=resolve_device(cfg))
    env = build_env(tracking_eval_config(cfg), num_envs=num_envs)
    agent = _load_agent(cfg, env, state)
    motion = env.command_manager.get_term("motion")
    (row,) = _rollout(env, agent, motion.num_frames if steps is None else steps, breakdown_metrics(env))

    def group(prefix: str) -> dict[str, float]:
        return {key.split("/", 1)[1]: value for key, value in row.items() if key.startswith(prefix)}

    return {
        "run_dir": str(run_dir),
        "checkpoint": str(state["path"]),
        "iteration": int(state["iteration"]),
        "sim": cfg.sim.backend,
        "num_envs": num_envs,
        "steps": row["steps"],
        "completed_fraction": row["completed_fraction"],
        "joint_abs_error": group("joint/"),
        "joint_action_saturation": group("saturated/"),
        "body_pos_error": group("body_pos/"),
        "body_ori_error": group("body_ori/"),
    }


def worst(values: dict[str, float], top: int) -> list[tuple[str, float]]:
    """The ``top`` largest entries, largest first."""
    return sorted(values.items(), key=lambda item: -item[1])[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--sim", default=None)
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.num_envs < 1 or args.top < 1 or (args.steps is not None and args.steps < 1):
        parser.error("--num-envs, --top and --steps must be at least 1")
    try:
        result = tracking_breakdown(
            args.run_dir, checkpoint=args.checkpoint, sim=args.sim, num_envs=args.num_envs, steps=args.steps
        )
    except (FileNotFoundError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(
        f"iteration {result['iteration']} on {result['sim']}: {result['num_envs']} envs, {result['steps']} steps, "
        f"completed {result['completed_fraction']:.3f}"
    )
    saturation = result["joint_action_saturation"]
    print("| joint | mean abs error rad | saturated |\n|---|---|---|")
    for name, value in worst(result["joint_abs_error"], args.top):
        print(f"| {name} | {value:.4f} | {saturation.get(name, float('nan')):.3f} |")
    orientation = result["body_ori_error"]
    print("| body | position error m | orientation error rad |\n|---|---|---|")
    for name, value in worst(orientation, args.top):
        print(f"| {name} | {result['body_pos_error'][name]:.4f} | {value:.4f} |")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
