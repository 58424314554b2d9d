"""``trainrt train``: one run, or ``--gpus N`` data-parallel ranks of it."""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING, Annotated

import typer

from trainrt.cli.common import (
    EXIT_FAILED,
    EXIT_HANGUP,
    EXIT_INTERRUPTED,
    EXIT_TERMINATED,
    EXIT_USAGE,
    AlgoOpt,
    CliState,
    OverridesArg,
    PresetChoice,
    Sim,
    TaskOpt,
    app,
    fail,
    resolve_command_line,
    usage_errors,
)

if TYPE_CHECKING:
    from trainrt.config import TrainConfig


CPU_THREADS_NOTE = (
    "torch CPU threads: 1 per process (two runs, or a run and an eval, would otherwise share the cores "
    "thread against thread); set OMP_NUM_THREADS=N for more"
)
"""What ``train`` says at start-up when it chose one torch CPU thread for the process."""


@app.command()
def train(
    algo: AlgoOpt = None,
    task: TaskOpt = None,
    sim: Annotated[
        Sim | None,
        typer.Option(
            help="physics backend; mjwarp uses CUDA when present, else Warp's CPU device "
            "(default: mjwarp, or mujoco for the CPU demo)"
        ),
    ] = None,
    preset_choice: Annotated[
        PresetChoice,
        typer.Option(
            "--preset", help="base settings: auto = canonical with CUDA, the small CPU demo without"
        ),
    ] = PresetChoice.auto,
    gpus: Annotated[
        int,
        typer.Option(
            min=1,
            help="ranks, one process per GPU (data-parallel, torch.distributed with NCCL); without CUDA, "
            "that many CPU processes with gloo. torchrun launches (WORLD_SIZE set) need no --gpus",
        ),
    ] = 1,
    overrides: OverridesArg = None,
) -> None:
    """Train ALGO on TASK; writes the run directory (config, checkpoints, run_summary.json, TensorBoard)."""
    import os

    cfg, resolution = resolve_command_line(algo, task, sim, list(overrides or []), preset_choice)
    if gpus > 1:
        if "WORLD_SIZE" in os.environ:
            raise fail(
                f"--gpus {gpus} inside a launched rank (WORLD_SIZE={os.environ['WORLD_SIZE']}): use one"
            )
        _launch_ranks(sim, preset_choice, list(overrides or []), gpus, cfg)
    if resolution["preset"] == "cpu-demo" and os.environ.get("RANK", "0") == "0":
        typer.echo(
            "=" * 78 + "\n"
            f"No CUDA device: using the small CPU demo configuration ({cfg.algo.num_envs} envs, small networks,\n"
            f"{cfg.sim.backend} on the CPU). It shows training progress; it is not the canonical workload and\n"
            "not a throughput measurement. Pass --preset canonical for the 2048-env settings.\n" + "=" * 78
        )
    if CliState.one_cpu_thread and os.environ.get("RANK", "0") == "0":
        typer.echo(CPU_THREADS_NOTE)
    from trainrt.runner import OffPolicyRunner
    from trainrt.runner.failures import ExpectedRunFailure, ignore_file_size_signal
    from trainrt.runner.off_policy_runner import RunInterrupted

    ignore_file_size_signal()  # a file-size limit fails a write with one line, rather than killing the run
    # a run directory or training.resume that cannot be used
    with usage_errors(ValueError, FileNotFoundError):
        runner = OffPolicyRunner(cfg, manifest=resolution)
    try:
        runner.run()
    except RunInterrupted as err:
        typer.echo(f"interrupted by {err.signal_name}; summary: {runner.summary_path}", err=True)
        raise typer.Exit(err.exit_code) from None
    except KeyboardInterrupt:
        typer.echo(f"interrupted; summary: {runner.summary_path}", err=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except ExpectedRunFailure as err:
        if CliState.debug:
            traceback.print_exc()
        # a run whose disk refused every write may have no summary to point at
        summary = f"\nsummary: {runner.summary_path}" if runner.summary_path.is_file() else ""
        typer.echo(f"training failed: {err}{summary}", err=True)
        raise typer.Exit(EXIT_FAILED) from None
    except Exception as err:
        traceback.print_exc()
        typer.echo(f"training failed: {type(err).__name__}: {err}\nsummary: {runner.summary_path}", err=True)
        raise typer.Exit(EXIT_FAILED) from None


def _launch_ranks(
    sim: Sim | None,
    preset_choice: PresetChoice,
    overrides: list[str],
    gpus: int,
    cfg: TrainConfig,
) -> None:
    """Run this ``train`` command as ``gpus`` ranks (``trainrt.runner.launcher``) and exit with their code."""
    import torch

    from trainrt.config.resolve import check_rank_count
    from trainrt.runner.build import resolve_device
    from trainrt.runner.launcher import launch_ranks

    with usage_errors(ValueError):
        check_rank_count(cfg, gpus)
    if resolve_device(cfg).startswith("cuda"):
        available = torch.cuda.device_count()
        if gpus > available:
            raise fail(f"--gpus {gpus} but {available} CUDA device(s) are visible")
    else:
        typer.echo(f"note: no CUDA device for this run; --gpus {gpus} starts {gpus} CPU processes (gloo)")
    args = ["--algo", cfg.algo.name, "--task", cfg.task.name, "--preset", preset_choice.value]
    if sim is not None:
        args += ["--sim", sim.value]
    code = launch_ranks([*args, *overrides], gpus)
    if code in (0, EXIT_USAGE, EXIT_INTERRUPTED, EXIT_TERMINATED, EXIT_HANGUP):
        raise typer.Exit(code)
    typer.echo(f"training failed: a rank exited with code {code}", err=True)
    raise typer.Exit(EXIT_FAILED)
