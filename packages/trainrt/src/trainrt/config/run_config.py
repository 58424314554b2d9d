"""A run directory's config: how ``eval``, ``play``, ``export`` and ``training.resume`` read it back.

``<run_dir>/config.json`` holds the resolved, validated config a run trained with (the runner writes it before
anything is built). Reading it follows these rules:

* **Which folder.** A folder that holds runs rather than being one (``runs/``) is refused with the names of the
  newest runs inside; a folder without ``config.json`` is refused as not a run directory.
* **Old keys.** An older run's renamed keys read as their new names (``trainrt.config.renames``).
* **A moved clip.** ``motion_file`` replaces the run's ``task.motion_file`` before the config is checked (the
  run's clip at another place); a run whose clip is gone is refused with that fix.
* **A rollout of the run** (`rollout_config`: ``play``, ``eval``, their memory check) may run on another backend
  (``--sim``: the device is then chosen anew) and, for ``eval``, under another solver iteration limit; nothing
  else of the trained config changes.

A Python caller gets what the command line would use::

    cfg = load_resolved_config("runs/my_run")                     # export, and the base of a resume
    cfg = rollout_config("runs/my_run", sim="mujoco")             # eval --sim mujoco / play --sim mujoco
    cfg = rollout_config("runs/my_run", solver_iterations=10)     # eval --solver-iterations 10
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from trainrt.config.schema import TrainConfig, load_stored_config

CONFIG_FILE_NAME = "config.json"
"""The resolved config's file in a run directory."""


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


def rollout_config(
    run_dir: str | os.PathLike,
    *,
    sim: str | None = None,
    motion_file: str | None = None,
    solver_iterations: int | None = None,
) -> TrainConfig:
    """The config a rollout of the run's policy rebuilds its env with (``play``, ``eval``): the run's, on
    ``sim`` when it names another backend (the device then chosen anew, as for a new run), with
    ``solver_iterations`` as the solver's iteration limit when given, and ``motion_file`` as the run's clip."""
    return for_rollout(
        load_resolved_config(run_dir, motion_file=motion_file), sim=sim, solver_iterations=solver_iterations
    )


def for_rollout(
    cfg: TrainConfig, *, sim: str | None = None, solver_iterations: int | None = None
) -> TrainConfig:
    """`rollout_config`'s changes to a run's config ``cfg`` already read."""
    if sim is not None and sim != cfg.sim.backend:
        cfg = cfg.model_copy(update={"sim": cfg.sim.model_copy(update={"backend": sim, "device": None})})
    if solver_iterations is not None:
        cfg = cfg.model_copy(
            update={"sim": cfg.sim.model_copy(update={"solver_iterations": solver_iterations})}
        )
    return cfg


def _problem(error: Any) -> str:
    """One validation error as ``key: message``, without pydantic's prefix or the key said twice."""
    where = ".".join(map(str, error["loc"]))
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix(f"{where}: ")
    return f"{where}: {message}"
