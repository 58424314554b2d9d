"""Snapshot and restore everything a training step reads and writes, for from-the-same-state comparisons.

A snapshot holds a copy of every torch tensor reachable from the given objects (env, managers, terms,
agent and its optimizers, replay buffer, collector), the simulation state through the backend's public
``state_tensors()``, and the state of every torch generator. Restoring copies the values back in place,
so CUDA graphs that captured those tensors keep working.
"""

from __future__ import annotations

import copy
import dataclasses
import types
from typing import Any

import mujoco
import torch

import simcore

_ATOMS = (str, bytes, int, float, bool, complex, type(None), types.FunctionType, types.BuiltinFunctionType)


SOLVER_OUTPUTS = ("derived.cfrc_ext", "qacc_warmstart", "derived.sensordata", "contact_force")
"""Name endings of state the iterative constraint solver produces or that is read straight from its contact
wrenches: the backend's contact wrenches and warm start, the sensor outputs (the G1 scene's sensors are contact
sensors) and the robot view's per-body contact forces. On a GPU the solver's float-atomic accumulation and
tolerance-based early exit move these by more than rounding between two executions of the same step, so
they are compared at a force-sized tolerance (5% of their largest magnitude); the states they produce
(positions, velocities, observations, rewards, flags) keep the tight one."""


def is_solver_output(name: str) -> bool:
    """Whether the snapshot tensor ``name`` is one of the ``SOLVER_OUTPUTS``."""
    return name.endswith(SOLVER_OUTPUTS)


def without_constraints(env_cfg: Any) -> Any:
    """``env_cfg`` with the constraint solver turned off in its model (no contacts, no joint limits).

    On a GPU the solver is not repeatable: from one saved state, two executions of a contact step differ in
    joint velocity by up to 0.4 rad/s (H200, MuJoCo Warp 4.0: contact rows are assembled with atomics and the
    solver stops on a tolerance), so no tolerance separates that from a bug. Without constraints the step is
    the smooth dynamics alone and repeats to float32 rounding. The robot then falls through the floor, which
    exercises terminations and resets within a few steps.
    """
    factory = env_cfg.scene.model_factory

    def model(**kwargs) -> mujoco.MjModel:
        built = copy.deepcopy(factory(**kwargs))  # the factory may cache its model (kwargs: a terrain's)
        built.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)
        return built

    return dataclasses.replace(env_cfg, scene=dataclasses.replace(env_cfg.scene, model_factory=model))


def _walk(roots: list[Any]) -> tuple[list[torch.Tensor], list[torch.Generator]]:
    tensors, generators, _ = _walk_named(roots)
    return tensors, generators


def _walk_named(roots: list[Any]) -> tuple[list[torch.Tensor], list[torch.Generator], dict[int, str]]:
    """Every tensor and generator reachable from ``roots``, and a name per tensor: the backend's state name,
    else the first attribute path that reached it (``root0.reward_manager._buffer``)."""
    names: dict[int, str] = {}
    tensors: dict[int, torch.Tensor] = {}
    generators: dict[int, torch.Generator] = {}
    seen: set[int] = set()
    stack: list[tuple[Any, str]] = [(root, f"root{i}") for i, root in enumerate(roots)]
    stack.reverse()
    while stack:
        obj, path = stack.pop()
        if id(obj) in seen or isinstance(obj, (*_ATOMS, type, types.ModuleType)):
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            # broadcast views (stride 0) cannot be written in place; what they view is state elsewhere
            if not any(stride == 0 and size > 1 for stride, size in zip(obj.stride(), obj.shape)):
                tensors[id(obj)] = obj
                names.setdefault(id(obj), path)
        elif isinstance(obj, torch.Generator):
            generators[id(obj)] = obj
        elif isinstance(obj, simcore.SimBackend):
            for name, tensor in obj.state_tensors().items():
                names[id(tensor)] = name  # the backend's own name wins over any attribute path
                stack.append((tensor, name))
        elif isinstance(obj, dict):
            stack.extend((key, f"{path}<key>") for key in obj)
            stack.extend((value, f"{path}[{key!r}]") for key, value in obj.items())
        elif isinstance(obj, list | tuple | set | frozenset):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(obj))
        elif hasattr(obj, "__dict__"):
            stack.extend((value, f"{path}.{key}") for key, value in vars(obj).items())
        elif hasattr(obj, "__slots__"):
            stack.extend((getattr(obj, n), f"{path}.{n}") for n in obj.__slots__ if hasattr(obj, n))
    return list(tensors.values()), list(generators.values()), names


class StateSnapshot:
    """Copies of every tensor and generator state reachable from ``roots``; ``restore()`` puts them back."""

    def __init__(self, *roots: Any) -> None:
        self.tensors, self.generators, ids = _walk_named(list(roots))
        self.names = [ids[id(t)] for t in self.tensors]
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


def compare(
    a: StateSnapshot, b: StateSnapshot, *, rtol: float, atol: float, rtol_of_largest: float = 0.0
) -> dict[str, float]:
    """Assert two snapshots of the same tensors (or of two envs built alike: the same names) agree: exact for
    integers, booleans and generator states, within (rtol, atol) for floating point (``SOLVER_OUTPUTS`` within
    5% of their largest magnitude). With ``rtol_of_largest`` a float element may also differ by that fraction
    of its tensor's largest magnitude (rounding that went through the physics lands on every element at the
    scale of the largest). Every mismatch is listed by name. Returns the largest float difference seen and
    counts."""
    assert a.names == b.names
    worst = 0.0
    exact = floating = 0
    problems: list[str] = []
    for name, x, y in zip(a.names, a.values, b.values):
        if x.dtype.is_floating_point:
            floating += 1
            both_nan = torch.isnan(x) & torch.isnan(y)
            diff = torch.where(both_nan, 0.0, (x.double() - y.double()).abs())
            largest = float(diff.max()) if diff.numel() else 0.0
            if is_solver_output(name):
                scale = float(x.abs().max()) if x.numel() else 0.0
                ok = largest <= 0.05 * max(scale, 1.0)
            else:
                worst = max(worst, largest)
                scale = float(x.abs().nan_to_num(0.0, 0.0, 0.0).max()) if x.numel() else 0.0
                ok = torch.allclose(x, y, rtol=rtol, atol=atol + rtol_of_largest * scale, equal_nan=True)
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
