"""Where a backend keeps the kernels it compiles, and how many it holds.

MuJoCo Warp's kernels are compiled by Warp the first time a process loads them (minutes on a fresh machine)
and kept in Warp's kernel cache, one folder per module; a later process with the same cache loads them in
seconds. Pointing that cache at storage several machines share makes the compile a once-per-cluster cost.
The CPU backend compiles nothing.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from simcore._src.factory import BACKEND_NAMES

MODULE_PREFIX = "wp_"
"""Warp names each compiled module's folder in its cache ``wp_<module>_<hash>``."""


@dataclasses.dataclass(frozen=True)
class KernelCache:
    """A backend's kernel cache: its folder and the compiled modules in it."""

    directory: Path
    """The folder the backend reads and writes compiled kernels in (Warp's, with its version folder)."""
    modules: int
    """Compiled modules the folder holds (one per kernel module and its options; several devices share one)."""


def _check_name(name: str) -> None:
    if name not in BACKEND_NAMES:
        raise ValueError(f"unknown backend {name!r}; valid: {list(BACKEND_NAMES)}")


def set_kernel_cache_dir(name: str, path: str | os.PathLike) -> Path | None:
    """Keep backend ``name``'s compiled kernels below ``path`` (created if missing); the folder used, or None
    for a backend that compiles nothing ("mujoco").

    "mjwarp" initializes Warp if it is not yet (the backend would at its first use) and points its kernel
    cache at ``<path>/<Warp version>``, as Warp's own setting does, so different Warp versions never share
    modules. Works before and after Warp initialized: modules loaded before the change stay loaded, every
    module loaded after it is read from (or compiled into) the new folder. Raises ValueError for an unknown
    backend and OSError when the folder cannot be created.
    """
    _check_name(name)
    if name != "mjwarp":
        return None
    import warp

    warp.init()  # resolves Warp's default folder first, so the one set below is never re-resolved
    directory = Path(os.path.realpath(path)) / warp.config.version
    directory.mkdir(parents=True, exist_ok=True)
    warp.config.kernel_cache_dir = str(directory)
    return directory


def kernel_cache(name: str) -> KernelCache | None:
    """Backend ``name``'s kernel cache as it is now (None for a backend that compiles nothing: "mujoco").

    "mjwarp" initializes Warp if it is not yet; the folder is Warp's default (a per-user cache folder, or
    ``$WARP_CACHE_PATH``) unless ``set_kernel_cache_dir`` changed it. Raises ValueError for an unknown backend.
    """
    _check_name(name)
    if name != "mjwarp":
        return None
    import warp

    warp.init()
    directory = Path(warp.config.kernel_cache_dir)
    return KernelCache(directory=directory, modules=count_modules(directory))


def count_modules(directory: Path) -> int:
    """Compiled Warp modules in ``directory`` (0 for a folder that does not exist or cannot be read)."""
    try:
        with os.scandir(directory) as entries:
            return sum(1 for entry in entries if entry.name.startswith(MODULE_PREFIX) and entry.is_dir())
    except OSError:
        return 0
