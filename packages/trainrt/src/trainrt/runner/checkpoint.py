"""Checkpoints: ``<run_dir>/checkpoints/ckpt_<iteration>.pt``, written atomically, found by iteration number.

A checkpoint holds the agent's state (actor, critics, target networks, optimizers, normalizers, temperature:
whatever ``agent.state_dict()`` returns), every RNG state of the run, the completed iteration count, the
per-iteration timings so far (a resumed run's summary covers the whole run; the checkpointed iteration's
wall time is the one known when the checkpoint was written, short of the write itself), and what export needs to
rebuild the actor without an env (observation sizes, action metadata, observation term names).
It also carries the ``run_id`` of the run that wrote it (see ``trainrt.runner.run_dir``) and the replay
buffer's return statistics; the replay's rings only with ``training.save_replay=true``, otherwise a
resumed run refills the replay during warm-up.

Loading names the file and the problem (empty, truncated, not a checkpoint); loading a run directory
falls back to the newest checkpoint that loads and belongs to the directory's run, saying so.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.runner.atomic_files import atomic_torch_save
from trainrt.runner.manifest import recorded_run_id

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
def checkpoints_newest_first(run_dir: str | os.PathLike) -> list[Path]:
    """The ``ckpt_<iteration>.pt`` files of ``run_dir``, highest iteration first (``[]`` when there are none)."""
    folder = checkpoint_dir(run_dir)
    found = []
    if folder.is_dir():
        for entry in folder.iterdir():
            match = _CHECKPOINT_NAME.match(entry.name)
            if match:
                found.append((int(match.group(1)), entry))
    return [entry for _, entry in sorted(found, reverse=True)]


@cold_path
def latest_checkpoint(run_dir: str | os.PathLike) -> Path:
    """The checkpoint with the highest iteration in ``run_dir`` (``FileNotFoundError`` when there is none)."""
    found = checkpoints_newest_first(run_dir)
    if not found:
        raise FileNotFoundError(f"no checkpoint (ckpt_<iteration>.pt) in {checkpoint_dir(run_dir)}")
    return found[0]


@cold_path
def save_checkpoint(run_dir: str | os.PathLike, iteration: int, payload: dict[str, Any]) -> Path:
    """Atomically write ``payload`` (plus format version and iteration) as the checkpoint of ``iteration``."""
    return atomic_torch_save(
        {"format_version": CHECKPOINT_FORMAT_VERSION, "iteration": iteration, **payload},
        checkpoint_path(run_dir, iteration),
    )


class CheckpointError(ValueError):
    """A checkpoint file cannot be used: the message names the file and the problem."""


@cold_path
def read_checkpoint_file(path: str | os.PathLike, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    """Load one checkpoint file; ``CheckpointError`` naming the file for an empty, torn or foreign file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint not found: {path}")
    size = path.stat().st_size
    if size == 0:
        raise CheckpointError(f"checkpoint {path} is empty (0 bytes): the write that made it did not finish")
    # torch.save writes a zip archive; checking the archive first keeps torn files away from torch's reader.
    if not zipfile.is_zipfile(path):
        with open(path, "rb") as handle:
            starts_like_zip = handle.read(4) == b"PK\x03\x04"
        problem = (
            f"is truncated ({size} bytes, the archive's end is missing)"
            if starts_like_zip
            else f"is not a checkpoint ({size} bytes that are not a torch.save archive)"
        )
        raise CheckpointError(f"checkpoint {path} {problem}")
    try:
        # weights_only=False: the payload holds plain containers and tensors we wrote ourselves.
        data = torch.load(path, map_location=map_location, weights_only=False)
    except Exception as err:  # torch reports torn archives as RuntimeError, EOFError, UnpicklingError...
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
            "; it is damaged or was not written by trainrt"
        ) from None
    if not isinstance(data, dict) or data.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        found = data.get("format_version") if isinstance(data, dict) else type(data).__name__
        raise CheckpointError(
            f"{path} is not a trainrt checkpoint of format {CHECKPOINT_FORMAT_VERSION} (found {found})"
        )
    data["path"] = str(path)
    return data


