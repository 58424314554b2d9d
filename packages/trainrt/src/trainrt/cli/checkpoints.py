"""``trainrt checkpoint convert``: an earlier version's checkpoint rewritten as tensors and plain values."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from trainrt.cli.common import app, fail, usage_errors

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
        raise fail(f"--output names one file, but {len(paths)} checkpoints are given: convert one at a time")
    for path in paths:
        with usage_errors(OSError, ValueError):
            result = convert_checkpoint_file(path, output=output)
        if result["original"] is None:
            typer.echo(f"{path} loads as it is (tensors and plain values only): nothing to convert")
        else:
            typer.echo(
                f"converted {result['converted']} numpy values of {path}: wrote {result['checkpoint']}, "
                f"the original is {result['original']}"
            )
