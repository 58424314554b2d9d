"""The ``trainrt`` command line: ``train``, ``play``, ``export``, ``bench``.

    trainrt train --algo sac --task g1_walk_flat algo.max_iterations=160 training.final_eval=false
    trainrt play runs/<run>            # deterministic evaluation of the last checkpoint
    trainrt export runs/<run>          # ONNX export of the last checkpoint's actor
    trainrt eval runs/<run>            # deterministic evaluation (walk: fixed commands; tracking: whole clip)
    trainrt eval runs/<run> --onnx runs/<run>/policy.onnx   # the same, with the exported ONNX policy acting
    trainrt bench collector            # diagnostic timings (not the acceptance number)
    trainrt checkpoint convert PATH    # an earlier version's checkpoint with numpy values, as tensors
    trainrt train --gpus 2 ...         # data-parallel: one rank per GPU (torchrun launches work too)

Also runs as ``python -m trainrt ...``. Exit codes: 0 success; 1 a failed run; 2 a bad command line, config
or run directory (one line naming the problem and the fix); 130 interrupted by Ctrl-C, 143 by SIGTERM, 129 by
SIGHUP (each saves a checkpoint of the last completed iteration and an ``interrupted`` summary). Expected
failures print one line; a traceback means a bug, or ``trainrt --debug ...`` asked for it.
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import sys
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from trainrt.tasks.registry import DEFAULT_ALGO, DEFAULT_TASK, task_names

if TYPE_CHECKING:
    from trainrt.config import TrainConfig

# Heavy imports (torch, the env, the backends) happen inside the commands, so `trainrt --help` is quick.
# How a command line becomes a config lives in trainrt.config.resolve; this module parses, calls it and prints.


def __getattr__(name: str) -> object:
    """The config resolution's old home: ``trainrt.cli.resolve_train_config`` and ``check_device_available`` are
    ``trainrt.config.resolve``'s (imported on first use, so ``import trainrt.cli`` stays free of torch)."""
    if name in ("resolve_train_config", "check_device_available"):
        from trainrt.config import resolve

        return getattr(resolve, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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


class _CliState:
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
    _CliState.debug = debug


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


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    """Print ``message`` to stderr (with the traceback under ``--debug``) and return the exit to raise."""
    if _CliState.debug and sys.exc_info()[0] is not None:
        traceback.print_exc()
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


@contextlib.contextmanager
def _usage_errors(*errors: type[Exception]) -> Iterator[None]:
    """Turn the expected ``errors`` raised inside into one ``error: ...`` line and exit code 2."""
    try:
        yield
    except errors as err:
        raise _fail(str(err)) from None


def _check_output_file(path: Path | None, option: str, example: str, *, default: Path | None = None) -> None:
    """Exit with a usage error when ``path``, a file the command will write, is an existing directory, lies
    under a file, or cannot be written (checked before the work, so its results are not lost at the end);
    without ``path``, ``default``, the file written then, is checked for writability."""
    if path is None:
        if default is not None:
            _check_writable(default, f"{default} (where it writes by default; give {option} PATH elsewhere)")
        return
    if path.is_dir():
        raise _fail(f"{option} {path} is a directory; give a file path, e.g. {option} {path / example}")
    under = next((parent for parent in path.parents if parent.is_file()), None)
    if under is not None:
        raise _fail(f"{option} {path}: {under} is a file, not a directory; give a path in a folder")
    _check_writable(path, f"{option} {path}")


def _check_writable(path: Path, said: str) -> None:
    """Usage error unless ``path`` (a file to write) can be written: the file itself when it exists, else the
    nearest folder above it that exists (the command creates the rest)."""
    existing = path if path.exists() else next((p for p in path.absolute().parents if p.exists()), None)
    if existing is None:
        return
    if not os.access(existing, os.W_OK | (os.X_OK if existing.is_dir() else 0)):
        raise _fail(f"{said}: {existing} is not writable; give a path you can write")


def _warn(line: str) -> None:
    """A warning line on stderr."""
    typer.echo(f"warning: {line}", err=True)


def _resolve_command_line(
    algo: Algo | None, task: str | None, sim: Sim | None, overrides: list[str], preset_choice: PresetChoice
) -> tuple[TrainConfig, dict[str, object]]:
    """``resolve_train_config`` of a command's options; a bad config exits with one usage line."""
    from trainrt.config import OverrideError
    from trainrt.config.resolve import resolve_train_config

    with _usage_errors(OverrideError, ValueError, FileNotFoundError):
        resolved = resolve_train_config(
            algo.value if algo else None,
            task,
            sim.value if sim else None,
            overrides,
            preset_choice.value,
            warn=_warn,
        )
    return resolved


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

    cfg, resolution = _resolve_command_line(algo, task, sim, list(overrides or []), preset_choice)
    if gpus > 1:
        if "WORLD_SIZE" in os.environ:
            raise _fail(
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
    if _CliState.one_cpu_thread and os.environ.get("RANK", "0") == "0":
        typer.echo(CPU_THREADS_NOTE)
    from trainrt.runner import OffPolicyRunner
    from trainrt.runner.failures import ExpectedRunFailure, ignore_file_size_signal
    from trainrt.runner.off_policy_runner import RunInterrupted

    ignore_file_size_signal()  # a file-size limit fails a write with one line, rather than killing the run
    # a run directory or training.resume that cannot be used
    with _usage_errors(ValueError, FileNotFoundError):
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
        if _CliState.debug:
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

    from trainrt.runner.build import resolve_device
    from trainrt.runner.launcher import launch_ranks

    if cfg.training.resume is not None:
        raise _fail(f"training.resume is not supported with --gpus {gpus} yet: resume with one process")
    if resolve_device(cfg).startswith("cuda"):
        available = torch.cuda.device_count()
        if gpus > available:
            raise _fail(f"--gpus {gpus} but {available} CUDA device(s) are visible")
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


@app.command()
def play(
    run_dir: RunDirArg,
    num_envs: Annotated[int, typer.Option(min=1, help="parallel envs of the evaluation")] = 16,
    steps: Annotated[
        int | None, typer.Option(min=1, help="rollout length (default: training.play_steps)")
    ] = None,
    sim: Annotated[Sim | None, typer.Option(help="backend (default: the run's)")] = None,
    checkpoint: CheckpointOpt = None,
    video: Annotated[
        bool, typer.Option("--video", help="record an MP4 of the policy (see --output, --video-envs)")
    ] = False,
    viewer: Annotated[
        bool, typer.Option("--viewer", help="open MuJoCo's interactive viewer (needs a display)")
    ] = False,
    output: Annotated[
        Path | None, typer.Option(help="video file (default: <run_dir>/videos/play_iter<N>.mp4)")
    ] = None,
    video_envs: Annotated[int, typer.Option(min=1, help="envs drawn in the video")] = 1,
    one_file_per_env: Annotated[
        bool, typer.Option(help="write <output>_env<i>.mp4 per env instead of one tiled video")
    ] = False,
    seconds: Annotated[float, typer.Option(min=0.1, help="simulated seconds recorded")] = 10.0,
    width: Annotated[int, typer.Option(min=8, help="pixels per env view (even)")] = 320,
    height: Annotated[int, typer.Option(min=8, help="pixels per env view (even)")] = 240,
    renderer: RendererOpt = Renderer.auto,
    ghost_offset: Annotated[
        float, typer.Option(help="tracking: sideways metres between the reference ghost and its pose")
    ] = 0.0,
    frames: Annotated[
        int, typer.Option(min=0, help="also save this many evenly spaced frames as PNG beside the video")
    ] = 0,
    motion_file: MotionFileOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="print the result as JSON")] = False,
) -> None:
    """Evaluate a run's last checkpoint with a deterministic rollout; prints mean return and episode length.

    With --video, record the policy instead (a camera follows each robot; walking shows the commanded and
    measured velocity, tracking a translucent ghost of the reference); with --viewer, watch it live.
    """
    if video:
        _check_output_file(output, "--output", "play.mp4")
    if video or viewer:
        _play_visual(
            run_dir,
            video=video,
            output=output,
            sim=sim.value if sim else None,
            checkpoint=checkpoint,
            motion_file=_motion_file(motion_file),
            png_frames=frames,
            options=_video_options(
                width, height, seconds, renderer, tuple(range(video_envs)), not one_file_per_env, ghost_offset
            ),
        )
        return
    from trainrt.runner import play_run
    from trainrt.runner.preflight import check_rollout_memory

    with _usage_errors(FileNotFoundError, ValueError):
        check_rollout_memory(
            run_dir, num_envs=num_envs, sim=sim.value if sim else None, motion_file=_motion_file(motion_file)
        )
        result = play_run(
            run_dir,
            num_envs=num_envs,
            num_steps=steps,
            sim=sim.value if sim else None,
            checkpoint=checkpoint,
            motion_file=_motion_file(motion_file),
        )
    typer.echo(json.dumps(result, indent=2) if as_json else format_play_result(result))


