"""The compilers' caches of a run: one folder a user can keep on shared storage, and what the run found there.

A run's warm-up compiles three kinds of code: MuJoCo Warp's kernels (Warp), the learner's and the collector's
compiled parts (torch inductor) and the GPU kernels both generate (Triton). Each compiler keeps what it
compiled in a cache folder of its own, by default on the machine (the user's home or ``/tmp``), so a fresh
machine compiles everything again: minutes before iteration 1, against seconds with the caches warm.

``$TRAINRT_CACHE_DIR`` names one folder for all three: the run points Warp's kernel cache at
``<dir>/warp`` (``simcore.set_kernel_cache_dir``), ``TORCHINDUCTOR_CACHE_DIR`` at ``<dir>/inductor`` and
``TRITON_CACHE_DIR`` at ``<dir>/triton`` before anything compiles (it replaces values those two variables had).
On storage the cluster's nodes share, only the first run on the first node compiles. It is an environment
variable, not a config setting, because it belongs to the machine or cluster, not to a run: ``config.json``
rebuilds the same run anywhere. A value that is a file, or a folder that cannot be created or written, is
refused before the run writes anything.

Every run records the folders in use (the compilers' defaults without the variable) and how full each was
before and after warm-up (``CompileCacheRecord``, the summary's ``compile_cache``): entries that did not grow
mean a warm cache was reused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import simcore
from trainrt.hotpath import cold_path
from trainrt.runner.failures import ExpectedRunFailure

CACHE_DIR_ENV = "TRAINRT_CACHE_DIR"
"""Environment variable naming the folder the compilers' caches go below (unset: each compiler's default)."""
INDUCTOR_ENV = "TORCHINDUCTOR_CACHE_DIR"
TRITON_ENV = "TRITON_CACHE_DIR"
CACHE_NAMES = ("warp", "inductor", "triton")
"""The caches, and the names of their folders below ``$TRAINRT_CACHE_DIR``."""
UNITS = {"warp": "modules", "inductor": "files", "triton": "kernels"}
"""What a cache's entries count: Warp's compiled modules, inductor's files, Triton's compiled kernels."""


class CacheDirError(ExpectedRunFailure, ValueError):
    """``$TRAINRT_CACHE_DIR`` names a file, or a folder that cannot be created or written: the message names
    the variable and the fix. A ``ValueError`` too, so the commands treat it as bad input (exit code 2)."""


@cold_path
def resolve_cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder ``$TRAINRT_CACHE_DIR`` names (created if missing), or None when it is unset or empty.

    Raises ``CacheDirError`` naming the variable and the fix when the value is a file, or a folder that
    cannot be created or written.
    """
    env = os.environ if environ is None else environ
    value = env.get(CACHE_DIR_ENV, "").strip()
    if not value:
        return None
    path = Path(value).expanduser()
    fix = (
        "point it at a folder this user can write (on storage the nodes share, so every node reuses what "
        "one compiled), or unset it to keep each compiler's default cache"
    )
    if path.exists() and not path.is_dir():
        raise CacheDirError(f"{CACHE_DIR_ENV}={value} is a file, not a folder: {fix}")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise CacheDirError(
            f"{CACHE_DIR_ENV}={value}: the folder cannot be created ({err.strerror or err}): {fix}"
        ) from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise CacheDirError(f"{CACHE_DIR_ENV}={value}: this user cannot write in the folder: {fix}")
    return path.resolve()


@cold_path
def point_compile_caches(backend: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """Point every compiler's cache below ``$TRAINRT_CACHE_DIR`` (see the module docstring); the folder, or
    None when the variable is unset (the caches stay where they are). Call it before anything compiles."""
    root = resolve_cache_dir(environ)
    if root is None:
        return None
    os.environ[INDUCTOR_ENV] = str(root / "inductor")
    os.environ[TRITON_ENV] = str(root / "triton")
    try:
        simcore.set_kernel_cache_dir(backend, root / "warp")
    except OSError as err:
        raise CacheDirError(
            f"{CACHE_DIR_ENV}={root}: Warp's cache folder cannot be created ({err.strerror or err}): "
            "point the variable at a folder this user can write"
        ) from None
    return root


@cold_path
def cache_contents(backend: str) -> dict[str, tuple[Path | None, int | None]]:
    """``{cache name: (folder, entries)}`` for the folder each compiler reads and writes now (``UNITS`` says
    what its entries count; 0 for a folder not yet created).

    Warp's is None for a backend that compiles nothing; inductor's and Triton's are
    ``TORCHINDUCTOR_CACHE_DIR``/``TRITON_CACHE_DIR`` or the compilers' defaults (Triton's None where Triton
    is not installed). Without ``TRITON_CACHE_DIR``, inductor keeps the Triton kernels it generates below its
    own folder: they count among its files.
    """
    warp = simcore.kernel_cache(backend)
    inductor = Path(os.environ.get(INDUCTOR_ENV) or _default_inductor_dir())
    triton = _triton_dir()
    return {
        "warp": (warp.directory, warp.modules) if warp is not None else (None, None),
        "inductor": (inductor, sum(len(files) for _, _, files in os.walk(inductor))),
        "triton": (triton, _count_folders(triton) if triton is not None else None),
    }


@cold_path
def compile_cache_record(
    root: Path | None,
    before: dict[str, tuple[Path | None, int | None]],
    after: dict[str, tuple[Path | None, int | None]] | None,
) -> dict[str, Any]:
    """The summary's ``compile_cache`` (``trainrt.runner.summary.CompileCacheRecord``): ``$TRAINRT_CACHE_DIR``
    and, per cache, its folder and entries ``before`` and ``after`` warm-up (None until warm-up ends)."""
    record: dict[str, Any] = {"root": str(root) if root is not None else None}
    for name in CACHE_NAMES:
        directory, entries = before[name]
        record[name] = {
            "dir": str(directory) if directory is not None else None,
            "unit": UNITS[name],
            "before": entries,
            "after": after[name][1] if after is not None else None,
        }
    return record


@cold_path
def compile_cache_note(record: dict[str, Any]) -> str:
    """The warm-up line's short account, e.g. ``warp 212 modules (0 new), inductor 1,204 files (0 new)``;
    with ``$TRAINRT_CACHE_DIR``, the folder first."""
    parts = []
    for name in CACHE_NAMES:
        entry = record[name]
        if entry["after"] is None or entry["before"] is None:
            continue
        new = entry["after"] - entry["before"]
        parts.append(f"{name} {entry['after']:,} {entry['unit']} ({new:,} new)")
    where = (
        record["root"] if record["root"] is not None else f"compilers' defaults, set {CACHE_DIR_ENV} to share"
    )
    return f"compile caches ({where}): " + ", ".join(parts)


def _count_folders(directory: Path) -> int:
    """Folders directly in ``directory`` (0 for one that does not exist or cannot be read)."""
    try:
        with os.scandir(directory) as entries:
            return sum(1 for entry in entries if entry.is_dir())
    except OSError:
        return 0


def _default_inductor_dir() -> str:
    """torch inductor's own default folder (below the temporary folder, per user)."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    return default_cache_dir()


def _triton_dir() -> Path | None:
    """``$TRITON_CACHE_DIR``, else Triton's default folder; None where Triton is not installed."""
    if os.environ.get(TRITON_ENV):
        return Path(os.environ[TRITON_ENV])
    try:
        import triton
    except ImportError:  # pragma: no cover - platforms without Triton
        return None
    return Path(triton.knobs.cache.dir)
