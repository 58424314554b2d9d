"""Atomic file writes: write a temporary file beside the target, flush it to disk, then ``os.replace`` it.

A reader (or a run killed half way) sees either the previous file or the new one, never a torn file. The
temporary file lives in the target's directory so that ``os.replace`` is a rename within one filesystem.
A write the filesystem refuses (disk full, quota, read-only, file-size limit) removes the temporary file and
raises :class:`~trainrt.runner.failures.WriteFailure` naming the target and the free space.
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
from trainrt.runner.failures import WriteFailure, write_error_number

# mkstemp creates files readable by the owner only; give written files the usual umask-derived mode.
_UMASK = os.umask(0)
os.umask(_UMASK)
_FILE_MODE = 0o666 & ~_UMASK


@cold_path
def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any]) -> Path:
    """Call ``write(file)`` on a temporary file beside ``path``, then atomically move it onto ``path``.

    ``WriteFailure`` when the filesystem refuses the bytes; no temporary file is left behind in any case.
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as err:
        refused = write_error_number(err)
        if refused is not None:
            raise WriteFailure(target, refused) from err
        raise
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException as err:
        # Asked before the temporary goes: its size tells a file-size limit from other failures.
        refused = write_error_number(err, target, _size(tmp_name))
        # Also on KeyboardInterrupt: leave no half-written temporary behind.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        if refused is not None:
            raise WriteFailure(target, refused) from err
        raise
    return target


def _size(path: str) -> int | None:
    """Bytes in ``path`` (``None`` when it cannot be read)."""
    try:
        return os.stat(path).st_size
    except OSError:
        return None


@cold_path
def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Atomically replace ``path`` with ``text`` (UTF-8)."""
    return atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


@cold_path
def atomic_torch_save(obj: Any, path: str | os.PathLike) -> Path:
    """Atomically replace ``path`` with ``torch.save(obj)``."""
    return atomic_write(path, lambda handle: torch.save(obj, handle))
