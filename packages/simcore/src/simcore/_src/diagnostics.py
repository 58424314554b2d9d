"""BackendDiagnostics: a cold-path snapshot of a backend's sizes, overflow counters and graph state."""

from __future__ import annotations

import dataclasses
from typing import Any


@dataclasses.dataclass
class BackendDiagnostics:
    """What a backend reports about itself (cold path: reading it may synchronize the device).

    Attributes:
        backend: backend name, "mujoco" or "mjwarp".
        device: torch device string of the state carriers.
        num_envs: number of worlds.
        decimation: physics substeps per control step.
        physics_dt: physics timestep in seconds.
        nconmax: contact buffer size per world.
        njmax: constraint rows per world.
        structure_version: bumped whenever an array a captured graph reads is replaced.
        overflow: buffer overflow counters, each the number of worlds flagged since construction; the keys
            "contacts" and "constraints" are always present, backends add their own finer counters.
        solver_limits: worlds whose solver or line search hit its iteration limit (not an overflow).
        contacts: contacts in the latest step, summed over worlds.
        max_constraints: the largest constraint-row count of any world in the latest step.
        solver_iterations: the constraint solver's iterations in the latest substep, ``{"mean", "max"}`` over
            worlds (a graph's conditional solver loop runs as long as the slowest world needs).
        graph_enabled: whether the attached CapturedWork replays a CUDA graph.
        graph_version: the attached CapturedWork's version (bumped by each invalidation).
        steps_per_replay: control steps advanced per replay (K).
        graph_captures: captures so far.
        graph_replays: replays so far.
        eager_fallback_reason: why the work runs eagerly, or None when a graph is in use.
        conditional_nodes_used: whether the captured graph contains CUDA conditional nodes.
        graphs: per-name diagnostics of every CapturedWork attached to this backend.
        compile_ahead: what compiling the backend's kernel modules ahead did (mjwarp: ``workers``, ``modules``,
            ``built_in_processes`` (those the forked compile processes built) and ``seconds``, or ``error`` when
            its dry run failed and modules compiled at their first launch);
            None when the backend did not compile ahead.
    """

    backend: str
    device: str
    num_envs: int
    decimation: int
    physics_dt: float
    nconmax: int
    njmax: int
    structure_version: int
    overflow: dict[str, int]
    solver_limits: dict[str, int]
    contacts: int
    max_constraints: int
    solver_iterations: dict[str, float] = dataclasses.field(default_factory=dict)
    graph_enabled: bool = False
    graph_version: int = 0
    steps_per_replay: int = 1
    graph_captures: int = 0
    graph_replays: int = 0
    eager_fallback_reason: str | None = None
    conditional_nodes_used: bool = False
    graphs: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    compile_ahead: dict[str, Any] | None = None

    @property
    def overflow_detected(self) -> bool:
        """Whether any world overflowed a contact or constraint buffer."""
        return any(count > 0 for count in self.overflow.values())

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON-friendly dict of every field plus ``overflow_detected``."""
        out = dataclasses.asdict(self)
        out["overflow_detected"] = self.overflow_detected
        return out


def iteration_stats(per_world: Any) -> dict[str, float]:
    """``{"mean", "max"}`` of per-world solver iteration counts (an array-like), both 0 for no worlds."""
    values = [float(v) for v in per_world]
    if not values:
        return {"mean": 0.0, "max": 0.0}
    return {"mean": sum(values) / len(values), "max": max(values)}
