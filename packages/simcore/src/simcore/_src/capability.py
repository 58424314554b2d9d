"""Capabilities a backend declares on its own class, and the fail-closed negotiation at construction."""

from __future__ import annotations

import enum
from collections.abc import Iterable


class Capability(enum.Flag):
    """What a simulation backend can do; members combine with ``|`` and can be listed in any iterable."""

    HOST_BRIDGE = enum.auto()
    """State lives in torch tensors; physics runs on the host behind an explicit D2H/H2D boundary."""
    DEVICE_RESIDENT = enum.auto()
    """State carriers are zero-copy torch views of the simulator's own device arrays."""
    BATCHED_STEP = enum.auto()
    """One ``step()`` advances all ``num_envs`` worlds."""
    READ_PLAN = enum.auto()
    """Named bodies and sensors are gathered into fixed-shape tensors negotiated once."""
    CONTACT_FORCES = enum.auto()
    """Per-body net contact force and contact flags in a read plan."""
    PER_WORLD_MODEL_FIELDS = enum.auto()
    """Writable ``(num_envs, ...)`` model fields such as friction, mass and actuator gains."""
    RESET_TRANSACTION = enum.auto()
    """Masked, fixed-shape, sync-free reset of state and per-world model fields."""
    GRAPH_CAPTURE = enum.auto()
    """Backend work can be captured into a CUDA graph (on a CUDA device)."""
    EXTERNAL_GRAPH_CAPTURE = enum.auto()
    """Backend work can join a ``torch.cuda.graph`` capture owned by the caller."""
    MULTI_STEP_GRAPH = enum.auto()
    """One graph replay can advance several control steps."""
    STATE_TENSORS = enum.auto()
    """``state_tensors()`` lists live tensors that together hold everything a step carries to the next."""


def _members(values: Iterable[Capability] | Capability) -> frozenset[Capability]:
    """Flatten an iterable of capabilities (or one combined flag) into single members."""
    if isinstance(values, Capability):
        values = (values,)
    if isinstance(values, str):
        raise ValueError(
            f"expected Capability values, got the string {values!r}; pass simcore.Capability members, e.g. "
            f"(simcore.Capability.{values.upper() if values.upper() in Capability.__members__ else 'GRAPH_CAPTURE'},)"
        )
    members: set[Capability] = set()
    for value in values:
        if not isinstance(value, Capability):
            raise ValueError(
                f"expected Capability values, got {value!r}; valid: {sorted(c.name for c in Capability)}"
            )
        members.update(value)  # a combined flag iterates over its single members
    return frozenset(members)


def declared_capabilities(cls: type) -> frozenset[Capability]:
    """Return the capabilities ``cls`` declares in its own body; a subclass that declares none has none."""
    return _members(cls.__dict__.get("capabilities", frozenset()))


def capability_names(capabilities: Iterable[Capability]) -> list[str]:
    """Sorted member names, for messages and diagnostics."""
    return sorted(c.name for c in _members(capabilities))


def require_capabilities(cls: type, backend_name: str, require: Iterable[Capability] | Capability) -> None:
    """Raise NotImplementedError naming the backend, the missing and the declared capabilities."""
    wanted = _members(require)
    declared = declared_capabilities(cls)
    missing = wanted - declared
    if missing:
        raise NotImplementedError(
            f"backend {backend_name!r} lacks required capabilities {capability_names(missing)}; "
            f"it declares {capability_names(declared)}"
        )
