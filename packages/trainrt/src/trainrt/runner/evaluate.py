"""``trainrt eval``: the deterministic evaluation of a run's checkpoint, the number users, docs and tests quote.

The run's env is rebuilt from its ``config.json`` (the same Manager-based env it trained on) with evaluation
changes applied through the task-override mechanism (``TaskSection``), and the actor acts deterministically:

``g1_walk_flat``
    every fixed command of ``WALK_EVAL_COMMANDS`` at once: one env of ``num_envs`` rows per command (no
    heading or standing rows, no resampling, pushes off; each row's command assigned after the reset), one
    rollout of ``WALK_EVAL_HORIZON_S`` = 10 s of simulated time (``horizon_s``, or ``steps`` control steps;
    at most one episode). Per command: the fraction of rows that fell, the mean linear (xy) and yaw-rate
    errors, and the mean achieved (signed) forward, lateral and yaw velocities over the steps they were up.
``g1_motion_tracking``
    every row starts at the clip's first frame without perturbation (pushes off, no random start) and runs
    to the clip's end. Completion fraction (rows that reached the last frame), and mean body position,
    anchor position and orientation, and joint position errors over the steps the rows were tracking.

Both report ``action_saturation``: the mean fraction of the policy's action components at the ends of the
tanh range (``|a| >= ACTION_SATURATION_LEVEL``), where the action map pins targets at their bounds and the
policy's gradient vanishes.

On CUDA the rollout step is replayed as one CUDA graph (``simcore.CapturedWork``, eager elsewhere).
Results go to the console as a table and to ``<run_dir>/eval/eval_<iteration>.json`` (or ``out``).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from trainrt.config import TrainConfig
from trainrt.hotpath import cold_path
from trainrt.runner.atomic_files import atomic_write_text
from trainrt.runner.build import build_agent, build_env, make_env_cfg, resolve_device
from trainrt.runner.checkpoint import (
    POLICY_CHECKPOINT_KEYS,
    check_action_mapping,
    check_motion_clips,
    load_run_checkpoint,
    load_run_weights,
)
from trainrt.runner.manifest import load_resolved_config
from trainrt.tasks.term_overrides import merge_term_overrides

EVAL_DIR_NAME = "eval"
WALK_EVAL_COMMANDS: dict[str, tuple[float, float, float]] = {
    "stand": (0.0, 0.0, 0.0),
    "forward_0.5": (0.5, 0.0, 0.0),
    "forward_1.0": (1.0, 0.0, 0.0),
    "backward_0.5": (-0.5, 0.0, 0.0),
    "lateral_0.3": (0.0, 0.3, 0.0),
    "yaw_0.5": (0.0, 0.0, 0.5),
    "combined": (0.5, 0.2, 0.3),
}
"""Walk evaluation commands: name -> (lin_vel_x m/s, lin_vel_y m/s, ang_vel_z rad/s) in the root frame."""

WALK_EVAL_HORIZON_S = 10.0
"""Default simulated seconds of a walk rollout: long enough to show falls and steady-state tracking, half of
the 20 s training episode so the evaluation stays quick."""

NEVER_S = 1.0e9
_DONE_CHECK_EVERY = 50  # control steps between the (synchronizing) checks for "every row is done"


@cold_path
def _with_task_changes(cfg: TrainConfig, changes: dict[str, Any], **fields: Any) -> TrainConfig:
    """``cfg`` with evaluation changes merged over its task section and validated like any override."""
    task = cfg.task.model_dump()
    for section, overrides in changes.items():
        task[section] = merge_term_overrides(task.get(section, {}), overrides)
    task.update(fields)
    return cfg.model_copy(update={"task": type(cfg.task).model_validate(task)})


@cold_path
def walk_eval_config(cfg: TrainConfig, command: tuple[float, float, float]) -> TrainConfig:
    """The run config with the twist command pinned to ``command`` and pushes off."""
    vx, vy, wz = command
    twist = {
        "params": {
            "lin_vel_x": [vx, vx],
            "lin_vel_y": [vy, vy],
            "ang_vel_z": [wz, wz],
            "rel_heading_envs": 0.0,
            "rel_standing_envs": 0.0,
        },
        "resampling_time_range_s": [NEVER_S, NEVER_S],
    }
    return _with_task_changes(
        cfg, {"commands": {"twist": twist}, "events": {"push_robot": {"enabled": False}}}
    )


@cold_path
def tracking_eval_config(cfg: TrainConfig) -> TrainConfig:
    """The run config with every reset at the clip's first frame, unperturbed, pushes off, no episode limit."""
    axes = ("x", "y", "z", "roll", "pitch", "yaw")
    motion = {
        "params": {
            "start_frame": 0,
            "pose_range": {axis: [0.0, 0.0] for axis in axes},
            "velocity_range": {axis: [0.0, 0.0] for axis in axes},
            "joint_position_range": [0.0, 0.0],
        }
    }
    changes = {"commands": {"motion": motion}, "events": {"push_robot": {"enabled": False}}}
    return _with_task_changes(cfg, changes, episode_length_s=NEVER_S)


