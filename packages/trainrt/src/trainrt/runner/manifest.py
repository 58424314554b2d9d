"""The run directory's record of what was asked for: ``config.json`` (the resolved, validated config) and
``manifest.json`` (how it was resolved: preset, overrides, command line, device, env summary).

``config.json`` is written before anything is built, so even a run that fails at construction leaves it;
``play``, ``export`` and ``training.resume`` rebuild from it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainrt.config import TrainConfig, load_stored_config
from trainrt.hotpath import cold_path
from trainrt.runner.atomic_files import atomic_write_text
from trainrt.runner.summary import json_safe, utc_now

CONFIG_FILE_NAME = "config.json"
MANIFEST_FILE_NAME = "manifest.json"


@cold_path
def write_resolved_config(run_dir: str | os.PathLike, cfg: TrainConfig) -> Path:
    """Atomically write the resolved config as ``<run_dir>/config.json``."""
    return atomic_write_text(
        Path(run_dir) / CONFIG_FILE_NAME, json.dumps(cfg.model_dump(mode="json"), indent=2) + "\n"
    )


@cold_path
def runs_inside(folder: str | os.PathLike) -> list[str]:
    """Names of the run directories (holding ``config.json``) directly inside ``folder``, oldest first by
    modification time; links (``runs/latest``) are left out."""
    try:
        entries = [
            e for e in Path(folder).iterdir() if not e.is_symlink() and (e / CONFIG_FILE_NAME).is_file()
        ]
    except OSError:
        return []
    return [e.name for e in sorted(entries, key=lambda e: (e.stat().st_mtime, e.name))]


@cold_path
def load_resolved_config(run_dir: str | os.PathLike, *, motion_file: str | None = None) -> TrainConfig:
    """Read and validate ``<run_dir>/config.json`` (an older run's renamed keys read as their new names);
    ``ValueError`` naming the file when it is not valid JSON or not a valid config.

    ``motion_file`` replaces the run's ``task.motion_file`` before the config is checked: the run's clip at
    another place (a moved file, a run copied from another machine)."""
    path = Path(run_dir) / CONFIG_FILE_NAME
    if not path.is_file():
        runs = runs_inside(run_dir)
        if runs:
            shown = ", ".join(str(Path(run_dir) / name) for name in runs[-6:])
            more = f" (the newest {min(6, len(runs))} of {len(runs)})" if len(runs) > 6 else ""
            raise FileNotFoundError(f"{run_dir} is a folder of runs, not a run: name one of {shown}{more}")
        raise FileNotFoundError(f"{path} not found: is {run_dir} a trainrt run directory?")
    text = path.read_text()
    try:
        data = json.loads(text)
    except ValueError as err:
        raise ValueError(f"{path}: not valid JSON (empty or truncated): {err}") from None
    if motion_file is not None and isinstance(data, dict) and isinstance(data.get("task"), dict):
        data["task"]["motion_file"] = motion_file
        text = json.dumps(data)
    try:
        return load_stored_config(text)
    except ValidationError as err:
        problems = "; ".join(_problem(e) for e in err.errors())
        clip_gone = motion_file is None and any(
            tuple(e["loc"]) == ("task", "motion_file") for e in err.errors()
        )
        fix = (
            "; if the run's motion clip moved, give its new place: --motion-file PATH (eval, play, export) or "
            "task.motion_file=PATH (training.resume)"
            if clip_gone
            else ""
        )
        raise ValueError(f"{path}: not a valid trainrt config: {problems}{fix}") from None


def _problem(error: Any) -> str:
    """One validation error as ``key: message``, without pydantic's prefix or the key said twice."""
    where = ".".join(map(str, error["loc"]))
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix(f"{where}: ")
    return f"{where}: {message}"


@cold_path
def write_manifest(run_dir: str | os.PathLike, **facts: Any) -> Path:
    """Atomically write ``<run_dir>/manifest.json``: the given facts plus the command line and a timestamp."""
    record = {"written_at": utc_now(), "argv": list(sys.argv), **facts}
    return atomic_write_text(
        Path(run_dir) / MANIFEST_FILE_NAME, json.dumps(json_safe(record), indent=2) + "\n"
    )


@cold_path
def recorded_run_id(run_dir: str | os.PathLike) -> str | None:
    """The run id ``<run_dir>/manifest.json`` records (``None`` for a directory without one)."""
    manifest = Path(run_dir) / MANIFEST_FILE_NAME
    try:
        value = json.loads(manifest.read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
    return str(value) if value else None
