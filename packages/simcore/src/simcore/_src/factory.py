"""``make_backend``: build a simulation backend by name.

The factory lives apart from ``SimBackend`` so the base class imports none of its subclasses; each backend
is imported only when asked for, so the CPU backend never pulls in Warp.
"""

from __future__ import annotations

from collections.abc import Iterable

import mujoco

from simcore._src.backend import SimBackend
from simcore._src.capability import Capability
from simcore._src.config import SimConfig

BACKEND_NAMES: tuple[str, ...] = ("mujoco", "mjwarp")
"""Names ``make_backend`` accepts."""


def make_backend(
    name: str, model: mujoco.MjModel, config: SimConfig, require: Iterable[Capability] = ()
) -> SimBackend:
    """Build backend ``name`` ("mujoco" or "mjwarp"); missing required capabilities raise NotImplementedError."""
    if name == "mujoco":
        from simcore._src.mujoco_backend import MujocoBackend

        return MujocoBackend(model, config, require=require)
    if name == "mjwarp":
        from simcore._src.mjwarp_backend import MjwarpBackend

        return MjwarpBackend(model, config, require=require)
    raise ValueError(f"unknown backend {name!r}; valid: {list(BACKEND_NAMES)}")


LOG_LEVELS: tuple[str, ...] = ("debug", "info", "warning", "error")
"""Levels ``set_backend_log_level`` accepts, most verbose first."""


def set_backend_log_level(name: str, level: str) -> None:
    """Set how much backend ``name``'s own library logs: ``level`` is one of ``LOG_LEVELS``.

    "mjwarp" sets Warp's log level (at "info", Warp's default, it prints a timing line for every kernel module
    it loads: hundreds before the first step); "mujoco" logs nothing of its own and accepts every level.
    Raises ValueError naming the valid names and levels.
    """
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown backend {name!r}; valid: {list(BACKEND_NAMES)}")
    if level not in LOG_LEVELS:
        raise ValueError(f"unknown log level {level!r}; valid: {list(LOG_LEVELS)}")
    if name == "mjwarp":
        import warp

        warp.config.log_level = {
            "debug": warp.LOG_DEBUG,
            "info": warp.LOG_INFO,
            "warning": warp.LOG_WARNING,
            "error": warp.LOG_ERROR,
        }[level]
