"""The rough walk's evaluation: each terrain type at its middle level, fixed forward commands, pushes off.

One block of rows per (terrain type, command) pair: every row of a block starts on a tile of that type at the
grid's middle level (``num_levels // 2``; the block's rows spread over the type's columns), with the command
``forward_0.5`` or ``forward_1.0`` pinned after the reset, for ``ROUGH_EVAL_HORIZON_S`` = 20 s (one
training episode). Per block: the walk's metrics (fell, linear and yaw-rate errors, achieved velocities);
per terrain type: the fraction of rows that fell over both commands; and the mean linear velocity error on
flat ground (the ``flat`` type's blocks).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.runner.evaluation_spec import EvalScenario, EvaluationSpec
from trainrt.tasks.velocity.evaluation import _assign_scenario_commands, walk_spec

ROUGH_EVAL_COMMANDS: dict[str, tuple[float, float, float]] = {
    "forward_0.5": (0.5, 0.0, 0.0),
    "forward_1.0": (1.0, 0.0, 0.0),
}
"""Rough walk evaluation commands: name -> (lin_vel_x m/s, lin_vel_y m/s, ang_vel_z rad/s), root frame."""

ROUGH_EVAL_HORIZON_S = 20.0
"""Simulated seconds of a rough walk rollout: one training episode."""


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
    )
