"""Run-directory ownership: one writer at a time, a run id, and no silent mixing of two runs' files.

A training run owns its directory while it runs:

- **The lock.** ``<run_dir>/run.lock`` holds the owner's host, pid, start time and run id, and the owner
  holds an exclusive ``flock`` on it. The kernel drops that lock when the process ends in any way (also
  ``kill -9``), so a lock file nobody holds is stale: the next run takes it over and says whose it was. A
  second writer while the owner lives is refused with a message naming the holder. Where the filesystem has
  no ``flock``, the lock falls back to the recorded pid: stale when that pid is dead on this host.
- **A fresh directory.** A new run refuses a directory that holds anything but a stale lock, unless it
  resumes that directory or ``training.overwrite=true`` asks to clear it first. Overwrite deletes only what
  trainrt wrote, in a directory whose ``manifest.json`` records a run: it refuses, deleting nothing, a
  directory without one, one holding any other entry (a user's file, a nested run directory) and one that
  is, holds or lies inside the run being resumed.
- **The run id.** Every run directory records its run id in ``manifest.json`` and every checkpoint carries
  it, so resume, ``play`` and ``export`` take only checkpoints of the run that owns the directory. A
  resumed run keeps its run id (it is the same run, continued); a run started with overwrite gets a new one.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import os
import re
import socket
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from trainrt.hotpath import cold_path
from trainrt.runner.failures import WRITE_ERRNOS, write_failure_message
from trainrt.runner.summary import utc_now

LOCK_FILE_NAME = "run.lock"
# Written by the runner (its manager tables) and by training and `play` videos; the other names a run writes
# belong to the modules that write them (`_written_by_a_run`).
ENV_TABLES_FILE_NAME = "env.txt"
VIDEOS_DIR_NAME = "videos"
RANKS_DIR_NAME = "ranks"  # a data-parallel run's per-rank summaries, ranks/rank_<i>/
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
            raise RunDirError(_cannot_write(self.path, err)) from None
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
        self._write_record(handle)
        self._handle = handle

    @cold_path
    def _write_record(self, handle: IO[str]) -> None:
        """Record this run in the lock file; on a refused write, remove the file and raise ``RunDirError``."""
        record = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "started_at": utc_now(),
            "run_id": self.run_id,
        }
        try:
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps(record) + "\n")
            handle.flush()
        except OSError as err:
            # An empty or torn lock file would only puzzle the next run: it goes while this process holds it.
            with contextlib.suppress(OSError):
                self.path.unlink()
            with contextlib.suppress(OSError):
                handle.close()
            raise RunDirError(_cannot_write(self.path, err)) from None

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


def _cannot_write(path: Path, err: OSError) -> str:
    """``cannot write <path>: <reason> (<free space>); <fix>`` for an ``OSError`` writing ``path``."""
    if err.errno in WRITE_ERRNOS:
        return write_failure_message(path, err.errno)
    return f"cannot write {path}: {err.strerror or err}; choose another training.run_dir"


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


@dataclass(frozen=True)
class _Written:
    """What trainrt writes in one folder of a run directory: file names, and its folders with theirs (regexes)."""

    files: str
    folders: tuple[tuple[str, _Written], ...] = ()

    def holds_file(self, name: str) -> bool:
        """Whether trainrt writes a file ``name`` here, or the temporary file of one (``atomic_write``)."""
        if re.fullmatch(self.files, name):
            return True
        temporary = re.fullmatch(r"\.(.+)\.[^.]+\.tmp", name)
        return temporary is not None and re.fullmatch(self.files, temporary.group(1)) is not None

    def folder(self, name: str) -> _Written | None:
        """What trainrt writes in its folder ``name`` here (``None``: not one of its folders)."""
        return next((inner for pattern, inner in self.folders if re.fullmatch(pattern, name)), None)


@functools.cache
def _written_by_a_run() -> _Written:
    """Every name trainrt writes into a run directory (training, ``play``, ``eval``, ``export``, ``report``)."""
    from trainrt.runner.checkpoint import _CHECKPOINT_NAME, CHECKPOINT_DIR_NAME
    from trainrt.runner.evaluate import EVAL_DIR_NAME
    from trainrt.runner.export import ONNX_FILE_NAME
    from trainrt.runner.manifest import CONFIG_FILE_NAME, MANIFEST_FILE_NAME
    from trainrt.runner.scalar_sinks import TENSORBOARD_DIR_NAME
    from trainrt.runner.summary import SUMMARY_FILE_NAME
    from trainrt.viz.report import REPORT_DIR_NAME, REPORT_FILES

    top = [CONFIG_FILE_NAME, MANIFEST_FILE_NAME, SUMMARY_FILE_NAME, ENV_TABLES_FILE_NAME]
    policy = re.escape(
        Path(ONNX_FILE_NAME).stem
    )  # policy.onnx, and policy_<iteration>.onnx of an older checkpoint
    return _Written(
        files="|".join([*map(re.escape, top), rf"{policy}(_\d+)?\.onnx"]),
        folders=(
            (re.escape(CHECKPOINT_DIR_NAME), _Written(_CHECKPOINT_NAME.pattern)),
            (re.escape(TENSORBOARD_DIR_NAME), _Written(r"events\.out\.tfevents\..+")),
            (re.escape(VIDEOS_DIR_NAME), _Written(r"(iter_|play_iter)\d+(_env\d+)?(_frame\d+)?\.(mp4|png)")),
            (re.escape(EVAL_DIR_NAME), _Written(r"eval(_\d+)?\.json")),
            (re.escape(REPORT_DIR_NAME), _Written("|".join(map(re.escape, REPORT_FILES)))),
            (
                re.escape(RANKS_DIR_NAME),
                _Written("(?!)", ((r"rank_\d+", _Written(re.escape(SUMMARY_FILE_NAME))),)),
            ),
        ),
    )


@dataclass
class _Survey:
    """A run directory's entries sorted into what trainrt wrote (files, then folders deepest first) and the rest."""

    files: list[Path] = field(default_factory=list)
    folders: list[Path] = field(default_factory=list)
    foreign: list[str] = field(default_factory=list)


