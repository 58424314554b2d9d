"""Atomic file writes: write a temporary file beside the target, flush it to disk, then ``os.replace`` it.

A reader (or a run killed half way) sees either the previous file or the new one, never a torn file. The
temporary file lives in the target's directory so that ``os.replace`` is a rename within one filesystem.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import torch

from trainrt.hotpath import cold_path

# mkstemp creates files readable by the owner only; give written files the usual umask-derived mode.
_UMASK = os.umask(0)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK


@cold_path
def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path``, then atomically move it onto ``path``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException:
        # Also on KeyboardInterrupt: leave no half-written temporary behind.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    return target


@cold_path
def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically replace ``path`` with ``text`` (UTF-8)."""
    return atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


@cold_path
def atomic_torch_save(obj: Any, path: str | os.PathLike) -> Path:
    """Atomically replace ``path`` with ``torch.save(obj)``."""
    return atomic_write(path, lambda handle: torch.save(obj, handle))
