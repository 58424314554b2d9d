"""Checkpoints: ``<run_dir>/checkpoints/ckpt_<iteration>.pt``, written atomically, found by iteration number.

A checkpoint holds the agent's state (actor, critics, target networks, optimizers, normalizers, temperature:
whatever ``agent.state_dict()`` returns), every RNG state of the run, the completed iteration count, the
per-iteration timings so far (a resumed run's summary covers the whole run; the checkpointed iteration's
wall time is the one known when the checkpoint was written, short of the write itself), and what export needs to
rebuild the actor without an env (observation sizes, action metadata, observation term names).
It also carries the ``run_id`` of the run that wrote it (see ``trainrt.runner.run_dir``) and the replay
buffer's return statistics; the replay's rings only with ``training.save_replay=true``, otherwise a
resumed run refills the replay during warm-up.

A checkpoint is loaded with torch's weights-only unpickler, so loading one never runs code: a file whose
pickle names any other Python object (a ``__reduce__`` that runs a command, the numpy values of an earlier
version) is refused, naming ``trainrt checkpoint convert`` (``trainrt.runner.checkpoint_convert``) for a
trusted one. Loading names the file and the problem (empty, truncated, not a checkpoint, a directory or a
dangling symlink under the checkpoint's name, unreadable, Python objects); loading a run directory falls back
to the newest checkpoint that loads and belongs to the directory's run, saying so. play, eval and export also
name a checkpoint that lacks what they read, or whose weights do not fit the networks the run's config builds.
"""

from __future__ import annotations

import errno
import os
import pickle
import re
import stat
import sys
import time
import warnings
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from trainrt.hotpath import cold_path
from trainrt.runner.atomic_files import atomic_torch_save
from trainrt.runner.manifest import recorded_run_id

if TYPE_CHECKING:
    from trainrt.config import TrainConfig

CHECKPOINT_DIR_NAME = "checkpoints"
CHECKPOINT_FORMAT_VERSION = 1
_CHECKPOINT_NAME = re.compile(r"^ckpt_(\d+)\.pt$")
# The files trainrt writes with atomic_write, and the temporary names it writes them under first:
# mkstemp(prefix=f".{name}.", suffix=".tmp") adds a random part of [a-z0-9_] (8 characters in CPython).
_ATOMIC_TARGETS = (
    r"ckpt_\d+\.pt|config\.json|manifest\.json|run_summary\.json|policy(?:_\d+)?\.onnx|eval_\d+\.json"
)
_STALE_TEMP_NAME = re.compile(rf"^\.(?:{_ATOMIC_TARGETS})\.[a-z0-9_]{{6,8}}\.tmp$")
POLICY_CHECKPOINT_KEYS = ("agent", "env_meta.obs_dims", "env_meta.num_actions")
"""What play, eval and export read from a checkpoint (dotted keys)."""


def checkpoint_dir(run_dir: str | os.PathLike) -> Path:
    """Where a run's checkpoints live."""
    return Path(run_dir) / CHECKPOINT_DIR_NAME


def checkpoint_path(run_dir: str | os.PathLike, iteration: int) -> Path:
    """Path of the checkpoint taken after ``iteration`` completed iterations."""
    return checkpoint_dir(run_dir) / f"ckpt_{iteration:06d}.pt"


