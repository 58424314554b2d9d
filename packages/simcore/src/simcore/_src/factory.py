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