def format_play_result(result: dict) -> str:
    """``play``'s result as a few readable lines (``--json`` prints the dict itself)."""
    steps = f"{result['num_steps']} steps" + (
        f" (of {result['requested_steps']} asked)"
        if result.get("requested_steps") != result["num_steps"]
        else ""
    )
    return "\n".join(
        [
            f"play: iteration {result['iteration']} ({result['checkpoint']}) on {result['sim']}, "
            f"{result['num_envs']} envs x {steps}, deterministic",
            f"  mean return          {result['mean_return']:.3f}",
            f"  mean episode length  {result['mean_episode_length']:.1f} steps",
            f"  terminated           {100 * result['terminated_fraction']:.1f}% of envs",
        ]
    )


@app.command()
def export(
    run_dir: RunDirArg,
    output: Annotated[
        Path | None,
        typer.Option(
            help="ONNX file (default: <run_dir>/policy.onnx; with --checkpoint, <run_dir>/policy_<iteration>.onnx)"
        ),
    ] = None,
    checkpoint: CheckpointOpt = None,
    motion_file: MotionFileOpt = None,
) -> None:
    """Export a run's actor (with its observation normalizer) to ONNX: input `obs`, output `actions`."""
    from trainrt.runner import export_run

    _check_output_file(output, "--output", "policy.onnx", default=Path(run_dir) / "policy.onnx")
    if output is not None and output.is_file() and output.suffix.lower() != ".onnx":
        raise _fail(f"--output {output} exists and is not an .onnx file; give another path (or delete it)")
    with _usage_errors(OSError, ValueError):
        result = export_run(
            run_dir, output=output, checkpoint=checkpoint, motion_file=_motion_file(motion_file)
        )
    typer.echo(json.dumps(result, indent=2))


