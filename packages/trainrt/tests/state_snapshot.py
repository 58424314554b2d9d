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


def _walk(roots: list[Any]) -> tuple[list[torch.Tensor], list[torch.Generator]]:
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
            stack.extend(obj.state_tensors().values())
        elif isinstance(obj, dict):
            stack.extend(obj.keys())
            stack.extend(obj.values())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend(obj)
        elif hasattr(obj, "__dict__"):
            stack.extend(vars(obj).values())
        elif hasattr(obj, "__slots__"):
            stack.extend(getattr(obj, name) for name in obj.__slots__ if hasattr(obj, name))
    return list(tensors.values()), list(generators.values())


class StateSnapshot:
    """Copies of every tensor and generator state reachable from ``roots``; ``restore()`` puts them back."""

    def __init__(self, *roots: Any) -> None:
        self.tensors, self.generators = _walk(list(roots))
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
        other.tensors, other.generators = self.tensors, self.generators
        other.values = [t.detach().clone() for t in self.tensors]
        other.generator_states = [g.get_state() for g in self.generators]
        return other


def compare(a: StateSnapshot, b: StateSnapshot, *, rtol: float, atol: float) -> dict[str, float]:
    """Assert two snapshots of the same tensors agree: exact for integers, booleans and generator states,
    within (rtol, atol) for floating point. Returns the largest float difference seen and counts."""
    assert a.tensors is b.tensors
    worst = 0.0
    exact = floating = 0
    for index, (x, y) in enumerate(zip(a.values, b.values)):
        if x.dtype.is_floating_point:
            floating += 1
            both_nan = torch.isnan(x) & torch.isnan(y)
            diff = torch.where(both_nan, 0.0, (x.double() - y.double()).abs())
            if diff.numel():
                worst = max(worst, float(diff.max()))
            torch.testing.assert_close(x, y, rtol=rtol, atol=atol, equal_nan=True, msg=f"tensor {index}")
        else:
            exact += 1
            assert torch.equal(x, y), f"tensor {index} ({x.dtype}, shape {tuple(x.shape)}) differs"
    for index, (x, y) in enumerate(zip(a.generator_states, b.generator_states)):
        assert torch.equal(x, y), f"generator {index} state differs"
    return {"max_float_difference": worst, "exact_tensors": exact, "float_tensors": floating}