@cold_path
def checkpoints_newest_first(run_dir: str | os.PathLike) -> list[Path]:
    """The entries named ``ckpt_<iteration>.pt`` in ``run_dir``, highest iteration first (``[]`` when none).

    Entries are listed by name: one that is not a loadable file (a directory, a dangling symlink, an
    unreadable file) is listed too, and ``load_checkpoint`` names it and falls back past it.
    ``CheckpointError`` when the checkpoint folder cannot be listed.
    """
    folder = checkpoint_dir(run_dir)
    found = []
    if folder.is_dir():
        try:
            entries = list(folder.iterdir())
        except OSError as err:
            raise CheckpointError(
                f"cannot list the checkpoints in {folder} ({err.strerror}); make it readable (chmod u+rx)"
            ) from None
        for entry in entries:
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
def checkpoint_entry_problem(path: str | os.PathLike) -> str | None:
    """Why ``path``, an entry named like a checkpoint, is not a file to load (``None`` when it is one); the
    text follows ``checkpoint <path>``. ``FileNotFoundError`` when nothing is there."""
    path = Path(path)
    try:
        info = path.stat()
    except FileNotFoundError:
        if not path.is_symlink():
            raise FileNotFoundError(f"checkpoint not found: {path}") from None
        return f"is a symlink to {os.readlink(path)}, which does not exist (a dangling symlink)"
    except OSError as err:
        if err.errno == errno.ELOOP:
            return "is a symlink loop: it never reaches a file"
        return f"cannot be read ({err.strerror})"
    if stat.S_ISDIR(info.st_mode):
        return "is a directory, not a checkpoint file"
    if not stat.S_ISREG(info.st_mode):
        return "is not a regular file"
    return None


