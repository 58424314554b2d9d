"""``trainrt motion preview|info`` (a clip before training on it) and ``trainrt report`` (a run's plots)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from trainrt.cli.common import (
    Renderer,
    RendererOpt,
    RunDirArg,
    app,
    check_output_file,
    fail,
    usage_errors,
    video_options,
    warn,
)

motion_app = typer.Typer(no_args_is_help=True, help="Look at a motion clip before training on it.")
app.add_typer(motion_app, name="motion")


def _clip_path(clip: Path) -> Path:
    """CLIP as a file: a path, or the name of a G1 asset clip (as ``task.motion_file`` takes it)."""
    from trainrt.robots import G1
    from trainrt.tasks.tracking.command import resolve_motion_file

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
        raise fail("motion preview writes a video: drop --no-video (for facts, use `trainrt motion info`)")
    check_output_file(output, "--output", f"{clip.stem}_preview.mp4")
    options = video_options(width, height, seconds, renderer, (0,), True)
    path = output or Path(f"{clip.stem}_preview.mp4")
    with usage_errors(FileNotFoundError, ValueError, RendererUnavailableError, NotImplementedError):
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

    with usage_errors(FileNotFoundError, ValueError):
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
        raise fail(
            f"--output {output} is a file; report writes its PNGs into a folder: give a folder "
            "(default: <run_dir>/report)"
        )
    with usage_errors(FileNotFoundError, ValueError, RuntimeError):
        written = write_report(run_dir, output, log=warn)
    typer.echo("\n".join(f"wrote {p}" for p in written))
