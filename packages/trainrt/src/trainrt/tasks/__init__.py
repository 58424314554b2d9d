"""Tasks: one folder per task, each registering itself with one ``register_task`` call (``tasks.registry``).

This package stays light (listing the tasks imports no torch): the builders below live in
``trainrt.tasks.build`` and load on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

from trainrt.tasks.registry import TaskSpec, register_task, task_names, task_spec

_LAZY = {
    "TASKS": "trainrt.tasks.build",
    "make_task_cfg": "trainrt.tasks.build",
    "check_term_overrides": "trainrt.tasks.build",
    "check_motion_file": "trainrt.tasks.build",
    "check_terrain_changes": "trainrt.tasks.build",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "TASKS",
    "TaskSpec",
    "check_motion_file",
    "check_term_overrides",
    "check_terrain_changes",
    "make_task_cfg",
    "register_task",
    "task_names",
    "task_spec",
]
