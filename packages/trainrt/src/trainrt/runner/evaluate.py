"""``trainrt eval``: the deterministic evaluation of a run's checkpoint, the number users, docs and tests quote.

The run's env is rebuilt from its ``config.json`` (the same Manager-based env it trained on) with the
evaluation's changes applied through the task-override mechanism (``TaskSection``), and the actor acts
deterministically. What is evaluated is the task's own: its registration (``trainrt.tasks.registry``) names
an ``EvaluationSpec`` (``trainrt.runner.evaluation_spec``) with the config changes, the scenarios (one block
of rows each, all in one env and one rollout), the metrics and the horizon; e.g. the walk runs every fixed
command for 10 s (``tasks/velocity/evaluation.py``), the tracking task the whole clip from its first
frame (``tasks/tracking/evaluation.py``).

Every evaluation reports ``failed_fraction``, ``completed_fraction``, ``mean_episode_length`` and ``action_saturation``: the mean fraction of the policy's action components at the ends of the
tanh range (``|a| >= ACTION_SATURATION_LEVEL``), where the action map pins targets at their bounds and the
policy's gradient vanishes.

An evaluation whose spec sets ``per_second`` (tracking's) also records, per scenario, each metric and the
fraction of rows still running over every second of the rollout (the row's ``per_second``, which ``trainrt
report`` draws). On CUDA the rollout step is replayed as one CUDA graph (``simcore.CapturedWork``, eager
elsewhere).
Results go to the console as a table and to ``<run_dir>/eval/eval_<iteration>.json`` (or ``out``).

``onnx=`` (``trainrt eval --onnx PATH``) evaluates an exported ONNX policy instead of a checkpoint: the same env,
scenarios and metrics, with the actions onnxruntime computes from the file on the CPU
(``trainrt.runner.onnx_policy``; the rollout runs eagerly), after checking that the file fits the run. Its
results record ``"policy": "onnx:<path>"`` and go to ``eval/eval_onnx_<iteration>.json``, beside the
checkpoint's evaluation.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from trainrt.config import TrainConfig
from trainrt.config.run_config import for_rollout, load_resolved_config
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

EVAL_DIR_NAME = "eval"
ONNX_EVAL_PREFIX = "eval_onnx_"
"""File name prefix of an ONNX policy's evaluation (``eval_onnx_<iteration>.json``; a checkpoint's is ``eval_``)."""
_DONE_CHECK_EVERY = 50  # control steps between the (synchronizing) checks for "every row is done"


class _RolloutStep:
    """One deterministic control step of an evaluation rollout with per-row accumulators (persistent buffers).

    ``step`` is sync-free and touches only buffers that exist before it runs, so ``simcore.CapturedWork`` can
    record it as a CUDA graph; on CPU (or when capture is refused) the same callable runs eagerly.
    """

    def __init__(
        self,
        env: Any,
        agent: Any,
        metrics: dict[str, Callable[[Any], torch.Tensor]],
        *,
        bins: int = 0,
        bin_steps: int = 1,
    ) -> None:
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
        # per-second results (bins > 0): each metric's sum and the running rows per bin of bin_steps steps
        self.bins, self.bin_steps = bins, bin_steps
        self.bin_sums = torch.zeros((len(metrics), max(bins, 1), n), dtype=torch.float64, device=device)
        self.bin_samples = torch.zeros((max(bins, 1), n), dtype=torch.float64, device=device)

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
        values = [metric(self.env).double() * weight for metric in self.metrics.values()]
        for name, value in zip(self.metrics, values):
            self.sums[name].add_(value)
        self.samples.add_(weight)
        if self.bins:  # the bin of this step, as a device index: no host sync, the same graph every step
            at = ((self.steps_taken - 1) // self.bin_steps).clamp_(max=self.bins - 1).reshape(1)
            self.bin_samples.index_add_(0, at, weight.unsqueeze(0))
            if values:
                self.bin_sums.index_add_(1, at, torch.stack(values).unsqueeze(1))


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
    per_second: bool = False,
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
    the steps where its row was still running after the step. ``per_second``: also ``per_second``, the same
    over each second of simulated time (see ``_per_second``).
    """
    import simcore

    n = env.num_envs
    if groups < 1 or n % groups:
        raise ValueError(f"num_envs={n} does not split into {groups} equal groups")
    bin_steps = max(1, round(1.0 / env.step_dt))
    bins = math.ceil(num_steps / bin_steps) if per_second else 0
    rollout = _RolloutStep(env, agent, metrics, bins=bins, bin_steps=bin_steps)
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
    if bins:
        for row, seconds in zip(out, _per_second(rollout, env.step_dt, num_steps, groups)):
            row["per_second"] = seconds
    return out


