"""Task registry: each task is a config factory returning an ``EnvCfg``; ``make_task_cfg`` builds one.

``make_task_cfg(name)`` is the factory's config; ``make_task_cfg(section)`` (a ``TaskSection`` of the training
config) also applies the section's motion clip, episode length and per-term overrides
(``trainrt.tasks.term_overrides``), so every command that rebuilds a run's env from its ``config.json`` gets the
same task.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainrt.envs import EnvCfg
from trainrt.hotpath import cold_path
from trainrt.tasks.g1_motion_tracking import g1_motion_tracking_env_cfg
from trainrt.tasks.g1_walk_flat import g1_walk_flat_env_cfg
from trainrt.tasks.term_overrides import (
    TERM_SECTIONS,
    apply_observation_overrides,
    apply_term_overrides,
    set_motion_file,
)

if TYPE_CHECKING:
    from trainrt.config import TaskSection

TASKS: dict[str, Callable[[], EnvCfg]] = {
    "g1_walk_flat": g1_walk_flat_env_cfg,
    "g1_motion_tracking": g1_motion_tracking_env_cfg,
}
"""Task name -> config factory."""


@cold_path
def make_task_cfg(task: str | TaskSection) -> EnvCfg:
    """A fresh ``EnvCfg`` of a task name, or of a ``TaskSection`` with its changes applied.

    ValueError naming the registered tasks (unknown name) or the valid terms, keys and params (bad change).
    """
    name = task if isinstance(task, str) else task.name
    try:
        factory = TASKS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; valid: {sorted(TASKS)}") from None
    env_cfg = factory()
    if isinstance(task, str):
        return env_cfg
    if task.motion_file is not None:
        set_motion_file(env_cfg, name, task.motion_file)
    if task.episode_length_s is not None:
        env_cfg.episode_length_s = float(task.episode_length_s)
    for section in TERM_SECTIONS:
        apply_term_overrides(env_cfg, section, getattr(task, section))
    apply_observation_overrides(env_cfg, task.observations)
    return env_cfg


@cold_path
def check_term_overrides(task: str, section: str, overrides: Mapping[str, Any]) -> None:
    """Apply one section's overrides to a fresh config of ``task`` to check them (ValueError when they do not fit)."""
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid: {sorted(TASKS)}")
    if section == "observations":
        apply_observation_overrides(TASKS[task](), overrides)
    else:
        apply_term_overrides(TASKS[task](), section, overrides)


@cold_path
def check_motion_file(task: str, motion_file: str) -> str:
    """``motion_file`` as the config keeps it: an existing path made absolute, or a G1 asset clip name.

    ValueError for a task without a motion command, or a file that is neither (the message lists the clips).
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; valid: {sorted(TASKS)}")
    set_motion_file(TASKS[task](), task, motion_file)  # refuses tasks that track no clip
    from trainrt.tasks.g1_motion_tracking.mdp import resolve_motion_file

    try:
        resolve_motion_file(motion_file)
    except FileNotFoundError as err:
        raise ValueError(f"task.motion_file: {err}; give an npz path or one of these clip names") from None
    path = Path(motion_file)
    return str(path.resolve()) if path.is_file() else motion_file


__all__ = ["TASKS", "check_motion_file", "check_term_overrides", "make_task_cfg"]
