"""The rough walk's evaluation: each terrain type at its middle level, fixed forward commands, pushes off.

One block of rows per (terrain type, command) pair: every row of a block starts on a tile of that type at the
grid's middle level (``num_levels // 2``; the block's rows spread over the type's columns), with the command
``forward_0.5`` or ``forward_1.0`` pinned after the reset, for ``ROUGH_EVAL_HORIZON_S`` = 20 s (one
training episode). Per block: the walk's metrics (fell, linear and yaw-rate errors, achieved velocities);
per terrain type: the fraction of rows that fell over both commands; and the mean linear velocity error on
flat ground (the ``flat`` type's blocks).

20 s at 1 m/s is 20 m, more than two tiles, so the walk stays on its type and level by the grid it runs on:
the run's grid drawn again with every row like the middle level (``difficulty_range`` =
``TerrainGridCfg.level_difficulties(num_levels // 2)``), and every env facing along its column (yaw
``ALONG_COLUMN_YAW``: +y, across rows), so that it crosses tiles of its own type at that difficulty, not the
neighbouring columns' types or the harder rows above.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.runner.evaluation_spec import EvalScenario, EvaluationSpec, with_task_changes
from trainrt.tasks.velocity.evaluation import _assign_scenario_commands, walk_eval_config, walk_spec

ROUGH_EVAL_COMMANDS: dict[str, tuple[float, float, float]] = {
    "forward_0.5": (0.5, 0.0, 0.0),
    "forward_1.0": (1.0, 0.0, 0.0),
}
"""Rough walk evaluation commands: name -> (lin_vel_x m/s, lin_vel_y m/s, ang_vel_z rad/s), root frame."""

ROUGH_EVAL_HORIZON_S = 20.0
"""Simulated seconds of a rough walk rollout: one training episode."""

ALONG_COLUMN_YAW = math.pi / 2
"""Every evaluated env's heading after its reset: facing +y, along its tile column (rows run along y)."""


@cold_path
def rough_walk_eval_config(cfg: Any) -> Any:
    """The run config of the rough walk's evaluation: the walk's (``walk_eval_config``: commands pinned, pushes
    off), every grid row drawn like the run grid's middle level, every env facing along its column."""
    from trainrt.tasks import make_task_cfg

    grid = make_task_cfg(cfg.task).scene.terrain
    if grid is None:
        raise ValueError("the rough walk evaluation needs a task with SceneCfg.terrain")
    band = list(grid.level_difficulties(grid.num_rows // 2))
    heading = {"params": {"pose_range": {"yaw": [ALONG_COLUMN_YAW, ALONG_COLUMN_YAW]}}}
    return with_task_changes(
        walk_eval_config(cfg, (0.0, 0.0, 0.0)),
        {"terrain": {"difficulty_range": band}, "events": {"reset_base": heading}},
    )


def _scenarios(types: Sequence[str]) -> tuple[EvalScenario, ...]:
    return tuple(
        EvalScenario(
            f"{terrain}/{name}",
            {"terrain": terrain, "command": {"lin_vel_x": vx, "lin_vel_y": vy, "ang_vel_z": wz}},
        )
        for terrain in types
        for name, (vx, vy, wz) in ROUGH_EVAL_COMMANDS.items()
    )


@cold_path
def place_on_terrain(env: Any, scenarios: Sequence[EvalScenario], rows: int) -> None:
    """Put each scenario's block of ``rows`` rows on its terrain type's tiles at the middle level, reset every
    row there, then pin the commands (``assign_walk_commands``)."""
    terrain = env.terrain
    if terrain is None:
        raise ValueError("the rough walk evaluation needs a task with SceneCfg.terrain")
    columns = []
    for scenario in scenarios:
        of_type = terrain.columns_of(scenario.facts["terrain"])
        columns += [of_type[k % len(of_type)] for k in range(rows)]
    device = terrain.curriculum.levels.device
    middle = torch.full((env.num_envs,), terrain.num_levels // 2, dtype=torch.long, device=device)
    terrain.assign_tiles(middle, torch.tensor(columns, dtype=torch.long, device=device))
    env.reset()  # rows that have not stepped keep their level (TerrainLevels), so they start on these tiles
    _assign_scenario_commands(env, scenarios, rows)


def _result(env: Any, horizon: int, rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    by_type: dict[str, list[dict[str, Any]]] = {}
    for row in rows.values():
        by_type.setdefault(row["terrain"], []).append(row)
    terrain = {
        name: {
            "level": env.terrain.num_levels // 2,
            "failed_fraction": sum(r["failed_fraction"] for r in found) / len(found),
        }
        for name, found in by_type.items()
    }
    flat = by_type.get("flat", [])
    return {
        "horizon_s": horizon * env.step_dt,
        "grid": env.terrain.describe(),
        "terrain": terrain,
        "flat_lin_vel_error_xy": sum(r["lin_vel_error_xy"] for r in flat) / len(flat) if flat else None,
        "commands": rows,
    }


def rough_walk_evaluation() -> EvaluationSpec:
    """The ``EvaluationSpec`` of a rough velocity-tracking task on ``ROUGH_TERRAIN`` (``g1_walk_rough``)."""
    from trainrt.tasks.velocity.rough_env_cfg import ROUGH_TERRAIN

    return walk_spec(
        _scenarios(tuple(name for name, cfg in ROUGH_TERRAIN.types.items() if cfg.proportion > 0)),
        horizon_s=ROUGH_EVAL_HORIZON_S,
        scenario_help="terrain/command scenario names",
        setup=place_on_terrain,
        result=_result,
        config=rough_walk_eval_config,
    )