class _RolloutStep:
    """One deterministic control step of an evaluation rollout with per-row accumulators (persistent buffers).

    ``step`` is sync-free and touches only buffers that exist before it runs, so ``simcore.CapturedWork`` can
    record it as a CUDA graph; on CPU (or when capture is refused) the same callable runs eagerly.
    """

    def __init__(self, env: Any, agent: Any, metrics: dict[str, Callable[[Any], torch.Tensor]]) -> None:
        n, device = env.num_envs, torch.device(env.device)
        self.env, self.agent, self.metrics = env, agent, metrics
        self.obs = env.reset()
        self.running = torch.ones(n, dtype=torch.bool, device=device)
        self.failed = torch.zeros(n, dtype=torch.bool, device=device)
        self.completed = torch.zeros(n, dtype=torch.bool, device=device)
        self.length = torch.zeros(n, dtype=torch.float64, device=device)
        self.sums = {name: torch.zeros(n, dtype=torch.float64, device=device) for name in metrics}
        self.samples = torch.zeros(n, dtype=torch.float64, device=device)
        self.steps_taken = torch.zeros((), dtype=torch.long, device=device)

    @torch.no_grad()
    def step(self) -> None:
        """Act, step the env, and add the step to every still-running row's sums; sync-free."""
        result = self.env.step(self.agent.act(self.obs, deterministic=True))
        running = self.running
        self.steps_taken.add_(1)
        self.length.add_(running.double())
        bad = result.terminated | ~result.valid
        self.failed.logical_or_(running & bad)
        self.completed.logical_or_(running & result.truncated & ~bad)
        running.logical_and_(~(result.terminated | result.truncated))
        weight = running.double()
        for name, metric in self.metrics.items():
            self.sums[name].add_(metric(self.env).double() * weight)
        self.samples.add_(weight)


