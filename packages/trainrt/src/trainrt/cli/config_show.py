"""``trainrt config show``: the config ``trainrt train`` would run with the same arguments."""

from __future__ import annotations

from typing import Annotated

import typer

from trainrt.cli.common import AlgoOpt, OverridesArg, PresetChoice, Sim, TaskOpt, app, resolve_command_line

config_app = typer.Typer(no_args_is_help=True, help="The resolved training config.")
app.add_typer(config_app, name="config")


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

    cfg, resolution = resolve_command_line(algo, task, sim, list(overrides or []), preset_choice)
    if as_json:
        typer.echo(cfg.model_dump_json(indent=2))
        return
    typer.echo(f"# preset: {resolution['preset']}; override any key with key=value")
    typer.echo(format_config_listing(cfg))