@cold_path
def _survey(folder: Path, written: _Written, shown: str = "", survey: _Survey | None = None) -> _Survey:
    """Sort the entries under ``folder`` into ``survey`` (``shown``: how ``folder`` is named in messages)."""
    survey = survey if survey is not None else _Survey()
    for entry in sorted(folder.iterdir()):
        if not shown and entry.name == LOCK_FILE_NAME:
            continue  # held by this run
        inner = written.folder(entry.name)
        if entry.is_symlink():  # trainrt writes no links: where one points is not ours to judge
            survey.foreign.append(shown + entry.name)
        elif entry.is_dir() and inner is not None:
            _survey(entry, inner, f"{shown}{entry.name}/", survey)
            survey.folders.append(entry)
        elif entry.is_dir():
            survey.foreign.append(f"{shown}{entry.name}/")
        elif written.holds_file(entry.name):
            survey.files.append(entry)
        else:
            survey.foreign.append(shown + entry.name)
    return survey


def _listed(names: list[str], limit: int = 6) -> str:
    """``a, b, c`` (the first ``limit`` names, then ``... (N more)``)."""
    more = f", ... ({len(names) - limit} more)" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


@cold_path
def why_overwrite_would_not_clear(run_dir: str | os.PathLike) -> str | None:
    """Why ``training.overwrite=true`` must leave ``run_dir`` alone (``None`` when it holds only a run's files)."""
    return _why_not_clear(Path(run_dir), _survey(Path(run_dir), _written_by_a_run()))


def _why_not_clear(path: Path, survey: _Survey) -> str | None:
    """``has no manifest.json with a run id ...`` or ``holds entries trainrt did not write (...)``, else ``None``.

    Overwrite clears only a directory whose ``manifest.json`` records a run id and that holds nothing but the
    names trainrt writes (``_written_by_a_run``): anything else, a user's file or a nested run directory, stays.
    """
    from trainrt.runner.manifest import MANIFEST_FILE_NAME, recorded_run_id

    if recorded_run_id(path) is None:
        return (
            f"has no {MANIFEST_FILE_NAME} with a run id, so nothing in it "
            f"({_listed(run_dir_contents(path))}) is known to be a run's"
        )
    if survey.foreign:
        return f"holds entries trainrt did not write ({_listed(survey.foreign)})"
    return None


@cold_path
def clear_run_dir(run_dir: str | os.PathLike) -> list[str]:
    """Delete the files a run wrote in ``run_dir`` (all but its lock) and return the names deleted;
    ``RunDirError``, deleting nothing, when it holds anything else or no run (``_why_not_clear``)."""
    path = Path(run_dir)
    survey = _survey(path, _written_by_a_run())
    why_not = _why_not_clear(path, survey)
    if why_not is not None:
        raise RunDirError(
            f"training.overwrite=true deletes only a trainrt run's own files, and {path} {why_not}; nothing was "
            "deleted: move what is yours out of it, or choose another training.run_dir"
        )
    names = run_dir_contents(path)
    for file in survey.files:
        file.unlink(missing_ok=True)
    for folder in survey.folders:  # deepest first; one that gained a file meanwhile stays, with the file
        with contextlib.suppress(OSError):
            folder.rmdir()
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
    raise RunDirError(
        f"run directory {run_dir} is not empty ({_listed(names)}); {_used_dir_options(run_dir)}"
    )


