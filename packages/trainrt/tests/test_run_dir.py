"""Run-directory ownership: the lock, stale-lock takeover, refusal of a used directory, unusable paths."""

import json
import os
import socket
import subprocess
import sys

import pytest

from trainrt.runner.run_dir import (
    LOCK_FILE_NAME,
    RunDirError,
    RunDirLock,
    check_run_dir_usable,
    read_lock_holder,
    refuse_a_used_run_dir,
)


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


@pytest.mark.parametrize(
    ("contents", "overwrite", "expected"),
    [
        ([], False, "ok"),
        ([LOCK_FILE_NAME], False, "ok"),  # a stale lock alone does not make a directory used
        (["config.json", "checkpoints/"], False, "refused"),
        (["config.json", "checkpoints/"], True, "cleared"),
    ],
)
def test_a_new_run_refuses_or_clears_a_used_directory(tmp_path, contents, overwrite, expected):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for name in contents:
        if name.endswith("/"):
            (run_dir / name).mkdir()
            (run_dir / name / "ckpt_000001.pt").write_bytes(b"x")
        else:
            (run_dir / name).write_text("{}")
    lines = []
    if expected == "refused":
        with pytest.raises(
            RunDirError, match=r"is not empty \(checkpoints, config.json\).*training.overwrite=true"
        ):
            refuse_a_used_run_dir(run_dir, overwrite=overwrite, log=lines.append)
        assert (run_dir / "config.json").exists()
        return
    refuse_a_used_run_dir(run_dir, overwrite=overwrite, log=lines.append)
    left = sorted(p.name for p in run_dir.iterdir())
    assert left == ([LOCK_FILE_NAME] if LOCK_FILE_NAME in contents else [])
    assert (expected == "cleared") == any("cleared" in line for line in lines)


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
    run_dir.mkdir()
    (run_dir / "config.json").write_text("{}")
    (run_dir / "run_summary.json").write_text("{}")
    with pytest.raises(RunDirError) as refused:
        refuse_a_used_run_dir(run_dir, overwrite=False, log=lambda line: None)
    assert "training.resume" not in str(refused.value)
    assert "holds no checkpoint to resume: clear it with training.overwrite=true" in str(refused.value)
