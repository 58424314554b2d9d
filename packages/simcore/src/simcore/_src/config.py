"""SimConfig: the validated settings every backend is built from, and model-derived buffer-size defaults."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np

PER_WORLD_MODEL_FIELDS: tuple[str, ...] = (
    "geom_friction",
    "geom_solref",
    "body_mass",
    "body_ipos",
    "body_inertia",
    "dof_armature",
    "dof_damping",
    "dof_frictionloss",
    "actuator_gainprm",
    "actuator_biasprm",
)
"""Model fields a backend can hold per world, shaped ``(num_envs, *field_shape)``."""

CONSTANT_SOURCE_FIELDS: frozenset[str] = frozenset({"body_mass", "body_ipos", "body_inertia", "dof_armature"})
"""Per-world fields whose change requires MuJoCo's derived constants (subtree mass, inverse weights) recomputed."""

DERIVED_CONSTANT_FIELDS: tuple[str, ...] = (
    "body_subtreemass",
    "body_invweight0",
    "dof_invweight0",
    "tendon_invweight0",
    "actuator_acc0",
)
"""Model constants MuJoCo derives from the ``CONSTANT_SOURCE_FIELDS`` (``mj_setConst``); per world when those are."""

DEFAULT_RANDOMIZED_FIELDS: tuple[str, ...] = (
    "geom_friction",
    "body_mass",
    "body_ipos",
    "actuator_gainprm",
    "actuator_biasprm",
)

_BUFFER_SIZE_QUANTUM = 16


