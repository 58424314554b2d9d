"""What the managers read from the env they serve: `ManagedEnv`, the env as the managers see it.

The managers and the term bases here annotate their env with this protocol, not with the env class, so the
managers depend on no module of ``trainrt.envs``: the env builds the managers and the dependency runs one
way. ``ManagerBasedRlEnv`` has every attribute below; code the env imports (the terrain) uses it too. Terms outside this package (``trainrt.mdp``, tasks)
annotate ``ManagerBasedRlEnv`` itself and may read anything the env has.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

import simcore


class ManagedEnv(Protocol):
    """The env attributes the managers and their term bases read."""

    num_envs: int
    """Number of parallel worlds (the leading dimension of every per-row buffer)."""
    device: torch.device
    """Device of every buffer the managers allocate."""
    seed: int
    """The run seed the env was built with (the terrain and its curriculum draw from it)."""
    rng: torch.Generator
    """The env's only random generator; every draw of a command, event or noise uses it."""
    step_dt: float
    """Control step in seconds."""
    backend: simcore.SimBackend
    """The simulation backend (its model, and ``ctrl`` the action terms write)."""
    robot: Any
    """The robot's read view of the simulation state (``trainrt.envs.robot_view.RobotView``)."""
    state_cache: Any
    """The memo of derived quantities (``trainrt.envs.state_cache.StateCache``); managers bump its version after
    each command's and event's math."""