@cold_path
def _check_archive(path: Path) -> None:
    """``CheckpointError`` unless ``path`` opens and is a whole zip archive (what torch.save writes)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            starts_like_zip = handle.read(4) == b"PK\x03\x04"
    except OSError as err:
        fix = "; make it readable (chmod u+r) or remove it" if isinstance(err, PermissionError) else ""
        raise CheckpointError(f"checkpoint {path} cannot be read ({err.strerror}){fix}") from None
    if size == 0:
        raise CheckpointError(f"checkpoint {path} is empty (0 bytes): the write that made it did not finish")
    # Checking the archive first keeps torn files away from torch's reader.
    if not zipfile.is_zipfile(path):
        problem = (
            f"is truncated ({size} bytes, the archive's end is missing)"
            if starts_like_zip
            else f"is not a checkpoint ({size} bytes that are not a torch.save archive)"
        )
        raise CheckpointError(f"checkpoint {path} {problem}")


@cold_path
def _python_objects_refusal(path: str | os.PathLike, names: list[str]) -> CheckpointError:
    """The one-line refusal of checkpoint ``path`` whose pickle names the Python objects ``names``."""
    shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
    return CheckpointError(
        f"checkpoint {path} holds Python objects that could run code when loaded ({shown}), so trainrt "
        "refuses it; if you trust it (a checkpoint of an earlier trainrt version holding numpy values), "
        f"`trainrt checkpoint convert {path}` rewrites it as tensors without running code (the original "
        "is kept)"
    )


@cold_path
def unsafe_globals(path: str | os.PathLike) -> list[str]:
    """The Python objects (``module.name``) the pickle of checkpoint ``path`` names beyond what torch's
    weights-only loader allows; read without unpickling (``[]`` when it names none or cannot be scanned)."""
    try:
        return list(torch.serialization.get_unsafe_globals_in_checkpoint(path))
    except Exception:  # a torn pickle: the load's own error says so
        return []


@cold_path
def check_checkpoint_format(path: str | os.PathLike, data: Any) -> None:
    """``CheckpointError`` unless ``data``, the payload of ``path``, is a dict of this checkpoint format."""
    if not isinstance(data, dict) or data.get("format_version") != CHECKPOINT_FORMAT_VERSION:
        found = data.get("format_version") if isinstance(data, dict) else type(data).__name__
        raise CheckpointError(
            f"{path} is not a trainrt checkpoint of format {CHECKPOINT_FORMAT_VERSION} (found {found})"
        )


@cold_path
def read_checkpoint_file(path: str | os.PathLike, map_location: torch.device | str = "cpu") -> dict[str, Any]:
    """Load one checkpoint file without running code; ``CheckpointError`` naming the file and its problem.

    The problems: not a file (a directory, a dangling symlink or a loop under its name), unreadable, empty,
    torn, foreign, or holding Python objects beyond tensors and plain containers (refused unloaded: unpickling
    them could run code). ``FileNotFoundError`` when nothing is at ``path``.
    """
    path = Path(path)
    problem = checkpoint_entry_problem(path)
    if problem is not None:
        raise CheckpointError(f"checkpoint {path} {problem}")
    _check_archive(path)
    try:
        # weights_only=True: tensors, containers and plain values only; any other object is refused unbuilt.
        data = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as err:  # torch reports torn archives as RuntimeError, EOFError, UnpicklingError...
        names = unsafe_globals(path) if isinstance(err, pickle.UnpicklingError) else []
        if names:
            raise _python_objects_refusal(path, names) from None
        raise CheckpointError(
            f"checkpoint {path} cannot be read ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''})"
            "; it is damaged or was not written by trainrt"
        ) from None
    check_checkpoint_format(path, data)
    data["path"] = str(path)
    return data


@cold_path
def check_checkpoint_keys(state: dict[str, Any], keys: tuple[str, ...]) -> None:
    """``CheckpointError`` naming the checkpoint file and the first of the dotted ``keys`` it lacks."""
    for key in keys:
        found: Any = state
        for part in key.split("."):
            if not isinstance(found, dict) or part not in found:
                held = sorted(k for k in state if k != "path")
                raise CheckpointError(
                    f"checkpoint {state.get('path')} has no {key!r} (it holds {', '.join(held)}): it is not "
                    "a whole trainrt checkpoint; give another one with --checkpoint ITERATION"
                )
            found = found[part]


@cold_path
def load_checkpoint(
    path: str | os.PathLike,
    map_location: torch.device | str = "cpu",
    *,
    run_id: str | None = None,
    log: Callable[[str], None] | None = None,
    require: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Load a checkpoint file, or the newest usable checkpoint of a run directory.

    For a directory, checkpoints are tried newest first: one that does not load (empty, truncated, garbage,
    Python objects, a directory or a dangling symlink under a checkpoint's name, unreadable), that lacks one
    of the dotted ``require`` keys, or that another run wrote (its ``run_id`` differs from ``run_id``, by
    default the id the directory's ``manifest.json`` records) is skipped with a note to ``log`` (stderr by
    default) naming the file and why, and the next older one is tried. ``FileNotFoundError`` when the
    directory has none, ``CheckpointError`` listing every problem when none is usable. A file is loaded as it
    is (no fallback, no run-id check), ``CheckpointError`` when it lacks a ``require`` key.
    """
    path = Path(path)
    if not path.is_dir():
        data = read_checkpoint_file(path, map_location)
        check_checkpoint_keys(data, require)
        return data
    say = log or (lambda line: print(line, file=sys.stderr, flush=True))
    candidates = checkpoints_newest_first(path)
    if not candidates:
        raise FileNotFoundError(f"no checkpoint (ckpt_<iteration>.pt) in {checkpoint_dir(path)}")
    owner = run_id if run_id is not None else recorded_run_id(path)
    problems = []
    for candidate in candidates:
        try:
            data = read_checkpoint_file(candidate, map_location)
            check_checkpoint_keys(data, require)
        except (CheckpointError, OSError) as err:  # OSError: an entry removed while it was being read
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
    # An entry that is there but no file (a directory, a dangling symlink) is named by the load that follows.
    if text.isdigit():
        path = checkpoint_path(run_dir, int(text))
        if not (path.exists() or path.is_symlink()):
            raise FileNotFoundError(
                f"no checkpoint for iteration {text} in {run_dir}: {path} does not exist; "
                f"{_iterations_text(run_dir)}"
            )
        return path
    path = Path(text)
    if not (path.exists() or path.is_symlink()):
        raise FileNotFoundError(f"checkpoint {path} not found (give a file or an iteration number)")
    return path


