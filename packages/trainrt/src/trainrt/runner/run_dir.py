"""Run-directory ownership: one writer at a time, a run id, and no silent mixing of two runs' files.

A training run owns its directory while it runs:

- **The lock.** ``<run_dir>/run.lock`` holds the owner's host, pid, start time and run id, and the owner
  holds an exclusive ``flock`` on it. The kernel drops that lock when the process ends in any way (also
  ``kill -9``), so a lock file nobody holds is stale: the next run takes it over and says whose it was. A
  second writer while the owner lives is refused with a message naming the holder. Where the filesystem has
  no ``flock``, the lock falls back to the recorded pid: stale when that pid is dead on this host.
- **A fresh directory.** A new run refuses a directory that holds anything but a stale lock, unless it
  resumes that directory or ``training.overwrite=true`` asks to clear it first.
- **The run id.** Every run directory records its run id in ``manifest.json`` and every checkpoint carries
  it, so resume, ``play`` and ``export`` take only checkpoints of the run that owns the directory. A
  resumed run keeps its run id (it is the same run, continued); a run started with overwrite gets a new one.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from trainrt.hotpath import cold_path
from trainrt.runner.summary import utc_now

LOCK_FILE_NAME = "run.lock"
_NO_FLOCK_ERRNOS = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL}


class RunDirError(ValueError):
    """The run directory cannot be used as asked (locked, not empty, not a directory, not writable)."""


def new_run_id() -> str:
    """A fresh run id: 12 hex digits, unique enough to tell two runs apart."""
    return uuid.uuid4().hex[:12]


@dataclass(frozen=True)
class LockHolder:
    """Who holds (or held) a run directory's lock, as recorded in ``run.lock``."""

    host: str
    pid: int
    started_at: str
    run_id: str | None

    def describe(self) -> str:
        """``pid 123 on host h (started 2026-...)``."""
        return f"pid {self.pid} on host {self.host} (started {self.started_at}, run id {self.run_id})"