@cold_path
def _per_second(rollout: _RolloutStep, step_dt: float, num_steps: int, groups: int) -> list[dict[str, Any]]:
    """Per group, over each second of the rollout (``bin_steps`` control steps; the last bin may be shorter):
    ``t_s`` (the bin's start, s), ``running_fraction`` (the group's rows still running, averaged over the
    bin's steps) and each metric's mean over the running rows' steps of the bin (None where none ran)."""
    bins, bin_steps = rollout.bins, rollout.bin_steps
    rows = rollout.bin_samples.shape[1] // groups
    samples = rollout.bin_samples.reshape(bins, groups, rows).sum(dim=2).cpu()
    sums = rollout.bin_sums.reshape(len(rollout.metrics), bins, groups, rows).sum(dim=3).cpu()
    lengths = [min(bin_steps, num_steps - b * bin_steps) for b in range(bins)]
    out = []
    for g in range(groups):
        seconds: dict[str, Any] = {
            "t_s": [b * bin_steps * step_dt for b in range(bins)],
            "running_fraction": [float(samples[b, g]) / (rows * lengths[b]) for b in range(bins)],
        }
        for i, name in enumerate(rollout.metrics):
            seconds[name] = [
                float(sums[i, b, g] / samples[b, g]) if float(samples[b, g]) > 0 else None
                for b in range(bins)
            ]
        out.append(seconds)
    return out


ROW_BOOKKEEPING = frozenset(
    ("failed_fraction", "completed_fraction", "mean_episode_length", "steps", "horizon_steps", "num_envs",
     "graph_enabled", "per_second")
)  # fmt: skip
"""Keys of every ``_rollout`` row that are not metrics."""

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
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device, learns=False)
    load_run_weights(state, agent, cfg, dict(env.obs_dims), action="cannot evaluate")
    return agent


@cold_path
def evaluate_task(
    cfg: TrainConfig,
    state: dict[str, Any],
    *,
    num_envs: int,
    steps: int | None,
    scenarios: Sequence[str] | None = None,
    options: Mapping[str, Any] | None = None,
    use_graph: bool = True,
    log: Callable[[str], None] = print,
    policy: Callable[[Any], Any] | None = None,
) -> dict[str, Any]:
    """Run the evaluation ``cfg``'s task registers; returns its JSON body.

    All selected scenarios (``scenarios`` by name, default all) run in one env of ``num_envs`` rows per
    scenario and one rollout of ``steps`` control steps (default: the spec's horizon under ``options``).
    The actor is the checkpoint ``state``'s, or ``policy(env)`` (an object with ``act(obs, deterministic=True)``,
    e.g. a checked ``OnnxPolicy``) when given.
    """
    from trainrt.tasks.registry import task_spec

    spec = task_spec(cfg.task.name).evaluation_spec()
    chosen = spec.select(scenarios)
    metrics = {**spec.metrics, "action_saturation": action_saturation}
    names = ", ".join(scenario.name for scenario in chosen)
    log(f"eval: {cfg.task.name} on {cfg.sim.backend}, {num_envs} envs for each of {len(chosen)}: {names}")
    env = build_env(spec.config(cfg), num_envs=num_envs * len(chosen))
    agent = _load_agent(cfg, env, state) if policy is None else policy(env)
    horizon = steps if steps is not None else spec.horizon(env, dict(options or {}))
    log(f"eval: one rollout of {horizon} control steps ({horizon * env.step_dt:.1f} s simulated)")
    setup = spec.setup
    rows = _rollout(
        env,
        agent,
        horizon,
        metrics,
        groups=len(chosen),
        before_first_step=None if setup is None else (lambda env: setup(env, chosen, num_envs)),
        use_graph=use_graph,
        per_second=spec.per_second,
    )
    results: dict[str, Any] = {}
    for scenario, row in zip(chosen, rows):
        results[scenario.name] = {**scenario.facts, **row}
    if spec.result is None:
        return {"scenarios": results}
    return spec.result(env, horizon, results)