@app.command("eval")
def eval_command(
    run_dir: RunDirArg,
    checkpoint: CheckpointOpt = None,
    sim: Annotated[
        Sim | None,
        typer.Option(help="backend (default: the run's); mujoco checks an mjwarp policy sim-to-sim"),
    ] = None,
    num_envs: Annotated[
        int, typer.Option(min=1, help="envs per scenario of the task's evaluation (e.g. per walk command)")
    ] = 64,
    steps: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="control steps per rollout (default: the evaluation's, e.g. walk --horizon-s, tracking the clip)",
        ),
    ] = None,
    commands: Annotated[
        str | None, typer.Option(help="walk: comma-separated command names (default: all, in one rollout)")
    ] = None,
    horizon_s: Annotated[
        float | None,
        typer.Option(help="walk: simulated seconds per rollout (default 10, at most one episode)"),
    ] = None,
    solver_iterations: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="the constraint solver's iteration limit (default: the run's); e.g. the model's 10 for a "
            "policy trained with fewer",
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            help="JSON file (default: <run_dir>/eval/eval_<iteration>.json; with --onnx, eval_onnx_<iteration>.json)"
        ),
    ] = None,
    motion_file: MotionFileOpt = None,
    onnx: Annotated[
        Path | None,
        typer.Option(
            help="evaluate this exported ONNX policy instead of a checkpoint, usually <run_dir>/policy.onnx "
            "(onnxruntime on the CPU; the same scenarios and metrics)",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Deterministic evaluation: walk per fixed command (fell, velocity errors); tracking over the whole clip.

    With --onnx PATH (usually <run_dir>/policy.onnx), the exported ONNX policy acts instead of a checkpoint.
    """
    from trainrt.runner.evaluate import evaluate_run, format_eval_table
    from trainrt.runner.preflight import check_rollout_memory

    if onnx is not None and checkpoint is not None:
        raise _fail(f"--onnx {onnx} evaluates that file's policy, not a checkpoint: leave out --checkpoint")
    _check_output_file(out, "--out", "eval.json", default=Path(run_dir) / "eval" / "eval.json")
    scenarios = None if commands is None else [c.strip() for c in commands.split(",") if c.strip()]
    with _usage_errors(OSError, ValueError):
        check_rollout_memory(
            run_dir,
            num_envs=num_envs,
            sim=sim.value if sim else None,
            motion_file=_motion_file(motion_file),
            evaluation=True,
            scenarios=scenarios,
        )
        result = evaluate_run(
            run_dir,
            checkpoint=checkpoint,
            sim=sim.value if sim else None,
            num_envs=num_envs,
            steps=steps,
            commands=scenarios,
            horizon_s=horizon_s,
            solver_iterations=solver_iterations,
            out=out,
            log=typer.echo,
            motion_file=_motion_file(motion_file),
            onnx=onnx,
        )
    typer.echo(format_eval_table(result))
    evaluated = "ONNX policy" if onnx is not None else "checkpoint"
    replaced = f" (it replaces the previous evaluation of this {evaluated})" if result.get("replaced") else ""
    typer.echo(f"wrote {result['json_path']}{replaced}")


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

    _check_output_file(output, "--output", "bench.json")
    extra = list(overrides or [])
    if num_envs is not None:
        extra.append(f"algo.num_envs={num_envs}")
    cfg, _ = _resolve_command_line(algo, task, sim, extra, preset_choice)
    with _usage_errors(ExpectedRunFailure):  # e.g. a replay that does not fit on the GPU
        results = run_benchmarks(cfg, target.value, steps=steps, log=typer.echo)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(results, indent=2) + "\n")
        typer.echo(f"wrote {output}")


# --- seeing the robot and the run: play --video/--viewer, motion preview/info, report, config show ---------

motion_app = typer.Typer(no_args_is_help=True, help="Look at a motion clip before training on it.")
app.add_typer(motion_app, name="motion")
config_app = typer.Typer(no_args_is_help=True, help="The resolved training config.")
app.add_typer(config_app, name="config")


def _video_options(
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
        raise _fail(f"--width and --height must be even (H.264), got {width}x{height}")
    return VideoOptions(
        width=width,
        height=height,
        seconds=seconds,
        renderer=renderer.value,
        env_ids=env_ids,
        tiled=tiled,
        ghost_offset=(0.0, ghost_offset, 0.0),
    )


def _play_visual(
    run_dir: Path,
    *,
    video: bool,
    output: Path | None,
    sim: str | None,
    checkpoint: str | None,
    options: object,
    png_frames: int = 0,
    motion_file: str | None = None,
) -> None:
    """``trainrt play --video`` / ``--viewer``."""
    from trainrt.viz.render import RendererUnavailableError

    with _usage_errors(
        FileNotFoundError, ValueError, RendererUnavailableError, RuntimeError, NotImplementedError
    ):
        if video:
            from trainrt.viz.record import record_run_video

            result = record_run_video(
                run_dir,
                output,
                options,
                sim=sim,
                checkpoint=checkpoint,
                png_frames=png_frames,
                motion_file=motion_file,
            )
            typer.echo(json.dumps(result, indent=2))
        else:
            from trainrt.viz.viewer import view_run

            view_run(run_dir, sim=sim, checkpoint=checkpoint, motion_file=motion_file)


def _motion_file(path: Path | None) -> str | None:
    """``--motion-file`` as the config keeps a clip: a path as given (the config check resolves it)."""
    return None if path is None else str(path)


def _clip_path(clip: Path) -> Path:
    """CLIP as a file: a path, or the name of a G1 asset clip (as ``task.motion_file`` takes it)."""
    from trainrt.robots import G1
    from trainrt.tasks.tracking.mdp import resolve_motion_file

    return resolve_motion_file(clip, (G1,))


@motion_app.command("preview")
def motion_preview(
    clip: Annotated[
        Path, typer.Argument(help="a motion file (.npz, holosoma or BeyondMimic layout) or a G1 clip name")
    ],
    video: Annotated[bool, typer.Option("--video", help="write an MP4 (the only preview so far)")] = True,
    output: Annotated[Path | None, typer.Option(help="video file (default: <clip stem>_preview.mp4)")] = None,
    seconds: Annotated[float, typer.Option(min=0.1, help="at most this many seconds of the clip")] = 30.0,
    width: Annotated[int, typer.Option(min=8, help="pixels (even)")] = 480,
    height: Annotated[int, typer.Option(min=8, help="pixels (even)")] = 360,
    renderer: RendererOpt = Renderer.auto,
) -> None:
    """Render CLIP on the G1 after the loader's joint mapping and forward kinematics."""
    from trainrt.viz.record import record_clip_video
    from trainrt.viz.render import RendererUnavailableError

    if not video:
        raise _fail("motion preview writes a video: drop --no-video (for facts, use `trainrt motion info`)")
    _check_output_file(output, "--output", f"{clip.stem}_preview.mp4")
    options = _video_options(width, height, seconds, renderer, (0,), True)
    path = output or Path(f"{clip.stem}_preview.mp4")
    with _usage_errors(FileNotFoundError, ValueError, RendererUnavailableError, NotImplementedError):
        result = record_clip_video(_clip_path(clip), path, options)
    typer.echo(json.dumps(result.as_dict(), indent=2))


@motion_app.command("info")
def motion_info_command(
    clip: Annotated[
        Path, typer.Argument(help="a motion file (.npz, holosoma or BeyondMimic layout) or a G1 clip name")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="print JSON instead of text")] = False,
) -> None:
    """Frames, fps, duration and joints of CLIP, and whether every frame lies within the G1's joint limits
    and the tracking task's action bounds."""
    from trainrt.viz.motion_info import format_motion_info, motion_info

    with _usage_errors(FileNotFoundError, ValueError):
        info = motion_info(_clip_path(clip))
    typer.echo(json.dumps(info, indent=2) if as_json else format_motion_info(info))


@app.command()
def report(
    run_dir: RunDirArg,
    output: Annotated[
        Path | None, typer.Option(help="folder of the PNGs (default: <run_dir>/report)")
    ] = None,
) -> None:
    """PNG plots of a run: episodes, reward terms, task errors, why episodes end, losses, throughput, eval."""
    from trainrt.viz.report import write_report

    if output is not None and output.exists() and not output.is_dir():
        raise _fail(
            f"--output {output} is a file; report writes its PNGs into a folder: give a folder "
            "(default: <run_dir>/report)"
        )
    with _usage_errors(FileNotFoundError, ValueError, RuntimeError):
        written = write_report(run_dir, output, log=_warn)
    typer.echo("\n".join(f"wrote {p}" for p in written))


@config_app.command("show")
def config_show(
    algo: AlgoOpt = None,
    task: TaskOpt = None,
    sim: Annotated[Sim | None, typer.Option(help="physics backend")] = None,
    preset_choice: Annotated[
        PresetChoice, typer.Option("--preset", help="base settings (as for train)")
    ] = PresetChoice.auto,
    as_json: Annotated[bool, typer.Option("--json", help="print the config as JSON")] = False,
    overrides: OverridesArg = None,
) -> None:
    """Print the config `trainrt train` would run with these arguments: every key, its value and meaning."""
    from trainrt.runner.console import format_config_listing

    cfg, resolution = _resolve_command_line(algo, task, sim, list(overrides or []), preset_choice)
    if as_json:
        typer.echo(cfg.model_dump_json(indent=2))
        return
    typer.echo(f"# preset: {resolution['preset']}; override any key with key=value")
    typer.echo(format_config_listing(cfg))


checkpoint_app = typer.Typer(no_args_is_help=True, help="Checkpoint files of a run.")
app.add_typer(checkpoint_app, name="checkpoint")


@checkpoint_app.command("convert")
def checkpoint_convert(
    paths: Annotated[list[Path], typer.Argument(help="checkpoint files (ckpt_<iteration>.pt) to convert")],
    output: Annotated[
        Path | None,
        typer.Option(help="write the converted checkpoint here (one PATH; the original stays as it is)"),
    ] = None,
) -> None:
    """Rewrite a checkpoint of an earlier trainrt version whose numpy values trainrt refuses to load, as
    tensors and Python values. It runs no code of the file (a file holding other Python objects is refused)
    and keeps the original as <name>.unsafe."""
    from trainrt.runner.checkpoint_convert import convert_checkpoint_file

    if output is not None and len(paths) > 1:
        raise _fail(f"--output names one file, but {len(paths)} checkpoints are given: convert one at a time")
    for path in paths:
        with _usage_errors(OSError, ValueError):
            result = convert_checkpoint_file(path, output=output)
        if result["original"] is None:
            typer.echo(f"{path} loads as it is (tensors and plain values only): nothing to convert")
        else:
            typer.echo(
                f"converted {result['converted']} numpy values of {path}: wrote {result['checkpoint']}, "
                f"the original is {result['original']}"
            )


_python_warning_format = warnings.formatwarning


def _format_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """Our own warnings (a clip's joints beyond their limits, say) as one ``warning: ...`` line; others as Python
    prints them."""
    if category.__module__.split(".")[0] in ("trainrt", "simcore"):
        return f"warning: {message}\n"
    return _python_warning_format(message, category, filename, lineno, line)


CPU_THREADS_NOTE = (
    "torch CPU threads: 1 per process (two runs, or a run and an eval, would otherwise share the cores "
    "thread against thread); set OMP_NUM_THREADS=N for more"
)
"""What ``train`` says at start-up when it chose one torch CPU thread for the process."""


def one_cpu_thread_unless_set() -> bool:
    """Give this process (and the processes it starts) one torch CPU thread unless ``OMP_NUM_THREADS`` is set.

    torch starts one thread per core in every process, so two CPU runs on one machine (or a run and its
    ``eval``) oversubscribe the cores and each slows down several times; the env steps and the small networks
    of a CPU run gain little from more threads. Set before torch is imported, so launched ranks inherit it.
    Returns whether the default was applied.
    """
    import os

    if "OMP_NUM_THREADS" in os.environ:
        return False
    os.environ["OMP_NUM_THREADS"] = "1"
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    return True


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``trainrt``)."""
    _CliState.one_cpu_thread = one_cpu_thread_unless_set()
    warnings.formatwarning = _format_warning
    app(args=argv if argv is not None else sys.argv[1:], prog_name="trainrt")


if __name__ == "__main__":
    main()