def _iterations_text(run_dir: str | os.PathLike) -> str:
    """``the run has checkpoints for iterations 2, 4, 6`` (the newest ten at most), or that it has none."""
    try:
        entries = checkpoints_newest_first(run_dir)
    except CheckpointError:
        return "its checkpoint folder cannot be listed"
    iterations = [int(_CHECKPOINT_NAME.match(e.name).group(1)) for e in entries]
    if not iterations:
        return "the run has no checkpoints"
    shown = ", ".join(str(i) for i in sorted(iterations[:10]))
    more = f" (the newest 10 of {len(iterations)})" if len(iterations) > 10 else ""
    return f"the run has checkpoints for iterations {shown}{more}"


@cold_path
def load_run_checkpoint(
    run_dir: str | os.PathLike,
    checkpoint: str | os.PathLike | None = None,
    map_location: torch.device | str = "cpu",
    *,
    log: Callable[[str], None] | None = None,
    require: tuple[str, ...] = (),
) -> dict[str, Any]:
    """The checkpoint of ``run_dir`` that play, eval and export use: its newest usable one (``checkpoint``
    None; one without the dotted ``require`` keys is skipped like a damaged one), or the given iteration
    number or file, which must hold them and belong to the run: ``CheckpointError`` naming both run ids when
    another run wrote it. Besides ``path``, the returned state says ``run_dir`` (for messages)."""
    path = resolve_run_checkpoint(run_dir, checkpoint)
    if checkpoint is None:
        data = load_checkpoint(path, map_location, log=log, require=require)
    else:
        data = read_checkpoint_file(path, map_location)
        check_checkpoint_keys(data, require)
        _check_run_owns(run_dir, path, data)
    data["run_dir"] = str(run_dir)
    return data


@cold_path
def _check_run_owns(run_dir: str | os.PathLike, path: Path, data: dict[str, Any]) -> None:
    """``CheckpointError`` naming both run ids when checkpoint ``path`` (``data``) belongs to another run."""
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
def check_action_mapping(state: dict[str, Any], env: Any, source: str = "checkpoint") -> None:
    """ValueError unless ``env`` turns actions into the joint targets the checkpoint ``state`` was trained with.

    Compares the per-joint action scales and joint names of the checkpoint's ``env_meta`` with the env's
    ``action_meta()`` (``source`` names what ``state`` describes in the message: an exported ONNX policy passes
    its metadata as ``env_meta``). A task's action bounds can change between versions of the code (adr/0014); a policy
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
            f"{source} {state.get('path')} was trained with another action mapping than this env builds "
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
        agent_state = {**agent_state, "rng_state": agent.rng_state()}
    agent.load_state_dict(agent_state)


_SIZE_MISMATCH = re.compile(
    r"size mismatch for (\S+): copying a param with shape torch\.Size\(\[([^\]]*)\]\) from checkpoint, "
    r"the shape in current model is torch\.Size\(\[([^\]]*)\]\)"
)


@cold_path
def weights_mismatch(err: Exception) -> str:
    """What ``load_agent_weights``'s error ``err`` says does not fit, in one line: the first tensor whose
    shape differs (and how many more do), a part the checkpoint lacks, or the error's first lines."""
    text = str(err)
    sizes = _SIZE_MISMATCH.findall(text)
    if sizes:
        owner = re.search(r"state_dict for (\w+)", text)
        name, saved, built = sizes[0]
        others = len(sizes) - 1
        more = f" (and {others} more tensor{'s' if others > 1 else ''})" if others else ""
        where = f"{owner.group(1)} {name}" if owner else name
        return f"size mismatch: {where} is [{saved}] in the checkpoint, [{built}] in the networks now{more}"
    if isinstance(err, KeyError):
        return f"the checkpoint's agent state has no {err.args[0]!r}"
    return " ".join(line.strip() for line in text.strip().splitlines()[:2])