@cold_path
def _evaluation_options(task: str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The options given (not None) that the task's evaluation takes; ValueError naming those it takes."""
    from trainrt.tasks.registry import task_spec

    spec = task_spec(task).evaluation_spec()
    given = {name: value for name, value in given.items() if value is not None}
    for name in given:
        if name not in spec.options:
            takes = ", ".join(spec.options) or "none"
            raise ValueError(
                f"{name}: the evaluation of task {task!r} takes no such option (it takes: {takes})"
            )
    return given


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
    onnx: str | os.PathLike | None = None,
) -> dict[str, Any]:
    """Evaluate a run's checkpoint (or its exported ONNX policy) deterministically; write the JSON; return it.

    Args:
        run_dir: a directory written by ``trainrt train``.
        checkpoint: None (newest), an iteration number, or a checkpoint file.
        sim: backend to evaluate on (default the run's); ``mujoco`` for a sim-to-sim check of an mjwarp run.
        num_envs: rows per scenario of the task's evaluation (e.g. per walk command).
        steps: control steps per rollout (default: the evaluation's horizon, e.g. walk ``horizon_s``, the
            whole clip for tracking).
        commands: scenario names, for an evaluation that takes them (the walk's commands; default all).
        horizon_s: rollout length in simulated seconds, for an evaluation that takes it (the walk's;
            ``steps`` takes precedence).
        solver_iterations: the constraint solver's iteration limit of the evaluation (default the run's
            ``sim.solver_iterations``): a policy trained with fewer iterations checked under the model's own.
        out: JSON path (default ``<run_dir>/eval/eval_<iteration>.json``; with ``onnx``,
            ``eval_onnx_<iteration>.json``, the iteration from the file's metadata, else ``eval_onnx_<stem>``).
        use_graph: on CUDA, replay the rollout step as a CUDA graph (False: eager, same results).
        log: where progress lines go.
        motion_file: the run's motion clip at another place (default: where the run's config says).
        onnx: an exported ONNX policy (usually ``<run_dir>/policy.onnx``) to evaluate with onnxruntime on the
            CPU instead of a checkpoint (``checkpoint`` must then be None); FileNotFoundError or ValueError with
            the fix when it is missing, onnxruntime is not installed or it does not fit the run.
    """
    if num_envs < 1:
        raise ValueError(f"num_envs must be >= 1, got {num_envs}")
    if steps is not None and steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if solver_iterations is not None and solver_iterations < 1:
        raise ValueError(f"solver_iterations must be >= 1, got {solver_iterations}")
    from trainrt.tasks.registry import task_spec

    trained = load_resolved_config(run_dir, motion_file=motion_file)
    cfg = for_rollout(trained, sim=sim, solver_iterations=solver_iterations)
    policy: Callable[[Any], Any] | None = None
    if onnx is None:
        state = load_run_checkpoint(
            run_dir, checkpoint, map_location=resolve_device(cfg), require=POLICY_CHECKPOINT_KEYS
        )
        evaluated, default_name = f"checkpoint:{state['path']}", f"eval_{state['iteration']}.json"
    else:
        if checkpoint is not None:
            raise ValueError(
                "an ONNX evaluation runs the file's policy, not a checkpoint: give --onnx or --checkpoint"
            )
        onnx_policy, policy = _onnx_actor(run_dir, onnx, cfg)
        state = {"path": None, "iteration": onnx_policy.iteration}
        use_graph = False  # each step copies the observations to onnxruntime's host arrays
        evaluated = f"onnx:{onnx_policy.path}"
        label = onnx_policy.iteration if onnx_policy.iteration is not None else onnx_policy.path.stem
        default_name = f"{ONNX_EVAL_PREFIX}{label}.json"
    options = _evaluation_options(cfg.task.name, {"commands": commands, "horizon_s": horizon_s})
    spec = task_spec(cfg.task.name).evaluation_spec()
    body = evaluate_task(
        cfg,
        state,
        num_envs=num_envs,
        steps=steps,
        scenarios=options.pop(spec.scenario_option, None) if spec.scenario_option else None,
        options=options,
        use_graph=use_graph,
        log=log,
        policy=policy,
    )
    result = {
        "run_dir": str(run_dir),
        "policy": evaluated,
        "checkpoint": None if state["path"] is None else str(state["path"]),
        "iteration": None if state["iteration"] is None else int(state["iteration"]),
        "algo": cfg.algo.name,
        "task": cfg.task.name,
        "sim": cfg.sim.backend,
        "trained_sim": trained.sim.backend,
        "solver_iterations": _solver_iterations(cfg),
        "trained_solver_iterations": _solver_iterations(trained),
        "num_envs": num_envs,
        **body,
    }
    target = Path(out) if out is not None else Path(run_dir) / EVAL_DIR_NAME / default_name
    target.parent.mkdir(parents=True, exist_ok=True)
    replaced = target.is_file()
    atomic_write_text(target, json.dumps(result, indent=2) + "\n")
    result["json_path"] = str(target)
    result["replaced"] = replaced
    return result


