"""Checkpoints: ``<run_dir>/checkpoints/ckpt_<iteration>.pt``, written atomically, found by iteration number.

A checkpoint holds the agent's state (actor, critics, target networks, optimizers, normalizers, temperature:
whatever ``agent.state_dict()`` returns), every RNG state of the run, the completed iteration count, the
per-iteration timings so far (a resumed run's summary covers the whole run; the checkpointed iteration's
wall time is the one known when the checkpoint was written, short of the write itself), and what export needs to
rebuild the actor without an env (observation sizes, action metadata, observation term names).
The replay buffer is not saved: a resumed run refills it during warm-up.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.runner.atomic_files import atomic_torch_save

CHECKPOINT_DIR_NAME = "checkpoints"
CHECKPOINT_FORMAT_VERSION = 1
_CHECKPOINT_NAME = re.compile(r"^ckpt_(\d+)\.pt$")


def checkpoint_dir(run_dir: str | os.PathLike) -> Path:
    """Where a run's checkpoints live."""
    return Path(run_dir) / CHECKPOINT_DIR_NAME


def checkpoint_path(run_dir: str | os.PathLike, iteration: int) -> Path:
    """Path of the checkpoint taken after ``iteration`` completed iterations."""
    return checkpoint_dir(run_dir) / f"ckpt_{iteration:06d}.pt"


@cold_path
def latest_checkpoint(run_dir: str | os.PathLike) -> Path:
    """The checkpoint with the highest iteration in ``run_dir`` (``FileNotFoundError`` when there is none)."""
    folder = checkpoint_dir(run_dir)
    found = []
    if folder.is_dir():
        for entry in folder.iterdir():
            match = _CHECKPOINT_NAME.match(entry.name)
            if match:
                found.append((int(match.group(1)), entry))
    if not found:
        raise FileNotFoundError(f"no checkpoint (ckpt_<iteration>.pt) in {folder}")
    return max(found)[1]


@cold_path
def save_checkpoint(run_dir: str | os.PathLike, iteration: int, payload: dict[str, Any]) -> Path:
    """Atomically write ``payload`` (plus format version and iteration) as the checkpoint of ``iteration``."""
    return atomic_torch_save(
        {"format_version": CHECKPOINT_FORMAT_VERSION, "iteration": iteration, **payload},
        checkpoint_path(run_dir, iteration),
    )


@cold_path
def load_checkpoint(path: str | os.PathLike, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    """Load a checkpoint file (or the latest one of a run directory) and check its format version."""
    path = Path(path)
    if path.is_dir():
        path = latest_checkpoint(path)
    # weights_only=False: the payload holds plain containers and tensors we wrote ourselves.
    data = torch.load(path, map_location=map_location, weights_only=False)
    if not isinstance(data, dict) or data.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        found = data.get("format_version") if isinstance(data, dict) else type(data).__name__
        raise ValueError(
            f"{path} is not a trainrt checkpoint of format {CHECKPOINT_FORMAT_VERSION} (found {found})"
        )
    data["path"] = str(path)
    return data


@cold_path
def capture_rng_states(generators: dict[str, torch.Generator]) -> dict[str, torch.Tensor]:
    """The states of the named generators plus torch's global CPU (and CUDA) generators, as CPU tensors."""
    states = {name: gen.get_state().cpu() for name, gen in generators.items()}
    states["torch_cpu"] = torch.get_rng_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["torch_cuda"] = torch.stack([s for s in torch.cuda.get_rng_state_all()])
    return states


@cold_path
def restore_rng_states(generators: dict[str, torch.Generator], states: dict[str, torch.Tensor]) -> None:
    """Restore what :func:`capture_rng_states` saved (a generator missing from ``states`` is an error)."""
    missing = sorted(set(generators) - set(states))
    if missing:
        raise ValueError(f"checkpoint has no RNG state for {missing}; it has {sorted(states)}")
    for name, gen in generators.items():
        gen.set_state(states[name].cpu())
    torch.set_rng_state(states["torch_cpu"])
    if "torch_cuda" in states and torch.cuda.is_available():
        cuda_states = list(states["torch_cuda"])
        if len(cuda_states) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(cuda_states)


@cold_path
def load_agent_weights(agent: Any, state: dict[str, Any]) -> None:
    """Load a checkpoint's agent state into ``agent`` (resume, play, export), on any device.

    Generator states do not transfer between device types (a CUDA generator's state is not a CPU one's),
    so a checkpoint from another device type keeps the agent's own, freshly seeded generator states.
    """
    agent_state = state["agent"]
    saved_device = torch.device(state.get("device", "cpu"))
    if saved_device.type != torch.device(agent.device).type and "rng_state" in agent_state:
        agent_state = {**agent_state, "rng_state": agent.state_dict()["rng_state"]}
    agent.load_state_dict(agent_state)