@cold_path
def _used_dir_options(run_dir: str | os.PathLike) -> str:
    """What a user can do with a used run directory: resume it, clear it, or take another."""
    from trainrt.runner.checkpoint import checkpoints_newest_first

    why_not = why_overwrite_would_not_clear(run_dir)
    resumable = bool(checkpoints_newest_first(run_dir))
    options = [f"resume it with training.resume={run_dir}"] if resumable else []
    options += ["clear it with training.overwrite=true"] if why_not is None else []
    options.append("choose another training.run_dir")
    said = ", ".join(options[:-1]) + f", or {options[-1]}" if len(options) > 1 else options[0]
    if why_not is not None:
        return f"{said} (training.overwrite=true would not clear it: it {why_not})"
    if not resumable:  # a run that stopped before its first checkpoint cannot be resumed
        said = f"it holds no checkpoint to resume: {said}"
    return said


@cold_path
def refuse_to_overwrite_the_resumed_run(run_dir: str | os.PathLike, resume: str | os.PathLike) -> None:
    """``RunDirError`` when clearing ``run_dir`` could delete the run being resumed: the same directory, a
    parent of it, or a folder inside it."""
    target, resumed = Path(run_dir).resolve(), Path(resume).resolve()
    if target == resumed:
        relation = "the run being resumed"
    elif resumed.is_relative_to(target):
        relation = f"which holds {resume}, the run being resumed"
    elif target.is_relative_to(resumed):
        relation = f"a folder inside {resume}, the run being resumed"
    else:
        return
    raise RunDirError(
        f"training.overwrite=true would delete {run_dir}, {relation}; nothing was deleted: drop "
        "training.overwrite, or give a training.run_dir outside the resumed run to resume into"
    )


@cold_path
def claim_run_dir(
    run_dir: Path, run_id: str, *, resume: str | None, overwrite: bool, log=print
) -> RunDirLock:
    """Lock ``run_dir`` for run ``run_id``; refuse (or, with ``overwrite``, clear) one that holds another run.

    A run resuming ``run_dir`` itself keeps its files. What a write killed midway (``kill -9``) left is removed.
    """
    from trainrt.runner.checkpoint import checkpoint_dir, remove_stale_temp_files

    resumes_here = resume is not None and same_path(Path(resume), run_dir)
    if resume is not None and overwrite:  # the resumed run, a parent of it or a folder inside it
        refuse_to_overwrite_the_resumed_run(run_dir, resume)
    lock = RunDirLock(run_dir, run_id, log=log)
    try:
        if not resumes_here:
            refuse_a_used_run_dir(run_dir, overwrite=overwrite, log=log)
        # Checkpoints are written only under this lock; an export or eval beside the run may be writing into
        # the run directory, so young files there stay.
        remove_stale_temp_files(checkpoint_dir(run_dir), min_age_sec=0.0, log=log)
        remove_stale_temp_files(run_dir, log=log)
    except BaseException:
        lock.release()
        raise
    return lock


LATEST_LINK_NAME = "latest"
"""The link beside default-named runs (``runs/latest``) that points at the newest one."""


@cold_path
def point_latest_at(run_dir: Path, log=print) -> None:
    """Point ``<run_dir's parent>/latest`` at ``run_dir`` (a relative symlink, replaced atomically). Only a link
    is ever replaced: a file or folder of that name is kept and said; a failure is said, never raised."""
    link = run_dir.parent / LATEST_LINK_NAME
    if link.exists() and not link.is_symlink():
        log(f"note: {link} is not a link trainrt made; it stays, and does not point at this run")
        return
    staging = run_dir.parent / f".{LATEST_LINK_NAME}-{os.getpid()}"
    try:
        if staging.is_symlink():
            staging.unlink()
        os.symlink(run_dir.name, staging)
        os.replace(staging, link)
    except OSError as err:
        log(f"note: could not point {link} at {run_dir.name}: {err}")


def same_path(a: Path, b: Path) -> bool:
    """Whether two paths name the same directory (also through symlinks or relative spellings)."""
    try:
        return a.resolve() == b.resolve() or (a.exists() and b.exists() and a.samefile(b))
    except OSError:
        return False