@cold_path
def _onnx_actor(
    run_dir: str | os.PathLike, onnx: str | os.PathLike, cfg: TrainConfig
) -> tuple[Any, Callable[[Any], Any]]:
    """The ONNX policy at ``onnx`` (loaded: a missing file or onnxruntime fails here, before any env is built) and
    the ``policy(env)`` that checks it against the run's env before the rollout."""
    from trainrt.runner.onnx_policy import OnnxPolicy

    onnx_policy = OnnxPolicy(onnx, export_fix=f"trainrt export {run_dir}")
    fix = f"export this run's policy with `trainrt export {run_dir}` and evaluate that file"

    def checked(env: Any) -> Any:
        onnx_policy.check_matches(env, task=cfg.task.name, obs_group=cfg.algo.params.actor_obs_group, fix=fix)
        return onnx_policy

    return onnx_policy, checked


@cold_path
def _solver_iterations(cfg: TrainConfig) -> int:
    """The constraint solver's iteration limit the models of ``cfg``'s scene carry (the sim section's, or the
    task model's own)."""
    return int(make_env_cfg(cfg).scene.model_factory().opt.iterations)


@cold_path
def format_eval_table(result: dict[str, Any]) -> str:
    """The console table of an ``evaluate_run`` result."""
    from trainrt.managers.base import format_table

    evaluated = str(result.get("policy", ""))  # eval JSONs written before the policy was recorded lack it
    onnx = f" ONNX {Path(evaluated.removeprefix('onnx:')).name}" if evaluated.startswith("onnx:") else ""
    # an ONNX file without metadata has no iteration
    iteration = "" if result["iteration"] is None else f" iteration {result['iteration']}"
    title = (
        f"eval {result['algo']}/{result['task']}{onnx}{',' if onnx and iteration else ''}{iteration} "
        f"on {result['sim']} (trained on {result['trained_sim']})"
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
    elif "scenarios" in result:
        metrics = [k for k in next(iter(result["scenarios"].values()), {}) if k not in ROW_BOOKKEEPING]
        header = ["scenario", "fell", "completed", *metrics, "ep len"]
        rows = [
            [
                name,
                f"{r['failed_fraction']:.3f}",
                f"{r['completed_fraction']:.3f}",
                *(f"{r[k]:.4f}" if isinstance(r[k], float) else str(r[k]) for k in metrics),
                f"{r['mean_episode_length']:.0f}/{r.get('horizon_steps', r['steps'])}",
            ]
            for name, r in result["scenarios"].items()
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
    table = format_table(title, header, rows)
    if "terrain" in result:  # a rough walk: falls per terrain type over its commands, and flat ground's error
        flat = result.get("flat_lin_vel_error_xy")
        by_type = [[name, r["level"], f"{r['failed_fraction']:.3f}"] for name, r in result["terrain"].items()]
        band = result.get("grid", {}).get("difficulty_range")  # every row of the grid drawn like that level
        title = (
            "per terrain type"
            + (f", every row at difficulty {band[0]:.2f}-{band[1]:.2f}" if band else "")
            + (f" (flat ground: lin vel err {flat:.3f} m/s)" if flat is not None else "")
        )
        table += "\n" + format_table(title, ["terrain", "level", "fell"], by_type)
    return table