@dataclasses.dataclass(frozen=True)
class SimConfig:
    """Backend construction settings.

    Attributes:
        num_envs: number of parallel worlds, > 0.
        decimation: physics substeps per ``step()``, >= 1.
        device: torch device string; None picks the backend's natural device (mjwarp: CUDA when available).
        nconmax: contact buffer size per world (> 0), or None for a default derived from the model.
        njmax: constraint rows per world (> 0), or None for a default derived from the model and nconmax.
        randomized_fields: model fields held per world, a subset of ``PER_WORLD_MODEL_FIELDS``.
        sensors_every_substep: compute sensors on every physics substep, as ``mj_step`` does. By default
            they are computed on the last substep of a ``step()`` only: no substep's dynamics reads them and
            only the last substep's values are ever visible, so the state is the same bit for bit and the
            earlier substeps skip the sensor kernels (and the acceleration pass an accelerometer needs).
            True exists to measure what that saves.
        graph_conditional: on mjwarp under a CUDA graph, run the constraint solver's iterations in a
            conditional (while) node that stops once every world has converged. False unrolls all
            ``opt.iterations`` iterations into the graph (a converged world skips them); the results are the
            same, only the cost differs. Ignored by backends without graphs.
        compile_in_background: on mjwarp with compile-ahead (``$SIMCORE_COMPILE_WORKERS``), construction and
            ``ray_cast`` find the Warp modules to compile and return while a background thread compiles them;
            the first Warp work (a step, reset, forward, option change, diagnostics) waits for them, or the
            caller does with ``wait_compiled()``. The caller meanwhile does its own work (e.g. compiles its
            torch code). Construction's first forward waits too, so derived state read before then is the
            model's, computed on the host. Capturing a graph before the wait is refused. Ignored by backends
            that compile nothing.
    """

    num_envs: int
    decimation: int = 4
    device: str | None = None
    nconmax: int | None = None
    njmax: int | None = None
    randomized_fields: tuple[str, ...] = DEFAULT_RANDOMIZED_FIELDS
    sensors_every_substep: bool = False
    graph_conditional: bool = True
    compile_in_background: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.num_envs, bool) or not isinstance(self.num_envs, int) or self.num_envs <= 0:
            raise ValueError(f"num_envs must be a positive int, got {self.num_envs!r}")
        if isinstance(self.decimation, bool) or not isinstance(self.decimation, int) or self.decimation < 1:
            raise ValueError(f"decimation must be an int >= 1, got {self.decimation!r}")
        for name in ("nconmax", "njmax"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
                raise ValueError(
                    f"{name} must be a positive int or None (model-derived default), got {value!r}"
                )
        for name in ("sensors_every_substep", "graph_conditional", "compile_in_background"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be a bool, got {getattr(self, name)!r}")
        if self.device is not None and not isinstance(self.device, str):
            raise ValueError(f"device must be a torch device string or None, got {self.device!r}")
        if isinstance(self.randomized_fields, str):
            raise ValueError(
                f"randomized_fields must be a sequence of names, got the string {self.randomized_fields!r} "
                f"(write ({self.randomized_fields!r},))"
            )
        fields = tuple(self.randomized_fields)
        unknown = [f for f in fields if f not in PER_WORLD_MODEL_FIELDS]
        if unknown:
            raise ValueError(f"unknown randomized_fields {unknown}; valid: {list(PER_WORLD_MODEL_FIELDS)}")
        if len(set(fields)) != len(fields):
            raise ValueError(f"randomized_fields has duplicates: {list(fields)}")
        object.__setattr__(self, "randomized_fields", fields)


def _round_up(value: int, quantum: int = _BUFFER_SIZE_QUANTUM) -> int:
    return max(quantum, -(-value // quantum) * quantum)


def default_nconmax(model: mujoco.MjModel) -> int:
    """Contacts per world: one per colliding geom, at least 48 (MuJoCo Warp's own floor for small models)."""
    colliding = int(np.count_nonzero((model.geom_contype != 0) | (model.geom_conaffinity != 0)))
    return _round_up(max(48, colliding))


def constraint_rows_per_contact(model: mujoco.MjModel) -> int:
    """Constraint rows the widest contact takes: pyramidal 2(condim-1), elliptic condim, frictionless 1.

    The widest contact is that of any colliding geom or any explicit contact pair (a pair sets its own
    condim).
    """
    condims = [int(model.geom_condim.max()) if model.ngeom else 1]
    if model.npair:
        condims.append(int(model.pair_dim.max()))
    condim = max(condims)
    if condim == 1:
        return 1
    if model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC:
        return condim
    return 2 * (condim - 1)


CONTACT_ROW_HEADROOM = 2
"""How many times its share of contacts one world's constraint rows leave room for (see default_njmax)."""


def default_njmax(model: mujoco.MjModel, nconmax: int) -> int:
    """Constraint rows per world: all possible limit, friction-loss and equality rows plus full rows for
    ``CONTACT_ROW_HEADROOM * nconmax`` contacts.

    ``nconmax`` is each world's share of one contact pool, not a cap per world: MuJoCo Warp lets a world
    take more contacts than its share while the pool has room, but drops any constraint row past
    ``njmax``. A robot that falls with its limbs on the floor is such a world, so the rows leave room for
    twice its share. With rows for its share only, G1 motion-tracking runs overflowed them in 1 to 6 of
    2048 worlds.
    """
    eq_rows = {
        mujoco.mjtEq.mjEQ_CONNECT: 3,
        mujoco.mjtEq.mjEQ_WELD: 6,
        mujoco.mjtEq.mjEQ_JOINT: 1,
        mujoco.mjtEq.mjEQ_TENDON: 1,
    }
    rows = int(np.count_nonzero(model.jnt_limited)) + int(np.count_nonzero(model.dof_frictionloss > 0))
    rows += int(np.count_nonzero(model.tendon_limited)) + int(np.count_nonzero(model.tendon_frictionloss > 0))
    rows += sum(eq_rows.get(int(t), 6) for t in model.eq_type)
    rows += CONTACT_ROW_HEADROOM * nconmax * constraint_rows_per_contact(model)
    return _round_up(rows)


def resolve_buffer_sizes(model: mujoco.MjModel, config: SimConfig) -> tuple[int, int]:
    """Return ``(nconmax, njmax)``: the configured values, or defaults derived from the model."""
    nconmax = config.nconmax if config.nconmax is not None else default_nconmax(model)
    njmax = config.njmax if config.njmax is not None else default_njmax(model, nconmax)
    return nconmax, njmax
