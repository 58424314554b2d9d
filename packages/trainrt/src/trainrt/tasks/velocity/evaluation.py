"""The velocity task's evaluation: every fixed command of ``WALK_EVAL_COMMANDS`` at once.

One block of rows per command (no heading or standing rows, no resampling, pushes off; each row's command
assigned after the reset), one rollout of ``WALK_EVAL_HORIZON_S`` = 10 s of simulated time (``horizon_s``,
or ``steps`` control steps; at most one episode). Per command: the fraction of rows that fell, the mean
linear (xy) and yaw-rate errors, and the mean achieved (signed) forward, lateral and yaw velocities over the
steps they were up.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.runner.evaluation_spec import NEVER_S, EvalScenario, EvaluationSpec, with_task_changes

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


@cold_path
def walk_eval_config(cfg: Any, command: tuple[float, float, float]) -> Any:
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
    return with_task_changes(
        cfg, {"commands": {"twist": twist}, "events": {"push_robot": {"enabled": False}}}
    )


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


def _assign_scenario_commands(env: Any, scenarios: Sequence[EvalScenario], rows: int) -> None:
    commands = [[s.facts["command"][k] for k in ("lin_vel_x", "lin_vel_y", "ang_vel_z")] for s in scenarios]
    assign_walk_commands(env, torch.tensor(commands).repeat_interleave(rows, dim=0))


def walk_spec(
    scenarios: tuple[EvalScenario, ...],
    *,
    horizon_s: float,
    scenario_help: str,
    setup: Callable[[Any, Sequence[EvalScenario], int], None],
    result: Callable[[Any, int, dict[str, dict[str, Any]]], dict[str, Any]],
    config: Callable[[Any], Any] | None = None,
) -> EvaluationSpec:
    """A walk's ``EvaluationSpec`` over ``scenarios``: the twist command pinned and pushes off
    (``walk_eval_config``; ``config``, when given, builds the evaluation's run config instead), the walk's
    metrics, one rollout of ``horizon_s`` simulated seconds unless the ``horizon_s`` option says
    otherwise (at most one episode), and the ``commands`` option choosing scenarios by name (``scenario_help``
    says what the names are). ``setup`` and ``result`` as in ``EvaluationSpec``."""
    from trainrt import mdp

    return EvaluationSpec(
        config=config or (lambda cfg: walk_eval_config(cfg, (0.0, 0.0, 0.0))),
        scenarios=scenarios,
        metrics={
            "lin_vel_error_xy": lambda env: mdp.lin_vel_error_xy(env, command_name="twist"),
            "ang_vel_error_z": lambda env: mdp.ang_vel_error_z(env, command_name="twist"),
            # the achieved velocities (root frame), signed: a steady turn and a yaw jitter have the same error
            "mean_lin_vel_x": lambda env: env.robot.root_lin_vel_b[:, 0],
            "mean_lin_vel_y": lambda env: env.robot.root_lin_vel_b[:, 1],
            "mean_ang_vel_z": lambda env: env.robot.root_ang_vel_b[:, 2],
        },
        horizon=lambda env, options: walk_horizon_steps(env, options.get("horizon_s", horizon_s)),
        options={
            "commands": f"{scenario_help} (default all: {', '.join(s.name for s in scenarios)})",
            "horizon_s": f"simulated seconds per rollout (default {horizon_s:g}, at most one episode)",
        },
        scenario_option="commands",
        setup=setup,
        result=result,
    )


def walk_evaluation() -> EvaluationSpec:
    """The ``EvaluationSpec`` of a velocity-tracking task with a ``twist`` command (``g1_walk_flat``)."""
    return walk_spec(
        tuple(
            EvalScenario(name, {"command": {"lin_vel_x": vx, "lin_vel_y": vy, "ang_vel_z": wz}})
            for name, (vx, vy, wz) in WALK_EVAL_COMMANDS.items()
        ),
        horizon_s=WALK_EVAL_HORIZON_S,
        scenario_help="walk command names",
        setup=_assign_scenario_commands,
        result=lambda env, horizon, rows: {"horizon_s": horizon * env.step_dt, "commands": rows},
    )
