"""Run-directory ownership: the lock, stale-lock takeover, refusal of a used directory, what overwrite may
delete, unusable paths, and writes the filesystem refuses (disk full, size limit)."""

import errno
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_runner_train import tiny_config

from trainrt.runner import OffPolicyRunner, load_run_summary
from trainrt.runner import failures as failures_module
from trainrt.runner import run_dir as run_dir_module
from trainrt.runner.checkpoint import checkpoint_path
from trainrt.runner.failures import WriteFailure
from trainrt.runner.run_dir import (
    LOCK_FILE_NAME,
    RunDirError,
    RunDirLock,
    check_run_dir_usable,
    clear_run_dir,
    read_lock_holder,
    refuse_a_used_run_dir,
    refuse_to_overwrite_the_resumed_run,
)

QUIET = ["training.final_eval=false", "training.export_onnx=false", "training.tensorboard=false"]
# Every name trainrt writes into a run directory, as a previous run (and play, eval, export, report) left them.
A_RUNS_FILES = [
    "config.json",
    "manifest.json",
    "run_summary.json",
    "env.txt",
    "policy.onnx",
    "policy_3.onnx",
    ".run_summary.json.k2j4x9ab.tmp",
    "checkpoints/ckpt_000001.pt",
    "checkpoints/ckpt_000002.pt",
    "checkpoints/.ckpt_000003.pt.a1b2c3d4.tmp",
    "tensorboard/events.out.tfevents.1796559551.vm.5297.0",
    "videos/iter_000002.mp4",
    "videos/play_iter2_env0.mp4",
    "videos/play_iter2_frame1.png",
    "eval/eval_2.json",
    "report/episode.png",
    "ranks/rank_1/run_summary.json",
]


def _dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    run_dir = tmp_path / "run"
    first = RunDirLock(run_dir, "aaaa", log=lambda line: None)
    holder = read_lock_holder(run_dir)
    assert (holder.pid, holder.host, holder.run_id) == (os.getpid(), socket.gethostname(), "aaaa")
    with pytest.raises(RunDirError, match=rf"in use by pid {os.getpid()} on host .*run id aaaa"):
        RunDirLock(run_dir, "bbbb", log=lambda line: None)
    first.release()
    assert not (run_dir / LOCK_FILE_NAME).exists()
    second = RunDirLock(run_dir, "bbbb", log=lambda line: None)  # free again once released
    assert read_lock_holder(run_dir).run_id == "bbbb"
    second.release()


@pytest.mark.slow
def test_a_lock_held_by_another_process_is_refused(tmp_path):
    run_dir = tmp_path / "run"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\n"
            "from trainrt.runner.run_dir import RunDirLock\n"
            f"lock = RunDirLock({str(run_dir)!r}, 'other', log=lambda line: None)\n"
            "print('locked', flush=True)\n"
            "sys.stdin.readline()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunDirError, match=rf"in use by pid {holder.pid} .*run id other"):
            RunDirLock(run_dir, "mine", log=lambda line: None)
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


def test_a_stale_lock_of_a_dead_process_is_taken_over_saying_so(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    pid = _dead_pid()
    stale = {"host": socket.gethostname(), "pid": pid, "started_at": "2026-01-01T00:00:00", "run_id": "old"}
    (run_dir / LOCK_FILE_NAME).write_text(json.dumps(stale))
    lines = []
    lock = RunDirLock(run_dir, "new", log=lines.append)
    assert lock.took_over.pid == pid
    assert any("stale lock" in line and f"pid {pid}" in line for line in lines), lines
    assert read_lock_holder(run_dir).run_id == "new"
    lock.release()


def _write(run_dir: Path, names: list[str]) -> None:
    """Create ``names`` (files, or folders when they end in ``/``) under ``run_dir``."""
    for name in names:
        path = run_dir / name
        if name.endswith("/"):
            path.mkdir(parents=True, exist_ok=True)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"run_id": "old"}) if name == "manifest.json" else "x")


