"""Snapshot and restore everything a training step reads and writes, for from-the-same-state comparisons.

A snapshot holds a copy of every torch tensor reachable from the given objects (env, managers, terms,
agent and its optimizers, replay buffer, collector), the simulation state through the backend's public
``state_tensors()``, and the state of every torch generator. Restoring copies the values back in place,
so CUDA graphs that captured those tensors keep working.
"""

from __future__ import annotations

import types
from typing import Any

import torch

import simcore

_ATOMS = (str, bytes, int, float, bool, complex, type(None), types.FunctionType, types.BuiltinFunctionType)


SOLVER_OUTPUTS = ("derived.cfrc_ext", "qacc_warmstart")
"""Backend state the iterative constraint solver produces (contact wrenches, its warm start). On a GPU its
float-atomic accumulation and tolerance-based early exit move these by more than rounding between two
executions of the same step, so they are compared at a force-sized tolerance; the states they produce
(positions, velocities, observations, rewards) keep the tight one."""


def _walk(roots: list[Any]) -> tuple[list[torch.Tensor], list[torch.Generator]]:
    tensors, generators, _ = _walk_named(roots)
    return tensors, generators


def _walk_named(roots: list[Any]) -> tuple[list[torch.Tensor], list[torch.Generator], dict[int, str]]:
    names: dict[int, str] = {}
    tensors: dict[int, torch.Tensor] = {}
    generators: dict[int, torch.Generator] = {}
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, (*_ATOMS, type, types.ModuleType)):
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            # broadcast views (stride 0) cannot be written in place; what they view is state elsewhere
            if not any(stride == 0 and size > 1 for stride, size in zip(obj.stride(), obj.shape)):
                tensors[id(obj)] = obj
        elif isinstance(obj, torch.Generator):
            generators[id(obj)] = obj
        elif isinstance(obj, simcore.SimBackend):
            for name, tensor in obj.state_tensors().items():
                names.setdefault(id(tensor), name)
                stack.append(tensor)
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        elif hasattr(obj, "__dict__"):
            stack.extend(vars(obj).values())
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, name) for name in obj.__slots__ if hasattr(obj, name))
    return list(tensors.values()), list(generators.values()), names


class StateSnapshot:
    """Copies of every tensor and generator state reachable from ``roots``; ``restore()`` puts them back."""

    def __init__(self, *roots: Any) -> None:
        self.tensors, self.generators, ids = _walk_named(list(roots))
        self.names = [ids.get(id(t), f"tensor {i} {tuple(t.shape)}") for i, t in enumerate(self.tensors)]
        self.values = [t.detach().clone() for t in self.tensors]
        self.generator_states = [g.get_state() for g in self.generators]

    @torch.no_grad()
    def restore(self) -> None:
        """Write the saved values back into the live tensors and generators (in place)."""
        for tensor, value in zip(self.tensors, self.values):
            tensor.copy_(value)
        for generator, state in zip(self.generators, self.generator_states):
            generator.set_state(state)

    def current(self) -> StateSnapshot:
        """A new snapshot of the same tensors and generators as they are now."""
        other = object.__new__(StateSnapshot)
        other.tensors, other.generators, other.names = self.tensors, self.generators, self.names
        other.values = [t.detach().clone() for t in self.tensors]
        other.generator_states = [g.get_state() for g in self.generators]
        return other


def compare(a: StateSnapshot, b: StateSnapshot, *, rtol: float, atol: float) -> dict[str, float]:
    """Assert two snapshots of the same tensors agree: exact for integers, booleans and generator states,
    within (rtol, atol) for floating point (``SOLVER_OUTPUTS`` within 5% of their largest magnitude).
    Every mismatch is listed by name. Returns the largest float difference seen and counts."""
    assert a.tensors is b.tensors
    worst = 0.0
    exact = floating = 0
    problems: list[str] = []
    for name, x, y in zip(a.names, a.values, b.values):
        if x.dtype.is_floating_point:
            floating += 1
            both_nan = torch.isnan(x) & torch.isnan(y)
            diff = torch.where(both_nan, 0.0, (x.double() - y.double()).abs())
            largest = float(diff.max()) if diff.numel() else 0.0
            if name in SOLVER_OUTPUTS:
                scale = float(x.abs().max()) if x.numel() else 0.0
                ok = largest <= 0.05 * max(scale, 1.0)
            else:
                worst = max(worst, largest)
                ok = torch.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
            if not ok:
                problems.append(f"{name} {tuple(x.shape)} {x.dtype}: largest difference {largest:.3g}")
        else:
            exact += 1
            if not torch.equal(x, y):
                problems.append(f"{name} {tuple(x.shape)} {x.dtype}: differs")
    for index, (x, y) in enumerate(zip(a.generator_states, b.generator_states)):
        if not torch.equal(x, y):
            problems.append(f"generator {index}: state differs")
    assert not problems, "snapshots differ:\n  " + "\n  ".join(problems)
    return {"max_float_difference": worst, "exact_tensors": exact, "float_tensors": floating}
