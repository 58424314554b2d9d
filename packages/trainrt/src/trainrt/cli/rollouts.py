"""``trainrt play``, ``export`` and ``eval``: a trained run's policy rolled out, exported or evaluated.

Each reads the run directory's config through ``trainrt.config.run_config`` (inside the runner's ``play_run``,
``export_run``, ``evaluate_run``); these commands check their options, call them and print.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trainrt.cli.common import (
    CheckpointOpt,
    MotionFileOpt,
    Renderer,
    RendererOpt,
    RunDirArg,
    Sim,
    app,
    check_output_file,
    fail,
    motion_file_arg,
    usage_errors,
    video_options,
)


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
        check_output_file(output, "--output", "play.mp4")
    if video or viewer:
        _play_visual(
            run_dir,
            video=video,
            output=output,
            sim=sim.value if sim else None,
            checkpoint=checkpoint,
            motion_file=motion_file_arg(motion_file),
            png_frames=frames,
            options=video_options(
                width, height, seconds, renderer, tuple(range(video_envs)), not one_file_per_env, ghost_offset
            ),
        )
        return
    from trainrt.runner import play_run
    from trainrt.runner.preflight import check_rollout_memory

    with usage_errors(FileNotFoundError, ValueError):
        check_rollout_memory(
            run_dir,
            num_envs=num_envs,
            sim=sim.value if sim else None,
            motion_file=motion_file_arg(motion_file),
        )
        result = play_run(
            run_dir,
            num_envs=num_envs,
            num_steps=steps,
            sim=sim.value if sim else None,
            checkpoint=checkpoint,
            motion_file=motion_file_arg(motion_file),
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

    check_output_file(output, "--output", "policy.onnx", default=Path(run_dir) / "policy.onnx")
    if output is not None and output.is_file() and output.suffix.lower() != ".onnx":
        raise fail(f"--output {output} exists and is not an .onnx file; give another path (or delete it)")
    with usage_errors(OSError, ValueError):
        result = export_run(
            run_dir, output=output, checkpoint=checkpoint, motion_file=motion_file_arg(motion_file)
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
        raise fail(f"--onnx {onnx} evaluates that file's policy, not a checkpoint: leave out --checkpoint")
    check_output_file(out, "--out", "eval.json", default=Path(run_dir) / "eval" / "eval.json")
    scenarios = None if commands is None else [c.strip() for c in commands.split(",") if c.strip()]
    with usage_errors(OSError, ValueError):
        check_rollout_memory(
            run_dir,
            num_envs=num_envs,
            sim=sim.value if sim else None,
            motion_file=motion_file_arg(motion_file),
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
            motion_file=motion_file_arg(motion_file),
            onnx=onnx,
        )
    typer.echo(format_eval_table(result))
    evaluated = "ONNX policy" if onnx is not None else "checkpoint"
    replaced = f" (it replaces the previous evaluation of this {evaluated})" if result.get("replaced") else ""
    typer.echo(f"wrote {result['json_path']}{replaced}")


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

    with usage_errors(
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
