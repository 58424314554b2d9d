"""Hot-path discipline: a visible marker for cold-path functions that may synchronize with the device."""

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable)

COLD_PATH_ATTR = "__trainrt_cold_path__"


def cold_path(fn: F) -> F:
    """Mark a function as cold path: it may synchronize (``.item()``, ``.cpu()``) and must not run per step."""
    setattr(fn, COLD_PATH_ATTR, True)
    return fn
