"""The failure a user can fix: the runner and its builders raise it with the fix in the message.

A file the run cannot write (disk full, quota exceeded, read-only filesystem, a file-size limit) is one of
them: :class:`WriteFailure` names the file, the reason, the free space of its filesystem and the fix, in one
line, instead of the ``OSError`` or torch's ``inline_container.cc ... unexpected pos`` that surfaced it.
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
from pathlib import Path

# Errors that say the filesystem refused the bytes, with the reason and the fix each one gets.
_WRITE_ERRORS: dict[int, tuple[str, str]] = {
    errno.ENOSPC: ("no space left on device", "free space or choose another training.run_dir"),
    errno.EDQUOT: ("disk quota exceeded", "free space in your quota or choose another training.run_dir"),
    errno.EROFS: ("read-only file system", "choose a writable training.run_dir"),
    errno.EFBIG: (
        "file too large for this process's file-size limit",
        "raise the limit (ulimit -f unlimited) or choose another training.run_dir",
    ),
}
WRITE_ERRNOS = frozenset(_WRITE_ERRORS)
# torch.save reports a failed write of its archive as a RuntimeError without the errno.
_TORCH_WRITE_FAILED = ("unexpected pos", "PytorchStreamWriter failed writing file", "file write failed")
_NEARLY_FULL_BYTES = 1 << 20  # less free space than this after a failed write: the disk filled


class ExpectedRunFailure(RuntimeError):
    """A run that fails for a reason the user can fix (the message says how); not a bug, so no traceback."""


class WriteFailure(ExpectedRunFailure, OSError):
    """A file of the run could not be written; the message names the file, the reason, the free space and the fix.

    Also an ``OSError`` (with ``errno`` set when known), so code that handles write errors still handles it.

    Attributes:
        path: the file being written.
        note: said after the fix, in parentheses (what else the failure left undone).
    """

    def __init__(self, path: str | os.PathLike, error_number: int, note: str | None = None) -> None:
        self.path = Path(path)
        message = write_failure_message(path, error_number)
        super().__init__(f"{message} ({note})" if note else message)
        self.errno = error_number


def write_failure_message(path: str | os.PathLike, error_number: int) -> str:
    """``cannot write <path>: <reason> (<free> free on <mount>); <fix>`` for a write refused with ``error_number``."""
    reason, fix = _WRITE_ERRORS.get(
        error_number,
        ("the write did not complete", "check the filesystem or choose another training.run_dir"),
    )
    where = f"into {path}" if Path(path).is_dir() else str(path)
    return f"cannot write {where}: {reason} ({free_space_text(path)}); {fix}"


def free_space_text(path: str | os.PathLike) -> str:
    """``12.0 MiB free on /mnt``: the free space of the filesystem holding ``path`` (or its nearest parent)."""
    folder = _nearest_existing(Path(path))
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return f"free space on {folder} unknown"
    return f"{_bytes_text(free)} free on {_mount_point(folder)}"


def write_error_number(
    err: BaseException, path: str | os.PathLike | None = None, written_bytes: int | None = None
) -> int | None:
    """The errno of a write the filesystem refused, from ``err`` or what caused it; ``None`` for other errors.

    torch.save reports a failed write as a ``RuntimeError`` (``unexpected pos``) raised while handling the
    ``OSError`` of the file's ``write``. When torch wrote the file itself the errno is lost; then what the
    filesystem of ``path`` shows right after the failure tells: no free space, ``written_bytes`` at the
    file-size limit, a read-only mount (``EIO`` when none of them). An error of a Ctrl-C is no write error.
    """
    chain = _exception_chain(err)
    if any(isinstance(e, KeyboardInterrupt) for e in chain):
        return None
    for e in chain:
        if isinstance(e, OSError) and e.errno in WRITE_ERRNOS:
            return e.errno
    torch_alone = all(isinstance(e, RuntimeError) and _says_torch_write_failed(e) for e in chain)
    if not torch_alone or path is None:
        return None
    return _errno_the_filesystem_shows(Path(path), written_bytes) or errno.EIO


def write_failure_of(err: BaseException, path: str | os.PathLike) -> WriteFailure | None:
    """``err`` as a :class:`WriteFailure` when the filesystem refused a write (of the file its ``OSError`` names,
    else of ``path``); ``None`` for other errors."""
    if isinstance(err, WriteFailure):
        return err
    number = write_error_number(err)
    if number is None:
        return None
    named = next((e.filename for e in _exception_chain(err) if isinstance(e, OSError) and e.filename), None)
    return WriteFailure(named or path, number)


def ignore_file_size_signal() -> None:
    """Turn a file-size limit (``ulimit -f``) into an ``OSError`` (EFBIG) the run reports, not a SIGXFSZ kill."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _exception_chain(err: BaseException) -> list[BaseException]:
    """``err`` and the exceptions it was raised from or while handling, outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _says_torch_write_failed(err: RuntimeError) -> bool:
    """Whether ``err`` is torch's report of an archive write that failed."""
    return any(text in str(err) for text in _TORCH_WRITE_FAILED)


def _errno_the_filesystem_shows(path: Path, written_bytes: int | None) -> int | None:
    """The likely errno of a failed write of ``path`` whose error carried none (asked right after the failure)."""
    folder = _nearest_existing(path.parent)
    try:
        if shutil.disk_usage(folder).free < _NEARLY_FULL_BYTES:
            return errno.ENOSPC
        read_only = bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return None
    limit, _ = resource.getrlimit(resource.RLIMIT_FSIZE)
    if limit != resource.RLIM_INFINITY and written_bytes is not None and written_bytes >= limit:
        return errno.EFBIG
    return errno.EROFS if read_only else None


def _nearest_existing(path: Path) -> Path:
    """``path`` or its nearest parent that exists."""
    while not path.exists() and path.parent != path:
        path = path.parent
    return path


def _mount_point(path: Path) -> Path:
    """The mount point of the filesystem holding ``path``."""
    path = path.resolve()
    while not os.path.ismount(path) and path.parent != path:
        path = path.parent
    return path


def _bytes_text(size: int) -> str:
    """``512 B``, ``12.0 MiB``, ``3.4 GiB``."""
    value, unit = float(size), "B"
    for larger in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, larger
    return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