@cold_path
def load_fitting_weights(
    state: dict[str, Any],
    agent: Any,
    cfg: TrainConfig,
    obs_dims: dict[str, int] | None = None,
    *,
    action: str = "cannot resume from",
    built_by: str = "this config",
    fix: str = "drop those overrides to resume",
) -> None:
    """Load checkpoint ``state``'s weights into ``agent`` (built from ``cfg`` for ``obs_dims``), or raise a
    one-line ``CheckpointError``: ``action`` and the file, the first tensor that does not fit, the
    ``algo.params`` that differ from the checkpoint's config, the observation widths when they differ, and
    ``fix``. Resume's wording by default (``OffPolicyRunner._probe_config``).
    """
    try:
        load_agent_weights(agent, state)
    except (RuntimeError, KeyError, ValueError) as err:
        saved = (state.get("config") or {}).get("algo", {}).get("params", {})
        now = cfg.algo.params.model_dump(mode="json")
        differ = [
            f"{k}={now[k]!r} (the run used {saved[k]!r})" for k in now if k in saved and now[k] != saved[k]
        ]
        saved_dims = (state.get("env_meta") or {}).get("obs_dims")
        widths = ""
        if obs_dims is not None and saved_dims is not None and dict(saved_dims) != dict(obs_dims):
            widths = (
                f"; observation widths {dict(obs_dims)} differ from the run's {dict(saved_dims)} "
                "(task.observations or another task setting changes them)"
            )
        raise CheckpointError(
            f"{action} {state.get('path')}: its weights do not fit the networks {built_by} builds "
            f"({type(err).__name__}: {weights_mismatch(err)}); algo.params that differ from the run's: "
            f"{', '.join(differ) or 'none'}{widths}; {fix}"
        ) from err


@cold_path
def load_run_weights(
    state: dict[str, Any],
    agent: Any,
    cfg: TrainConfig,
    obs_dims: dict[str, int] | None = None,
    *,
    action: str,
) -> None:
    """``load_fitting_weights`` for play, eval and export, whose networks the run's ``config.json`` sizes
    (in the ``run_dir`` that ``load_run_checkpoint`` records): the fix is to set the run's values back."""
    run_dir = state.get("run_dir")
    config = str(Path(run_dir) / "config.json") if run_dir is not None else "the run's config.json"
    load_fitting_weights(
        state,
        agent,
        cfg,
        obs_dims,
        action=action,
        built_by=config,
        fix=f"set those values in {config} back to the run's, or give a checkpoint trained with them",
    )


@cold_path
def remove_stale_temp_files(
    folder: str | os.PathLike, *, min_age_sec: float = 60.0, log: Callable[[str], None] | None = None
) -> list[Path]:
    """Remove the temporary files an ``atomic_write`` killed half way (``kill -9``) left in ``folder``.

    Only regular files named exactly as ``atomic_write`` names its temporaries of the files trainrt writes
    (``.<target>.<mkstemp part>.tmp`` for checkpoints, ``config.json``, ``manifest.json``,
    ``run_summary.json``, ``policy*.onnx``, ``eval_<iteration>.json``) and unchanged for ``min_age_sec`` (a
    younger one may be a write in progress, say an export beside a starting run) are removed; nothing else,
    and nothing in subfolders.
    Returns the removed paths; ``log`` gets one line per removed file.
    """
    removed: list[Path] = []
    try:
        entries = list(Path(folder).iterdir())
    except OSError:  # no folder (yet), or one we cannot list: nothing of ours to clear
        return removed
    now = time.time()
    for entry in entries:
        if not _STALE_TEMP_NAME.match(entry.name):
            continue
        try:
            info = entry.lstat()
            if not stat.S_ISREG(info.st_mode) or now - info.st_mtime < min_age_sec:
                continue
            entry.unlink()
        except OSError:  # removed meanwhile, or not ours to remove
            continue
        removed.append(entry)
        if log is not None:
            log(f"removed {entry}, the temporary file of a write that was killed before it finished")
    return removed


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
