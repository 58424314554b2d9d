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
    HEIGHTFIELD = enum.auto()
    """Heightfield geoms (``type="hfield"``) collide with the convex geoms of the scene."""
    COLLISION_MESH = enum.auto()
    """Colliding mesh geoms, each as its convex hull (MuJoCo's rule): a non-convex terrain mesh must be
    split into convex pieces, or given as a heightfield."""
    RAY_CAST = enum.auto()
    """``ray_cast(body, pattern)``: a fixed pattern of rays per world, refreshed every step into
    fixed-shape ``(num_envs, num_rays)`` tensors."""


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


def model_capabilities(model) -> dict[Capability, list[str]]:
    """The capabilities a compiled ``mujoco.MjModel`` needs, each with the geoms that need it.

    A heightfield geom needs ``HEIGHTFIELD``; a colliding mesh geom (non-zero contype or conaffinity) needs
    ``COLLISION_MESH``. Visual-only meshes need nothing.
    """
    import mujoco

    needs: dict[Capability, list[str]] = {}
    for i in range(model.ngeom):
        kind = int(model.geom_type[i])
        colliding = bool(model.geom_contype[i] or model.geom_conaffinity[i])
        name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, i) or f"geom {i}"
        if kind == mujoco.mjtGeom.mjGEOM_HFIELD:
            needs.setdefault(Capability.HEIGHTFIELD, []).append(name)
        elif kind == mujoco.mjtGeom.mjGEOM_MESH and colliding:
            needs.setdefault(Capability.COLLISION_MESH, []).append(name)
    return needs


def require_model_capabilities(cls: type, backend_name: str, model) -> None:
    """Fail closed at load time: NotImplementedError naming each capability the model's geoms need and the
    backend lacks, the geoms, and what to do."""
    declared = declared_capabilities(cls)
    missing = {cap: geoms for cap, geoms in model_capabilities(model).items() if cap not in declared}
    if missing:
        details = "; ".join(f"{cap.name} for geom(s) {geoms[:5]}" for cap, geoms in missing.items())
        raise NotImplementedError(
            f"backend {backend_name!r} cannot simulate this model: it lacks {details} (it declares "
            f"{capability_names(declared)}); use a backend that declares them or remove those geoms from the "
            "model (e.g. a flat floor instead of the terrain)"
        )