def _tree(folder: Path) -> list[str]:
    """Every path under ``folder``, relative to it."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(
    ("contents", "overwrite", "expected"),
    [
        ([], False, "ok"),
        ([LOCK_FILE_NAME], False, "ok"),  # a stale lock alone does not make a directory used
        (A_RUNS_FILES, False, "refused"),
        ([LOCK_FILE_NAME, *A_RUNS_FILES], True, "cleared"),
    ],
)
def test_a_new_run_refuses_or_clears_a_used_directory(tmp_path, contents, overwrite, expected):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    _write(run_dir, contents)
    lines = []
    if expected == "refused":
        with pytest.raises(
            RunDirError,
            match=r"is not empty \(\.run_summary.json.*, \.\.\. \(\d+ more\)\); resume it with "
            r"training.resume=.*, clear it with training.overwrite=true, or choose another training.run_dir$",
        ):
            refuse_a_used_run_dir(run_dir, overwrite=overwrite, log=lines.append)
        assert (run_dir / "config.json").exists()
        return
    refuse_a_used_run_dir(run_dir, overwrite=overwrite, log=lines.append)
    assert _tree(run_dir) == ([LOCK_FILE_NAME] if LOCK_FILE_NAME in contents else [])
    assert (expected == "cleared") == any("cleared" in line for line in lines)


@pytest.mark.parametrize(
    ("foreign", "shown"),
    [
        (["notes.md"], "notes.md"),
        (["thesis/chapter1.tex"], "thesis/"),
        (["sweep/manifest.json", "sweep/checkpoints/ckpt_000001.pt"], "sweep/"),  # a nested run directory
        (["checkpoints/best.pt"], "checkpoints/best.pt"),
        (["videos/talk/demo.mp4"], "videos/talk/"),
        (["ranks/rank_1/notes.md"], "ranks/rank_1/notes.md"),
        (["run.lock.bak"], "run.lock.bak"),
    ],
    ids=["file", "folder", "nested-run", "in-checkpoints", "folder-in-videos", "in-ranks", "lock-copy"],
)
def test_overwrite_refuses_a_run_dir_holding_what_trainrt_did_not_write(tmp_path, foreign, shown):
    run_dir = tmp_path / "run"
    _write(run_dir, [*A_RUNS_FILES, *foreign])
    before = _tree(run_dir)
    with pytest.raises(RunDirError) as refused:
        refuse_a_used_run_dir(run_dir, overwrite=True, log=lambda line: None)
    message = str(refused.value)
    assert f"holds entries trainrt did not write ({shown})" in message, message
    assert "nothing was deleted" in message and "\n" not in message
    assert _tree(run_dir) == before
    # without overwrite, the refusal does not offer a clearing it would refuse
    with pytest.raises(
        RunDirError, match=r"resume it with .*, or choose another training.run_dir \("
    ) as used:
        refuse_a_used_run_dir(run_dir, overwrite=False, log=lambda line: None)
    assert "clear it with" not in str(used.value)


def test_overwrite_names_the_first_six_entries_it_would_have_deleted(tmp_path):
    run_dir = tmp_path / "run"
    _write(run_dir, [*A_RUNS_FILES, *(f"draft_{i}.tex" for i in range(9))])
    with pytest.raises(RunDirError, match=r"\(draft_0.tex, .*, draft_5.tex, \.\.\. \(3 more\)\)"):
        clear_run_dir(run_dir)


def test_overwrite_refuses_a_directory_without_a_runs_manifest(tmp_path):
    folder = tmp_path / "thesis"
    _write(folder, ["chapter1.tex", "figures/plot.png", "config.json"])
    (folder / "manifest.json").write_text('{"title": "my thesis"}')  # a manifest, but no run id
    before = _tree(folder)
    with pytest.raises(RunDirError, match=r"has no manifest.json with a run id") as refused:
        refuse_a_used_run_dir(folder, overwrite=True, log=lambda line: None)
    assert "(chapter1.tex, config.json, figures, manifest.json)" in str(refused.value)
    assert _tree(folder) == before


def test_a_symlink_is_never_taken_for_a_runs_folder(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    _write(elsewhere, ["ckpt_000001.pt"])
    run_dir = tmp_path / "run"
    _write(run_dir, ["manifest.json", "config.json"])
    (run_dir / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(RunDirError, match=r"did not write \(checkpoints\)"):
        clear_run_dir(run_dir)
    assert (elsewhere / "ckpt_000001.pt").exists()


@pytest.mark.parametrize(
    ("run_dir", "resume", "refused"),
    [
        ("run", "run", "the run being resumed"),
        ("runs", "runs/run", "which holds"),
        ("run/checkpoints", "run", "a folder inside"),
        ("run2", "run", None),  # a sibling whose name starts alike
    ],
)
def test_overwrite_never_touches_the_run_being_resumed(tmp_path, run_dir, resume, refused):
    (tmp_path / resume).mkdir(parents=True)
    if refused is None:
        refuse_to_overwrite_the_resumed_run(tmp_path / run_dir, tmp_path / resume)
        return
    with pytest.raises(RunDirError, match=rf"would delete .*{refused}"):
        refuse_to_overwrite_the_resumed_run(tmp_path / run_dir, tmp_path / resume)


def test_unusable_run_directories_name_the_problem(tmp_path, monkeypatch):
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(RunDirError, match="the run directory is a file, not a directory"):
        check_run_dir_usable(afile)
    with pytest.raises(RunDirError, match="a parent of the run directory, is a file"):
        check_run_dir_usable(afile / "run")
    with pytest.raises(RunDirError, match=r"training\.run_dir is empty"):
        check_run_dir_usable("")
    # Permission bits do not stop root, so the unwritable case is simulated.
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    with pytest.raises(RunDirError, match=r"is not writable by this user"):
        check_run_dir_usable(tmp_path / "new" / "run")


def test_a_used_directory_without_checkpoints_is_not_offered_for_resume(tmp_path):
    # A run that stopped before its first checkpoint (a failed set-up, say) left files but nothing to resume.
    run_dir = tmp_path / "run"
    _write(run_dir, ["config.json", "manifest.json", "run_summary.json"])
    with pytest.raises(RunDirError) as refused:
        refuse_a_used_run_dir(run_dir, overwrite=False, log=lambda line: None)
    assert "training.resume" not in str(refused.value)
    assert "holds no checkpoint to resume: clear it with training.overwrite=true" in str(refused.value)


# --- writes the filesystem refuses ---------------------------------------------------------------------------


class _FillsUp:
    """A file handle whose filesystem runs out of space after ``room`` more bytes."""

    def __init__(self, handle, room: int) -> None:
        self.handle, self.room = handle, room

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.handle.write(data)

    def flush(self) -> None:
        self.handle.flush()


def _leftovers(run_dir: Path) -> list[str]:
    """The lock and temporary files a run left behind."""
    return sorted(str(p) for p in run_dir.rglob("*") if p.name == LOCK_FILE_NAME or p.name.endswith(".tmp"))


def _disk_fills_at_the_first_checkpoint(monkeypatch, how: str) -> None:
    """Every ``torch.save`` (the checkpoints) fails as a full disk makes it fail, in one of its forms."""
    real_save = torch.save

    def save(obj, handle, *args, **kwargs):
        if how == "oserror":
            handle.write(b"part of a checkpoint")
            raise OSError(errno.ENOSPC, "No space left on device")
        if how == "torch":  # torch's own report: RuntimeError 'unexpected pos', raised handling the OSError
            return real_save(obj, _FillsUp(handle, 500), *args, **kwargs)
        # torch writing by itself: no errno anywhere, and the filesystem shows no free space
        monkeypatch.setattr(
            failures_module.shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(1, 1, 0)
        )
        raise RuntimeError("[enforce fail at inline_container.cc:671] . unexpected pos 704 vs 598")

    monkeypatch.setattr(torch, "save", save)


@pytest.mark.parametrize("how", ["oserror", "torch", "torch-without-errno"])
def test_a_full_disk_ends_the_run_with_one_line_and_a_failed_summary(tmp_path, monkeypatch, how):
    run_dir = tmp_path / "run"
    _disk_fills_at_the_first_checkpoint(monkeypatch, how)
    runner = OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_flat", *QUIET), log=lambda line: None)
    with pytest.raises(WriteFailure) as failed:
        runner.run()
    message = str(failed.value)
    assert message.startswith(f"cannot write {checkpoint_path(run_dir, 1)}: no space left on device (")
    assert " free on " in message and message.endswith("free space or choose another training.run_dir")
    assert "\n" not in message and "inline_container" not in message
    assert failed.value.errno == errno.ENOSPC and isinstance(failed.value, OSError)
    summary = load_run_summary(run_dir)
    assert summary.status == "failed" and summary.error == message
    assert _leftovers(run_dir) == []


def test_a_disk_too_full_for_the_failed_summary_leaves_the_running_one(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    real_fsync = os.fsync
    full = []  # the disk is full from the first checkpoint on

    def fsync(fd):
        if full:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_fsync(fd)

    def save(obj, handle, *args, **kwargs):
        full.append(True)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(torch, "save", save)
    runner = OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_flat", *QUIET), log=lambda line: None)
    with pytest.raises(WriteFailure) as failed:
        runner.run()
    assert str(failed.value).startswith(
        f"cannot write {checkpoint_path(run_dir, 1)}: no space left on device"
    )
    assert str(failed.value).endswith("(the failed summary was not written either)")
    assert load_run_summary(run_dir).status == "running"  # the last summary the disk took
    assert _leftovers(run_dir) == []


def test_a_refused_write_outside_the_atomic_writes_is_one_line_too(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    real_write_text = Path.write_text

    def write_text(self, *args, **kwargs):
        if self.name == "env.txt":
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
        return real_write_text(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    runner = OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_flat", *QUIET), log=lambda line: None)
    with pytest.raises(
        WriteFailure, match=rf"cannot write into {run_dir}: disk quota exceeded \(.* free on "
    ):
        runner.run()
    assert load_run_summary(run_dir).error.startswith(f"cannot write into {run_dir}: disk quota exceeded")
    assert _leftovers(run_dir) == []


def test_a_lock_that_cannot_be_written_leaves_no_lock_file(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"

    def full_disk_open(path, *args, **kwargs):
        return _FullDiskText(open(path, *args, **kwargs))

    monkeypatch.setattr(run_dir_module, "open", full_disk_open, raising=False)
    with pytest.raises(
        RunDirError, match=rf"cannot write {run_dir / LOCK_FILE_NAME}: no space left on device \("
    ):
        RunDirLock(run_dir, "mine", log=lambda line: None)
    assert not (run_dir / LOCK_FILE_NAME).exists()


class _FullDiskText:
    """A text handle on a full disk: it opens, but its buffered record never reaches the disk."""

    def __init__(self, handle) -> None:
        self._handle = handle

    def __getattr__(self, name):
        return getattr(self._handle, name)

    def flush(self) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")


@pytest.mark.slow
def test_a_file_size_limit_on_the_lock_leaves_no_lock_file(tmp_path):
    # A real refusal: a process whose file-size limit is 0 bytes (SIGXFSZ ignored, as `trainrt train` does).
    run_dir = tmp_path / "run"
    script = (
        "import signal, resource\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))\n"
        "from trainrt.runner.run_dir import RunDirLock, RunDirError\n"
        "try:\n"
        f"    RunDirLock({str(run_dir)!r}, 'mine', log=print)\n"
        "except RunDirError as err:\n"
        "    print(err)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"cannot write {run_dir / LOCK_FILE_NAME}: file too large" in out.stdout, out.stdout
    assert "ulimit -f" in out.stdout
    assert sorted(p.name for p in run_dir.iterdir()) == []


@pytest.mark.slow
def test_overwrite_clears_everything_trainrt_writes_into_a_run_dir(tmp_path):
    # A run with TensorBoard and its ONNX policy, then eval, an older checkpoint's export and a report: every
    # name they write is one overwrite clears; the new run completes with a run id of its own.
    from trainrt.runner.evaluate import evaluate_run
    from trainrt.runner.export import export_run
    from trainrt.viz.report import write_report

    run_dir = tmp_path / "run"
    first = OffPolicyRunner(tiny_config(run_dir), log=lambda line: None).run()
    export_run(run_dir, checkpoint="1")
    evaluate_run(run_dir, num_envs=2, steps=2, use_graph=False, log=lambda line: None)
    write_report(run_dir, log=lambda line: None)
    written = {p.name for p in run_dir.iterdir()}
    assert {"tensorboard", "policy.onnx", "policy_1.onnx", "eval", "report"} <= written, written
    lines = []
    second = OffPolicyRunner(
        tiny_config(run_dir, "sac", "g1_walk_flat", *QUIET, "training.overwrite=true"), log=lines.append
    ).run()
    assert any(line.startswith(f"training.overwrite=true: cleared {run_dir}") for line in lines), lines
    assert second.status == "completed" and second.run_id != first.run_id
    assert not {"tensorboard", "policy.onnx", "policy_1.onnx", "eval", "report"} & {
        p.name for p in run_dir.iterdir()
    }
