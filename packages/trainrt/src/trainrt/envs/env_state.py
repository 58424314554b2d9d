"""The env's state as named tensors: saved into checkpoints, copied back in place to continue exactly.

Everything an env carries from one step to the next lives in torch tensors: the simulation (the backend's
public ``state_tensors()``: time, qpos, qvel, warm start, randomized model fields, ...) and the managers'
buffers (episode counters, commands and their timers, the last actions, observation buffers, episode sums).
Rather than every manager and term listing its buffers by hand (one forgotten buffer breaks an exact
resume without an error), :func:`named_state_tensors` walks the env's own objects and finds them all.

The walk enters only trainrt's and simcore's objects and plain containers (never torch, MuJoCo or Warp
internals), takes a simulation backend's state through ``state_tensors()`` alone, and names each tensor by
the first attribute path that reaches it (``reward_manager._episode_sums``). Two envs built from the same
config have the same names, so a state saved by one loads into the other. Generators are not state here:
the env's generator is saved with the run's other generators.
"""

from __future__ import annotations

from typing import Any

import torch

import simcore
from trainrt.hotpath import cold_path

_OWN_PACKAGES = ("trainrt.", "simcore.")


def _is_own_object(obj: Any) -> bool:
    """Whether ``obj`` is an instance of a class defined in trainrt or simcore."""
    return type(obj).__module__.startswith(_OWN_PACKAGES) and not isinstance(obj, type)


def _writable_in_place(tensor: torch.Tensor) -> bool:
    """A broadcast view (a stride-0 dimension) cannot be written in place; what it views is state elsewhere."""
    return not any(stride == 0 and size > 1 for stride, size in zip(tensor.stride(), tensor.shape))


@cold_path
def named_state_tensors(root: Any, *, skip: tuple[Any, ...] = ()) -> dict[str, torch.Tensor]:
    """Every tensor reachable from ``root`` through trainrt/simcore objects and containers, by name.

    Args:
        root: the object to walk (an env, a collector).
        skip: objects not to enter (another owner saves them: the agent, the replay).

    Returns:
        ``{name: live tensor}`` in walk order; a backend's tensors are named ``sim.<its name>``.
    """
    found: dict[str, torch.Tensor] = {}
    seen = {id(obj) for obj in skip}
    stack: list[tuple[Any, str]] = [(root, "")]
    while stack:
        obj, path = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, torch.Tensor):
            if _writable_in_place(obj):
                found[path] = obj
        elif isinstance(obj, simcore.SimBackend):
            items = [(tensor, f"sim.{name}") for name, tensor in obj.state_tensors().items()]
            stack.extend(reversed(items))
        elif isinstance(obj, dict):
            items = [(value, f"{path}[{key!r}]") for key, value in obj.items()]
            stack.extend(reversed(items))
        elif isinstance(obj, list | tuple):
            stack.extend(reversed([(item, f"{path}[{i}]") for i, item in enumerate(obj)]))
        elif _is_own_object(obj) and hasattr(obj, "__dict__"):
            prefix = f"{path}." if path else ""
            stack.extend(reversed([(value, f"{prefix}{key}") for key, value in vars(obj).items()]))
    return found


@cold_path
def state_dict_of(root: Any, *, skip: tuple[Any, ...] = ()) -> dict[str, torch.Tensor]:
    """CPU copies of :func:`named_state_tensors` of ``root``, for a checkpoint."""
    return {name: t.detach().cpu().clone() for name, t in named_state_tensors(root, skip=skip).items()}


@cold_path
def load_state_dict_into(
    root: Any, state: dict[str, torch.Tensor], *, skip: tuple[Any, ...] = (), what: str = "env state"
) -> None:
    """Copy a :func:`state_dict_of` back into ``root``'s live tensors, in place (captured graphs stay valid).

    ``ValueError`` naming the first differences when the saved names, shapes or dtypes are not this object's
    (built from another config, another num_envs); nothing is written then.
    """
    live = named_state_tensors(root, skip=skip)
    problems = [f"{name} is missing from the saved {what}" for name in live if name not in state]
    problems += [f"{name} is saved but not built here" for name in state if name not in live]
    for name in live.keys() & state.keys():
        mine, saved = live[name], state[name]
        if tuple(mine.shape) != tuple(saved.shape) or mine.dtype != saved.dtype:
            problems.append(
                f"{name} is {tuple(saved.shape)} {saved.dtype} saved, {tuple(mine.shape)} {mine.dtype} here"
            )
    if problems:
        shown = "; ".join(sorted(problems)[:4]) + (
            f"; and {len(problems) - 4} more" if len(problems) > 4 else ""
        )
        raise ValueError(f"the saved {what} does not fit: {shown}")
    with torch.no_grad():
        for name, tensor in live.items():
            tensor.copy_(state[name].to(tensor.device))
