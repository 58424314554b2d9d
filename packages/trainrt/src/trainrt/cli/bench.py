"""``trainrt bench``: diagnostic timings of the physics, the collector and the learner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trainrt.cli.common import (
    Algo,
    BenchTarget,
    OverridesArg,
    PresetChoice,
    Sim,
    app,
    check_output_file,
    resolve_command_line,
    usage_errors,
)
from trainrt.tasks.registry import DEFAULT_TASK, task_names


@app.command()
def bench(
    target: Annotated[BenchTarget, typer.Argument(help="what to time")] = BenchTarget.all,
    algo: Annotated[Algo, typer.Option(help="learner (collector/learner benches)")] = Algo.sac,
    task: Annotated[
        str, typer.Option(help=f"task (collector/learner benches), one of: {', '.join(task_names())}")
    ] = DEFAULT_TASK,
    sim: Annotated[Sim, typer.Option(help="physics backend")] = Sim.mjwarp,
    num_envs: Annotated[int | None, typer.Option(min=1, help="envs (default: the preset's)")] = None,
    steps: Annotated[int, typer.Option(min=1, help="timed repetitions")] = 50,
    preset_choice: Annotated[
        PresetChoice, typer.Option("--preset", help="base settings")
    ] = PresetChoice.auto,
    output: Annotated[Path | None, typer.Option(help="also write the results as JSON here")] = None,
    overrides: OverridesArg = None,
) -> None:
    """DIAGNOSTIC benchmarks (physics eager vs graph, collector-only, learner-only); not the acceptance number."""
    from trainrt.runner.bench import run_benchmarks
    from trainrt.runner.failures import ExpectedRunFailure

    check_output_file(output, "--output", "bench.json")
    extra = list(overrides or [])
    if num_envs is not None:
        extra.append(f"algo.num_envs={num_envs}")
    cfg, _ = resolve_command_line(algo, task, sim, extra, preset_choice)
    with usage_errors(ExpectedRunFailure):  # e.g. a replay that does not fit on the GPU
        results = run_benchmarks(cfg, target.value, steps=steps, log=typer.echo)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2) + "\n")
        typer.echo(f"wrote {output}")
