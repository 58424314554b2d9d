"""What every ``trainrt`` command shares: the Typer app and its global options, exit codes, the option types,
and how an expected error becomes one ``error: ...`` line.

Heavy imports (torch, the env, the backends) happen inside the commands, so ``trainrt --help`` is quick. How a
command line becomes a config lives in ``trainrt.config`` (``resolve_train_config``, ``rollout_config``); the
commands parse, call it and print.
"""

from __future__ import annotations

import contextlib
import enum
import os
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainrt.tasks.registry import DEFAULT_ALGO, DEFAULT_TASK, task_names

if TYPE_CHECKING:
    from trainrt.config import TrainConfig


app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="trainrt: off-policy RL (SAC, FlashSAC) for the Unitree G1 on simcore (MuJoCo / MuJoCo Warp).",
)

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130
# 128 + the signal number, as shells report a process ended by a signal.
EXIT_TERMINATED = 143
EXIT_HANGUP = 129


class CliState:
    """Global options of the command line (``trainrt --debug ...``)."""

    debug = False
    one_cpu_thread = False  # main() chose one torch CPU thread (OMP_NUM_THREADS was not set)


@app.callback()
def _global_options(
    debug: Annotated[
        bool, typer.Option("--debug", help="print the full traceback of every error, also expected ones")
    ] = False,
) -> None:
    """trainrt: off-policy RL (SAC, FlashSAC) for the Unitree G1 on simcore (MuJoCo / MuJoCo Warp)."""
    CliState.debug = debug


class Algo(enum.StrEnum):
    """``--algo`` choices."""

    sac = "sac"
    flashsac = "flashsac"


class Sim(enum.StrEnum):
    """``--sim`` choices."""

    mjwarp = "mjwarp"
    mujoco = "mujoco"


class PresetChoice(enum.StrEnum):
    """``--preset`` choices: canonical (GPU settings), cpu-demo (small), auto (canonical iff CUDA)."""

    auto = "auto"
    canonical = "canonical"
    cpu_demo = "cpu-demo"


class BenchTarget(enum.StrEnum):
    """``trainrt bench`` targets."""

    physics = "physics"
    collector = "collector"
    learner = "learner"
    all = "all"


class Renderer(enum.StrEnum):
    """``--renderer`` choices (``trainrt.viz.render.RENDERER_CHOICES``)."""

    auto = "auto"
    egl = "egl"
    osmesa = "osmesa"
    software = "software"


OverridesArg = Annotated[
    list[str] | None,
    typer.Argument(
        help="dotted key=value overrides, e.g. algo.num_envs=2048 training.final_eval=false",
        show_default=False,
    ),
]
AlgoOpt = Annotated[
    Algo | None,
    typer.Option(help=f"learner (default: {DEFAULT_ALGO}, or the resumed run's with training.resume)"),
]
# Registered tasks (trainrt.tasks.registry; listing them imports no torch); a task's own module is loaded with
# $TRAINRT_TASK_MODULES. The name is checked where the command resolves its config.
TaskOpt = Annotated[
    str | None,
    typer.Option(
        help=f"task, one of: {', '.join(task_names())} (default: {DEFAULT_TASK}, or the resumed run's with "
        "training.resume); another module's task: name the module in $TRAINRT_TASK_MODULES",
        show_default=False,
    ),
]
RunDirArg = Annotated[Path, typer.Argument(help="a run directory written by `trainrt train`")]
CheckpointOpt = Annotated[
    str | None,
    typer.Option(help="an iteration number or a checkpoint file of the run (default: the newest)"),
]
RendererOpt = Annotated[
    Renderer, typer.Option(help="auto: egl, osmesa, then software with a CUDA GPU; software without")
]
MotionFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--motion-file",
        help="tracking: the run's motion clip at another place (moved, or the run copied from elsewhere)",
    ),
]


def fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``message`` to stderr (with the traceback under ``--debug``) and return the exit to raise."""
    if CliState.debug and sys.exc_info()[0] is not None:
        traceback.print_exc()
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


@contextlib.contextmanager
def usage_errors(*errors: type[Exception]) -> Iterator[None]:
    """Turn the expected ``errors`` raised inside into one ``error: ...`` line and exit code 2."""
    try:
        yield
    except errors as err:
        raise fail(str(err)) from None


def check_output_file(path: Path | None, option: str, example: str, *, default: Path | None = None) -> None:
    """Exit with a usage error when ``path``, a file the command will write, is an existing directory, lies
    under a file, or cannot be written (checked before the work, so its results are not lost at the end);
    without ``path``, ``default``, the file written then, is checked for writability."""
    if path is None:
        if default is not None:
            check_writable(default, f"{default} (where it writes by default; give {option} PATH elsewhere)")
        return
    if path.is_dir():
        raise fail(f"{option} {path} is a directory; give a file path, e.g. {option} {path / example}")
    under = next((parent for parent in path.parents if parent.is_file()), None)
    if under is not None:
        raise fail(f"{option} {path}: {under} is a file, not a directory; give a path in a folder")
    check_writable(path, f"{option} {path}")


def check_writable(path: Path, said: str) -> None:
    """Usage error unless ``path`` (a file to write) can be written: the file itself when it exists, else the
    nearest folder above it that exists (the command creates the rest)."""
    existing = path if path.exists() else next((p for p in path.absolute().parents if p.exists()), None)
    if existing is None:
        return
    if not os.access(existing, os.W_OK | (os.X_OK if existing.is_dir() else 0)):
        raise fail(f"{said}: {existing} is not writable; give a path you can write")


def warn(line: str) -> None:
    """A warning line on stderr."""
    typer.echo(f"warning: {line}", err=True)


def resolve_command_line(
    algo: Algo | None, task: str | None, sim: Sim | None, overrides: list[str], preset_choice: PresetChoice
) -> tuple[TrainConfig, dict[str, object]]:
    """``resolve_train_config`` of a command's options; a bad config exits with one usage line."""
    from trainrt.config import OverrideError
    from trainrt.config.resolve import resolve_train_config

    with usage_errors(OverrideError, ValueError, FileNotFoundError):
        resolved = resolve_train_config(
            algo.value if algo else None,
            task,
            sim.value if sim else None,
            overrides,
            preset_choice.value,
            warn=warn,
        )
    return resolved


def motion_file_arg(path: Path | None) -> str | None:
    """``--motion-file`` as the config keeps a clip: a path as given (the config check resolves it)."""
    return None if path is None else str(path)


def video_options(
    width: int,
    height: int,
    seconds: float,
    renderer: Renderer,
    env_ids: tuple[int, ...],
    tiled: bool,
    ghost_offset: float = 0.0,
) -> object:
    """``VideoOptions`` from command-line values; exits with a usage error for odd sizes."""
    from trainrt.viz.record import VideoOptions

    if width % 2 or height % 2:
        raise fail(f"--width and --height must be even (H.264), got {width}x{height}")
    return VideoOptions(
        width=width,
        height=height,
        seconds=seconds,
        renderer=renderer.value,
        env_ids=env_ids,
        tiled=tiled,
        ghost_offset=(0.0, ghost_offset, 0.0),
    )
