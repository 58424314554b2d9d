"""Building a task's ``EnvCfg``: the registered factory, then a ``TaskSection``'s changes.

``make_task_cfg(name)`` is the factory's config; ``make_task_cfg(section)`` (a ``TaskSection`` of the training
config) also applies the section's motion clip, episode length, terrain changes and per-term overrides
(``trainrt.tasks.term_overrides``), so every command that rebuilds a run's env from its ``config.json`` gets the
same task.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainrt.envs import EnvCfg
from trainrt.hotpath import cold_path
from trainrt.tasks.registry import task_names, task_spec
from trainrt.tasks.term_overrides import (
    TERM_SECTIONS,
    apply_observation_overrides,
    apply_term_overrides,
    set_motion_file,
)

if TYPE_CHECKING:
    from trainrt.config import TaskSection


class _EnvFactories(Mapping[str, Callable[[], EnvCfg]]):
    """Task name -> env config factory, a read-only view of the registry (``trainrt.tasks.registry``)."""

    def __getitem__(self, name: str) -> Callable[[], EnvCfg]:
        if name not in task_names():
            raise KeyError(name)
        return task_spec(name).env_cfg_factory()

    def __iter__(self) -> Iterator[str]:
        return iter(task_names())

    def __len__(self) -> int:
        return len(task_names())


TASKS: Mapping[str, Callable[[], EnvCfg]] = _EnvFactories()
"""Task name -> config factory (the registry's, read-only)."""


@cold_path
def make_task_cfg(task: str | TaskSection) -> EnvCfg:
    """A fresh ``EnvCfg`` of a task name, or of a ``TaskSection`` with its changes applied.

    ValueError naming the registered tasks (unknown name) or the valid terms, keys and params (bad change).
    """
    name = task if isinstance(task, str) else task.name
    env_cfg = task_spec(name).env_cfg_factory()()
    if isinstance(task, str):
        return env_cfg
    if task.motion_file is not None:
        set_motion_file(env_cfg, name, task.motion_file)
    if task.episode_length_s is not None:
        env_cfg.episode_length_s = float(task.episode_length_s)
    if task.terrain:
        apply_terrain_changes(env_cfg, name, task.terrain)
    for section in TERM_SECTIONS:
        apply_term_overrides(env_cfg, section, getattr(task, section))
    apply_observation_overrides(env_cfg, task.observations)
    return env_cfg


@cold_path
def check_term_overrides(task: str, section: str, overrides: Mapping[str, Any]) -> None:
    """Apply one section's overrides to a fresh config of ``task`` to check them (ValueError when they do not fit)."""
    factory = task_spec(task).env_cfg_factory()
    if section == "observations":
        apply_observation_overrides(factory(), overrides)
    else:
        apply_term_overrides(factory(), section, overrides)


@cold_path
def apply_terrain_changes(env_cfg: EnvCfg, task: str, changes: Mapping[str, Any]) -> None:
    """Change ``env_cfg``'s terrain grid in place (``trainrt.terrain.grid_with_changes``); ValueError for a task
    whose ground is not a terrain grid, or a change the grid refuses (naming the field and what is valid)."""
    from trainrt.terrain import grid_with_changes

    grid = env_cfg.scene.terrain
    if grid is None:
        raise ValueError(
            f"task.terrain: task {task!r} has no terrain grid (scene.terrain; its ground is the model's own "
            "floor or a mesh); docs/tasks.md names each task's terrain"
        )
    env_cfg.scene = dataclasses.replace(env_cfg.scene, terrain=grid_with_changes(grid, changes))


@cold_path
def check_terrain_changes(task: str, changes: Mapping[str, Any]) -> None:
    """Apply ``task.terrain``'s changes to a fresh config of ``task`` to check them (ValueError when they do not fit)."""
    apply_terrain_changes(task_spec(task).env_cfg_factory()(), task, changes)


@cold_path
def check_motion_file(task: str, motion_file: str) -> str:
    """``motion_file`` as the config keeps it: an existing path made absolute, or the name of an asset clip of
    the task's robot (``tracking.command.resolve_motion_file``).

    ValueError for a task without a motion command, or a file that is neither (the message lists the clips).
    """
    env_cfg = task_spec(task).env_cfg_factory()()
    set_motion_file(env_cfg, task, motion_file)  # refuses tasks that track no clip
    from trainrt.tasks.tracking.command import resolve_motion_file, robots_driving

    try:
        if not Path(motion_file).is_file():
            resolve_motion_file(motion_file, robots_driving(env_cfg.scene.model_factory()))
    except FileNotFoundError as err:
        raise ValueError(f"task.motion_file: {err}; give an npz path or one of these clip names") from None
    path = Path(motion_file)
    return str(path.resolve()) if path.is_file() else motion_file


__all__ = [
    "TASKS",
    "apply_terrain_changes",
    "check_motion_file",
    "check_term_overrides",
    "check_terrain_changes",
    "make_task_cfg",
]