@cold_path
def load_checkpoint(
    path: str | os.PathLike,
    map_location: torch.device | str = "cpu",
    *,
    run_id: str | None = None,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Load a checkpoint file, or the newest usable checkpoint of a run directory.

    For a directory, checkpoints are tried newest first: one that does not load (empty, truncated, garbage)
    or that another run wrote (its ``run_id`` differs from ``run_id``, by default the id the directory's
    ``manifest.json`` records) is skipped with a note to ``log`` (stderr by default) naming the file and why,
    and the next older one is tried. ``FileNotFoundError`` when the directory has none, ``CheckpointError``
    listing every problem when none is usable. A file is loaded as it is (no fallback, no run-id check).
    """
    path = Path(path)
    if not path.is_dir():
        return read_checkpoint_file(path, map_location)
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    candidates = checkpoints_newest_first(path)
    if not candidates:
        raise FileNotFoundError(f"no checkpoint (ckpt_<iteration>.pt) in {checkpoint_dir(path)}")
    owner = run_id if run_id is not None else recorded_run_id(path)
    problems = []
    for candidate in candidates:
        try:
            data = read_checkpoint_file(candidate, map_location)
        except CheckpointError as err:
            problems.append(str(err))
            continue
        written_by = data.get("run_id")
        if owner is not None and written_by is not None and written_by != owner:
            problems.append(
                f"checkpoint {candidate} belongs to run {written_by}, not to run {owner} of {path}"
            )
            continue
        for problem in problems:
            say(f"warning: {problem}; skipping it")
        if problems:
            say(
                f"falling back to {candidate} (iteration {data['iteration']}), the newest checkpoint that loads"
            )
        return data
    raise CheckpointError(f"no usable checkpoint in {checkpoint_dir(path)}:\n  " + "\n  ".join(problems))


@cold_path
def resolve_run_checkpoint(run_dir: str | os.PathLike, checkpoint: str | os.PathLike | None) -> Path:
    """The checkpoint a command line names: the run's newest (None: ``run_dir``), an iteration number of
    ``run_dir``, or a file path."""
    if checkpoint is None:
        return Path(run_dir)
    text = str(checkpoint)
    if text.isdigit():
        path = checkpoint_path(run_dir, int(text))
        if not path.is_file():
            raise FileNotFoundError(f"no checkpoint for iteration {text} in {run_dir}: {path} does not exist")
        return path
    path = Path(text)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {path} not found (give a file or an iteration number)")
    return path


@cold_path
def load_run_checkpoint(
    run_dir: str | os.PathLike,
    checkpoint: str | os.PathLike | None = None,
    map_location: torch.device | str = "cpu",
    *,
    log: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The checkpoint of ``run_dir`` that play, eval and export use: its newest usable one (``checkpoint``
    None), or the given iteration number or file, which must belong to the run: ``CheckpointError`` naming
    both run ids when another run wrote it."""
    path = resolve_run_checkpoint(run_dir, checkpoint)
    if path.is_dir():
        return load_checkpoint(path, map_location, log=log)
    data = read_checkpoint_file(path, map_location)
    owner, written_by = recorded_run_id(run_dir), data.get("run_id")
    if owner is not None and written_by is not None and written_by != owner:
        own_dir = path.parent.parent
        fix = (
            f"give its own run directory, {own_dir}, instead"
            if recorded_run_id(own_dir) == written_by
            else f"give the run directory of run {written_by} instead"
        )
        raise CheckpointError(
            f"checkpoint {path} belongs to run {written_by}, not to run {owner} of {run_dir}: {fix}"
        )
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
def check_action_mapping(state: dict[str, Any], env: Any) -> None:
    """ValueError unless ``env`` turns actions into the joint targets the checkpoint ``state`` was trained with.

    Compares the per-joint action scales and joint names of the checkpoint's ``env_meta`` with the env's
    ``action_meta()``. A task's action bounds can change between versions of the code (adr/0014); a policy
    loaded into an env that maps its actions differently would command other joint targets without an
    error. Checkpoints without action metadata pass.
    """
    trained = state.get("env_meta", {}).get("action_meta", {})
    built = env.action_meta()
    names, scales = trained.get("joint_names"), trained.get("action_scale")
    if scales is None or built.get("action_scale") is None:
        return
    problem = None
    if (
        names is not None
        and built.get("joint_names") is not None
        and list(names) != list(built["joint_names"])
    ):
        problem = "other joints or another joint order"
    elif len(scales) != len(built["action_scale"]):
        problem = f"{len(scales)} action columns, this env has {len(built['action_scale'])}"
    else:
        labels = names or [f"column {i}" for i in range(len(scales))]
        for label, a, b in zip(labels, scales, built["action_scale"]):
            if abs(float(a) - float(b)) > 1e-5 * max(1.0, abs(float(b))):
                problem = f"{label}: {float(a):.4g} rad per unit action there, {float(b):.4g} here"
                break
    if problem is not None:
        raise ValueError(
            f"checkpoint {state.get('path')} was trained with another action mapping than this env builds "
            f"({problem}); its actions would command other joint targets. Use the code version that trained "
            "it (the commit in its run_summary.json), or, to resume, give the scales it was trained with "
            "(the checkpoint's env_meta.action_meta.action_scale) as task.actions.joint_pos.params.scale "
            "(see adr/0014)"
        )


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


class MotionClipChangedWarning(UserWarning):
    """The motion clip file a run's env reads now is not the one a checkpoint was trained on."""


@cold_path
def check_motion_clips(
    state: dict[str, Any], env: Any, *, consequence: str = "the results are for the clip as it is now"
) -> None:
    """``MotionClipChangedWarning`` for each motion clip ``env`` reads whose content differs from the clip the
    checkpoint ``state`` was trained on (a file replaced at the run's path, a resume on another clip), ending
    with ``consequence``. Content decides, not the path: the same file moved elsewhere passes. Checkpoints
    without clip digests pass."""
    from trainrt.runner.build import motion_clip_digests

    trained = state.get("env_meta", {}).get("motion_clips") or {}
    for name, now in motion_clip_digests(env).items():
        then = trained.get(name)
        if then is not None and then.get("sha256") != now["sha256"]:
            warnings.warn(
                f"motion clip {now['path']} (command {name!r}) is not the clip checkpoint iteration "
                f"{state.get('iteration')} was trained on ({then.get('path')}, another sha256): {consequence}",
                MotionClipChangedWarning,
                stacklevel=2,
            )