@cold_path
def read_lock_holder(run_dir: str | os.PathLike) -> LockHolder | None:
    """The holder recorded in ``<run_dir>/run.lock`` (``None`` when there is no readable record)."""
    path = Path(run_dir) / LOCK_FILE_NAME
    try:
        record = json.loads(path.read_text())
        return LockHolder(
            host=str(record["host"]),
            pid=int(record["pid"]),
            started_at=str(record.get("started_at", "?")),
            run_id=record.get("run_id"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _pid_alive(pid: int) -> bool:
    """Whether ``pid`` names a live process on this host."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, owned by someone else
        return True
    return True


@cold_path
def check_run_dir_usable(run_dir: str | os.PathLike) -> Path:
    """``run_dir`` as a path that is (or can become) a writable directory; ``RunDirError`` naming the fix."""
    path = Path(run_dir)
    if str(run_dir).strip() == "":
        raise RunDirError("training.run_dir is empty: give a directory, e.g. training.run_dir=runs/my_run")
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        what = "the run directory" if existing == path else f"{existing}, a parent of the run directory,"
        raise RunDirError(
            f"training.run_dir={path}: {what} is a file, not a directory; choose another training.run_dir"
        )
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunDirError(
            f"training.run_dir={path}: {existing} is not writable by this user; choose a writable "
            "training.run_dir or fix its permissions"
        )
    return path


class RunDirLock:
    """The exclusive lock of one run directory (see the module docstring); ``release()`` gives it back.

    Args:
        run_dir: the run directory (created when missing).
        run_id: the id recorded in the lock for whoever asks who holds it.
        log: where the note about taking over a stale lock goes.
    """

    def __init__(self, run_dir: str | os.PathLike, run_id: str, log=print) -> None:
        self.run_dir = check_run_dir_usable(run_dir)
        self.path = self.run_dir / LOCK_FILE_NAME
        self.run_id = run_id
        self._handle: IO[str] | None = None
        self.took_over: LockHolder | None = None
        self._acquire(log)

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._handle is not None

    @cold_path
    def _acquire(self, log) -> None:
        try:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            handle = open(self.path, "a+", encoding="utf-8")  # noqa: SIM115 (held open while the run lives)
        except OSError as err:
            raise RunDirError(
                f"cannot create {self.path}: {err.strerror}; choose another training.run_dir"
            ) from None
        previous = read_lock_holder(self.run_dir)
        if not _try_flock(handle):
            handle.close()
            holder = previous.describe() if previous is not None else "another process (not yet recorded)"
            raise RunDirError(
                f"run directory {self.run_dir} is in use by {holder}; wait for it to finish, stop it, or "
                "choose another training.run_dir"
            )
        if previous is not None and previous.pid != os.getpid():
            if (
                _flock_unsupported(handle)
                and previous.host == socket.gethostname()
                and _pid_alive(previous.pid)
            ):
                handle.close()
                raise RunDirError(
                    f"run directory {self.run_dir} is in use by {previous.describe()}; wait for it to "
                    "finish, stop it, or choose another training.run_dir"
                )
            self.took_over = previous
            log(
                f"note: taking over the stale lock of {self.run_dir}: {previous.describe()} is no longer running"
            )
        record = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": utc_now(),
            "run_id": self.run_id,
        }
        handle.seek(0)
        handle.truncate()
        handle.write(json.dumps(record) + "\n")
        handle.flush()
        self._handle = handle

    @cold_path
    def release(self) -> None:
        """Delete the lock file and drop the lock (idempotent)."""
        if self._handle is None:
            return
        with contextlib.suppress(FileNotFoundError):
            holder = read_lock_holder(self.run_dir)
            if holder is None or holder.pid == os.getpid():
                self.path.unlink()
        self._handle.close()  # closing drops the flock
        self._handle = None


def _try_flock(handle: IO[str]) -> bool:
    """Take an exclusive, non-blocking flock; ``False`` when someone else holds it."""
    import fcntl

    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    except OSError as err:
        if err.errno in _NO_FLOCK_ERRNOS:
            handle._trainrt_no_flock = True  # type: ignore[attr-defined]
            return True
        raise
    return True


def _flock_unsupported(handle: IO[str]) -> bool:
    return bool(getattr(handle, "_trainrt_no_flock", False))


@cold_path
def run_dir_contents(run_dir: str | os.PathLike) -> list[str]:
    """Names in ``run_dir`` other than its lock file (``[]`` for a missing directory)."""
    path = Path(run_dir)
    if not path.is_dir():
        return []
    return sorted(entry.name for entry in path.iterdir() if entry.name != LOCK_FILE_NAME)


@cold_path
def clear_run_dir(run_dir: str | os.PathLike) -> list[str]:
    """Delete everything in ``run_dir`` but its lock file; returns the names deleted."""
    path = Path(run_dir)
    names = run_dir_contents(path)
    for name in names:
        entry = path / name
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
    return names


@cold_path
def refuse_a_used_run_dir(run_dir: str | os.PathLike, *, overwrite: bool, log=print) -> None:
    """Clear ``run_dir`` for a new run (``overwrite``) or refuse it when it holds another run's files."""
    names = run_dir_contents(run_dir)
    if not names:
        return
    if overwrite:
        clear_run_dir(run_dir)
        log(f"training.overwrite=true: cleared {run_dir} ({len(names)} entries)")
        return
    from trainrt.runner.checkpoint import checkpoints_newest_first

    shown = ", ".join(names[:6]) + (", ..." if len(names) > 6 else "")
    if checkpoints_newest_first(run_dir):
        options = f"resume it with training.resume={run_dir}, clear it with training.overwrite=true"
    else:  # a run that stopped before its first checkpoint cannot be resumed
        options = "it holds no checkpoint to resume: clear it with training.overwrite=true"
    raise RunDirError(
        f"run directory {run_dir} is not empty ({shown}); {options}, or choose another training.run_dir"
    )