@cold_path
@torch.no_grad()
def _rollout(
    env: Any,
    agent: Any,
    num_steps: int,
    metrics: dict[str, Callable[[Any], torch.Tensor]],
    *,
    groups: int = 1,
    before_first_step: Callable[[Any], None] | None = None,
    use_graph: bool = True,
) -> list[dict[str, Any]]:
    """Each row's first episode (cut at ``num_steps``) with deterministic actions; metrics averaged per group.

    Rows are split into ``groups`` equal consecutive blocks (row ``i`` belongs to group
    ``i // (num_envs // groups)``); each block gets one result. ``before_first_step(env)`` runs after the
    reset (e.g. to assign per-row commands). On CUDA the step runs as one ``simcore.CapturedWork`` graph
    replay (``use_graph=False``, a CPU device or a backend that cannot capture: eagerly, same results).

    Returns per group ``failed_fraction`` (failure terminations and non-finite rows), ``completed_fraction``
    (rows that ended in a time-out), ``mean_episode_length`` (control steps), ``steps`` (taken: the rollout stops
    early once every row has ended), ``horizon_steps`` (``num_steps``), ``num_envs`` (rows
    of the group), ``graph_enabled`` (whether the steps replayed a CUDA graph) and each metric's mean over
    the steps where its row was still running after the step.
    """
    import simcore

    n = env.num_envs
    if groups < 1 or n % groups:
        raise ValueError(f"num_envs={n} does not split into {groups} equal groups")
    rollout = _RolloutStep(env, agent, metrics)
    if before_first_step is not None:
        before_first_step(env)
    generators = [g for g in (env.rng, getattr(agent, "rng", None)) if isinstance(g, torch.Generator)]
    work = simcore.CapturedWork(
        rollout.step,
        backend=env.backend,
        name="eval_rollout",
        generators=list({id(g): g for g in generators}.values()),
        warmup_steps=min(2, num_steps),
        enabled=use_graph,
    )
    work.capture()  # on CUDA its eager warm-up steps are real rollout steps, counted in steps_taken
    done = int(rollout.steps_taken)
    while done < num_steps:
        work.replay()
        done += 1
        if done % _DONE_CHECK_EVERY == 0 and not bool(rollout.running.any()):
            break
    rows = n // groups

    def per_group(values: torch.Tensor) -> torch.Tensor:
        return values.double().reshape(groups, rows).sum(dim=1)

    samples = per_group(rollout.samples)
    count = samples.clamp_min(1.0)
    values = torch.stack(
        [
            per_group(rollout.failed) / rows,
            per_group(rollout.completed) / rows,
            per_group(rollout.length) / rows,
            samples,
            *(per_group(s) / count for s in rollout.sums.values()),
        ]
    ).cpu()
    steps = int(rollout.steps_taken)
    out = []
    for g in range(groups):
        row: dict[str, Any] = {
            "failed_fraction": float(values[0, g]),
            "completed_fraction": float(values[1, g]),
            "mean_episode_length": float(values[2, g]),
            "steps": steps,
            "horizon_steps": num_steps,
            "num_envs": rows,
            "graph_enabled": work.graph_enabled,
        }
        for i, name in enumerate(metrics):
            row[name] = float(values[4 + i, g]) if float(values[3, g]) > 0 else math.nan
        out.append(row)
    return out


ACTION_SATURATION_LEVEL = 0.99
"""|action| at or above which an action component counts as saturated in the ``action_saturation`` metric."""


def action_saturation(env: Any) -> torch.Tensor:
    """Per row (num_envs,): the fraction of the current action's components with |a| >= ACTION_SATURATION_LEVEL."""
    return (env.action_manager.action.abs() >= ACTION_SATURATION_LEVEL).float().mean(dim=-1)


@cold_path
def _load_agent(cfg: TrainConfig, env: Any, state: dict[str, Any]) -> Any:
    """The run's agent with the checkpoint's weights; ValueError when the env maps actions differently or
    the weights do not fit the networks the run's config builds."""
    check_action_mapping(state, env)
    check_motion_clips(state, env)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    load_run_weights(state, agent, cfg, dict(env.obs_dims), action="cannot evaluate")
    return agent


@cold_path
def walk_horizon_steps(env: Any, horizon_s: float) -> int:
    """Control steps of a walk rollout of ``horizon_s`` simulated seconds, at most one episode."""
    if not (math.isfinite(horizon_s) and horizon_s > 0.0):
        raise ValueError(f"horizon_s must be a positive number of seconds, got {horizon_s!r}")
    return max(1, min(env.max_episode_length, math.ceil(horizon_s / env.step_dt - 1e-9)))


