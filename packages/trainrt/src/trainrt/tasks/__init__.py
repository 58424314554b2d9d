"""Task registry: each task is a config factory returning an ``EnvCfg``; ``make_task_cfg(name)`` builds one."""

from __future__ import annotations

from collections.abc import Callable

from trainrt.envs import EnvCfg
from trainrt.hotpath import cold_path
from trainrt.tasks.g1_motion_tracking import g1_motion_tracking_env_cfg
from trainrt.tasks.g1_walk_flat import g1_walk_flat_env_cfg

TASKS: dict[str, Callable[[], EnvCfg]] = {
    "g1_walk_flat": g1_walk_flat_env_cfg,
    "g1_motion_tracking": g1_motion_tracking_env_cfg,
}
"""Task name -> config factory."""


@cold_path
def make_task_cfg(name: str) -> EnvCfg:
    """A fresh ``EnvCfg`` of task ``name``; ValueError naming the registered tasks otherwise."""
    try:
        factory = TASKS[name]
    except KeyError:
        raise ValueError(f"unknown task {name!r}; valid: {sorted(TASKS)}") from None
    return factory()


__all__ = ["TASKS", "make_task_cfg"]