@cold_path
def assign_walk_commands(env: Any, commands: torch.Tensor) -> None:
    """Pin each row's twist command to ``commands`` (num_envs, 3) and refresh the observation buffers.

    Runs right after ``env.reset()``: the eval config never resamples and has no heading or standing rows,
    so the rows keep these commands for their first episode (the only one the evaluation counts). The
    refreshed observation does not rewrite stored observation history (the walk task keeps none), so a task
    with history terms would see the reset's command in its oldest frames.
    """
    twist = env.command_manager.get_term("twist")
    twist.vel_command_b.copy_(commands.to(twist.vel_command_b))
    with env.state_cache.memoizing():  # as inside a step: a compiled observation reuses its one variant
        env.observation_manager.compute(update_history=False)


@cold_path
def evaluate_walk(
    cfg: TrainConfig,
    state: dict[str, Any],
    *,
    num_envs: int,
    steps: int | None,
    commands: Sequence[str] | None = None,
    horizon_s: float = WALK_EVAL_HORIZON_S,
    use_graph: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Walk evaluation: per command of ``WALK_EVAL_COMMANDS`` (or the named subset), fell fraction and errors.

    All commands run in one env of ``num_envs * len(commands)`` rows (a block of ``num_envs`` rows per
    command) and one rollout of ``steps`` control steps (default ``horizon_s`` of simulated time).
    """
    from trainrt import mdp

    names = list(WALK_EVAL_COMMANDS) if commands is None else list(commands)
    unknown = [name for name in names if name not in WALK_EVAL_COMMANDS]
    if unknown or not names:
        raise ValueError(f"unknown walk eval commands {unknown}; valid: {list(WALK_EVAL_COMMANDS)}")
    metrics = {
        "lin_vel_error_xy": lambda env: mdp.lin_vel_error_xy(env, command_name="twist"),
        "ang_vel_error_z": lambda env: mdp.ang_vel_error_z(env, command_name="twist"),
        # the achieved velocities (root frame), signed: a steady turn and a yaw jitter have the same error
        "mean_lin_vel_x": lambda env: env.robot.root_lin_vel_b[:, 0],
        "mean_lin_vel_y": lambda env: env.robot.root_lin_vel_b[:, 1],
        "mean_ang_vel_z": lambda env: env.robot.root_ang_vel_b[:, 2],
        "action_saturation": action_saturation,
    }
    env = build_env(walk_eval_config(cfg, (0.0, 0.0, 0.0)), num_envs=num_envs * len(names))
    agent = _load_agent(cfg, env, state)
    horizon = steps if steps is not None else walk_horizon_steps(env, horizon_s)
    table = torch.tensor([WALK_EVAL_COMMANDS[name] for name in names]).repeat_interleave(num_envs, dim=0)
    rows = _rollout(
        env,
        agent,
        horizon,
        metrics,
        groups=len(names),
        before_first_step=lambda env: assign_walk_commands(env, table),
        use_graph=use_graph,
    )
    results: dict[str, Any] = {}
    for name, row in zip(names, rows):
        vx, vy, wz = WALK_EVAL_COMMANDS[name]
        results[name] = {"command": {"lin_vel_x": vx, "lin_vel_y": vy, "ang_vel_z": wz}, **row}
        log(f"  {name}: fell {row['failed_fraction']:.3f}, lin vel error {row['lin_vel_error_xy']:.3f} m/s")
    return {"horizon_s": horizon * env.step_dt, "commands": results}


@cold_path
def evaluate_tracking(
    cfg: TrainConfig, state: dict[str, Any], *, num_envs: int, steps: int | None, use_graph: bool = True
) -> dict[str, Any]:
    """Tracking evaluation: from the clip's first frame to its end; completion and mean tracking errors."""
    from trainrt.tasks.g1_motion_tracking import mdp as tracking

    env = build_env(tracking_eval_config(cfg), num_envs=num_envs)
    agent = _load_agent(cfg, env, state)
    motion = env.command_manager.get_term("motion")
    # terminations see the frame reached by the previous step, so the last frame ends step num_frames
    horizon = motion.num_frames if steps is None else steps
    metrics = {
        name: (lambda env, func=func: func(env, command_name="motion"))
        for name, func in (
            ("body_pos_error", tracking.body_pos_error),
            ("anchor_pos_error", tracking.anchor_pos_error),
            ("anchor_ori_error", tracking.anchor_ori_error),
            ("joint_pos_error", tracking.joint_pos_error),
        )
    }
    metrics["action_saturation"] = action_saturation
    (row,) = _rollout(env, agent, horizon, metrics, use_graph=use_graph)
    clip = {"motion_file": str(motion.motion_file), "num_frames": motion.num_frames, "fps": motion.clip.fps}
    return {"clip": clip, "tracking": row}


@cold_path
def evaluate_run(
    run_dir: str | os.PathLike,
    *,
    checkpoint: str | os.PathLike | None = None,
    sim: str | None = None,
    num_envs: int = 64,
    steps: int | None = None,
    commands: Sequence[str] | None = None,
    horizon_s: float | None = None,
    solver_iterations: int | None = None,
    out: str | os.PathLike | None = None,
    use_graph: bool = True,
    log: Callable[[str], None] = print,
    motion_file: str | None = None,
) -> dict[str, Any]:
    """Evaluate a run's checkpoint deterministically; write the JSON; return the results.

    Args:
        run_dir: a directory written by ``trainrt train``.
        checkpoint: None (newest), an iteration number, or a checkpoint file.
        sim: backend to evaluate on (default the run's); ``mujoco`` for a sim-to-sim check of an mjwarp run.
        num_envs: rows per walk command, or rows of the tracking evaluation.
        steps: control steps per rollout (default: walk ``horizon_s``, tracking the whole clip).
        commands: walk command names (default all of ``WALK_EVAL_COMMANDS``).
        horizon_s: walk rollout length in simulated seconds (default ``WALK_EVAL_HORIZON_S``, at most one
            episode); ``steps`` takes precedence.
        solver_iterations: the constraint solver's iteration limit of the evaluation (default the run's
            ``sim.solver_iterations``): a policy trained with fewer iterations checked under the model's own.
        out: JSON path (default ``<run_dir>/eval/eval_<iteration>.json``).
        use_graph: on CUDA, replay the rollout step as a CUDA graph (False: eager, same results).
        log: where progress lines go.
        motion_file: the run's motion clip at another place (default: where the run's config says).
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if steps is not None and steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if solver_iterations is not None and solver_iterations < 1:
        raise ValueError(f"solver_iterations must be >= 1, got {solver_iterations}")
    trained = load_resolved_config(run_dir, motion_file=motion_file)
    cfg = trained
    if sim is not None and sim != cfg.sim.backend:
        cfg = cfg.model_copy(update={"sim": cfg.sim.model_copy(update={"backend": sim, "device": None})})
    if solver_iterations is not None:
        cfg = cfg.model_copy(
            update={"sim": cfg.sim.model_copy(update={"solver_iterations": solver_iterations})}
        )
    state = load_run_checkpoint(
        run_dir, checkpoint, map_location=resolve_device(cfg), require=POLICY_CHECKPOINT_KEYS
    )
    if cfg.task.name == "g1_walk_flat":
        body = evaluate_walk(
            cfg,
            state,
            num_envs=num_envs,
            steps=steps,
            commands=commands,
            horizon_s=WALK_EVAL_HORIZON_S if horizon_s is None else horizon_s,
            use_graph=use_graph,
            log=log,
        )
    elif cfg.task.name == "g1_motion_tracking":
        if commands is not None:
            raise ValueError("commands are walk evaluation commands; the tracking evaluation has none")
        if horizon_s is not None:
            raise ValueError("horizon_s is a walk evaluation option; the tracking evaluation runs the clip")
        body = evaluate_tracking(cfg, state, num_envs=num_envs, steps=steps, use_graph=use_graph)
    else:  # a task added to the registry without an evaluation of its own (docs/extending.md)
        raise ValueError(
            f"trainrt eval has no evaluation for task {cfg.task.name!r} (it evaluates g1_walk_flat and "
            "g1_motion_tracking); add one in trainrt/runner/evaluate.py, or use `trainrt play` for the "
            "task's own episode statistics"
        )
    result = {
        "run_dir": str(run_dir),
        "checkpoint": str(state["path"]),
        "iteration": int(state["iteration"]),
        "algo": cfg.algo.name,
        "task": cfg.task.name,
        "sim": cfg.sim.backend,
        "trained_sim": trained.sim.backend,
        "solver_iterations": _solver_iterations(cfg),
        "trained_solver_iterations": _solver_iterations(trained),
        "num_envs": num_envs,
        **body,
    }
    target = (
        Path(out) if out is not None else Path(run_dir) / EVAL_DIR_NAME / f"eval_{state['iteration']}.json"
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    replaced = target.is_file()
    atomic_write_text(target, json.dumps(result, indent=2) + "\n")
    result["json_path"] = str(target)
    result["replaced"] = replaced
    return result


@cold_path
def _solver_iterations(cfg: TrainConfig) -> int:
    """The constraint solver's iteration limit the models of ``cfg``'s scene carry (the sim section's, or the
    task model's own)."""
    return int(make_env_cfg(cfg).scene.model_factory().opt.iterations)


@cold_path
def format_eval_table(result: dict[str, Any]) -> str:
    """The console table of an ``evaluate_run`` result."""
    from trainrt.managers.base import format_table

    title = (
        f"eval {result['algo']}/{result['task']} iteration {result['iteration']} on {result['sim']} "
        f"(trained on {result['trained_sim']})"
    )
    # eval JSONs written before the solver limits were recorded (trainrt report reads them) lack both keys
    evaluated, trained = result.get("solver_iterations"), result.get("trained_solver_iterations")
    if evaluated != trained:
        title += f", solver iterations {evaluated} (trained with {trained})"
    if "commands" in result:
        header = ["command", "vx", "vy", "wz", "fell", "lin vel err m/s", "yaw rate err rad/s",
                  "mean vx, vy, wz", "saturated", "ep len"]  # fmt: skip
        rows = [
            [
                name,
                r["command"]["lin_vel_x"],
                r["command"]["lin_vel_y"],
                r["command"]["ang_vel_z"],
                f"{r['failed_fraction']:.3f}",
                f"{r['lin_vel_error_xy']:.3f}",
                f"{r['ang_vel_error_z']:.3f}",
                f"{r['mean_lin_vel_x']:+.2f}, {r['mean_lin_vel_y']:+.2f}, {r['mean_ang_vel_z']:+.2f}",
                f"{r['action_saturation']:.3f}",
                f"{r['mean_episode_length']:.0f}/{r.get('horizon_steps', r['steps'])}",
            ]
            for name, r in result["commands"].items()
        ]
    else:
        r = result["tracking"]
        header = ["clip", "completed", "fell", "body pos err m", "anchor pos err m", "anchor ori err rad",
                  "joint pos err rad (norm)", "saturated", "ep len"]  # fmt: skip
        rows = [
            [
                Path(result["clip"]["motion_file"]).name,
                f"{r['completed_fraction']:.3f}",
                f"{r['failed_fraction']:.3f}",
                f"{r['body_pos_error']:.4f}",
                f"{r['anchor_pos_error']:.4f}",
                f"{r['anchor_ori_error']:.4f}",
                f"{r['joint_pos_error']:.4f}",
                f"{r['action_saturation']:.3f}",
                f"{r['mean_episode_length']:.0f}/{r.get('horizon_steps', r['steps'])}",
            ]
        ]
    return format_table(title, header, rows)
