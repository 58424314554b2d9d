"""CLI faults, as a user or an operator meets them: bad run directories, damaged checkpoints, signals, overflow.

Every expected failure exits with its code and one clear line (no traceback unless ``--debug``); every run
leaves a summary that tells the truth. Runs are tiny (CPU MuJoCo, 2 envs, 1-2 iterations).
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from cli_runs import TINY, train, trainrt

from trainrt.runner import load_run_summary
from trainrt.runner.checkpoint import checkpoint_path, checkpoints_newest_first
from trainrt.runner.run_dir import LOCK_FILE_NAME, read_lock_holder

SAC = ["--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco", "--preset", "cpu-demo"]


def _copy(run_dir: Path, target: Path) -> Path:
    shutil.copytree(run_dir, target)
    return target


def _hold_lock(run_dir: Path) -> subprocess.Popen:
    """A process holding ``run_dir``'s lock until its stdin closes (what a second writer meets)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom trainrt.runner.run_dir import RunDirLock\n"
            f"lock = RunDirLock({str(run_dir)!r}, 'holder', log=lambda line: None)\n"
            "print('locked', flush=True)\nsys.stdin.readline()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    return holder


def _corrupt_every_checkpoint(run_dir: Path) -> None:
    for path in (run_dir / "checkpoints").iterdir():
        path.write_bytes(path.read_bytes()[:64])


# Each case: (id, setup(tmp_path, finished_run) -> command args, exit code, fragment of stderr).
BAD_INPUTS = [
    (
        "cuda-without-cuda",
        lambda tmp, run: ["train", *SAC, *TINY, f"training.run_dir={tmp / 'r'}", "sim.device=cuda"],
        2,
        "sim.device=cuda but no CUDA device is visible",
    ),
    (
        "empty-resume",
        lambda tmp, run: ["train", *SAC, *TINY, "training.resume="],
        2,
        "training.resume is empty",
    ),
    (
        "run-dir-is-a-file",
        lambda tmp, run: ["train", *SAC, *TINY, f"training.run_dir={_file(tmp)}"],
        2,
        "the run directory is a file, not a directory",
    ),
    (
        "run-dir-under-a-file",
        lambda tmp, run: ["train", *SAC, *TINY, f"training.run_dir={_file(tmp) / 'run'}"],
        2,
        "a parent of the run directory, is a file",
    ),
    (
        "run-dir-not-empty",
        lambda tmp, run: ["train", *SAC, *TINY, f"training.run_dir={_copy(run, tmp / 'used')}"],
        2,
        "is not empty",
    ),
    (
        "resume-missing-dir",
        lambda tmp, run: ["train", *SAC, *TINY, f"training.resume={tmp / 'nowhere'}"],
        2,
        "not found",
    ),
    (
        "resume-all-checkpoints-corrupt",
        lambda tmp, run: [
            "train",
            *SAC,
            "algo.max_iterations=3",
            f"training.resume={_corrupted_copy(run, tmp / 'broken')}",
        ],
        2,
        "no usable checkpoint",
    ),
    (
        "resume-and-overwrite-the-same-dir",
        lambda tmp, run: [
            "train",
            *SAC,
            "algo.max_iterations=3",
            f"training.resume={_copy(run, tmp / 'again')}",
            "training.overwrite=true",
        ],
        2,
        "would delete",
    ),
    (
        "resume-a-finished-run",
        lambda tmp, run: ["train", *SAC, f"training.resume={_copy(run, tmp / 'done')}"],
        2,
        "raise algo.max_iterations",
    ),
    (
        "play-all-checkpoints-corrupt",
        lambda tmp, run: [
            "play",
            str(_corrupted_copy(run, tmp / "broken")),
            "--num-envs",
            "2",
            "--steps",
            "2",
        ],
        2,
        "is truncated",
    ),
    (
        "export-not-a-run-dir",
        lambda tmp, run: ["export", str(tmp)],
        2,
        "a trainrt run directory?",
    ),
    (
        "eval-a-checkpoint-of-another-run",
        lambda tmp, run: [
            "eval",
            str(_copy(run, tmp / "run")),
            "--checkpoint",
            str(_foreign_checkpoint(run, tmp / "other")),
            "--num-envs",
            "2",
            "--steps",
            "2",
        ],
        2,
        "belongs to run another_run, not to run",
    ),
    (
        "play-a-checkpoint-of-another-run",
        lambda tmp, run: [
            "play",
            str(run),
            "--checkpoint",
            str(_foreign_checkpoint(run, tmp / "other")),
            "--num-envs",
            "2",
            "--steps",
            "2",
        ],
        2,
        "belongs to run another_run, not to run",
    ),
    (
        "export-a-checkpoint-of-another-run",
        lambda tmp, run: [
            "export",
            str(run),
            "--checkpoint",
            str(_foreign_checkpoint(run, tmp / "other")),
            "--output",
            str(tmp / "policy.onnx"),
        ],
        2,
        "belongs to run another_run, not to run",
    ),
    (
        "export-output-is-a-directory",
        lambda tmp, run: ["export", str(run), "--output", str(tmp)],
        2,
        "is a directory; give a file path, e.g. --output",
    ),
    (
        "eval-out-is-a-directory",
        lambda tmp, run: ["eval", str(run), "--out", str(tmp), "--num-envs", "2", "--steps", "2"],
        2,
        "is a directory; give a file path, e.g. --out",
    ),
    (
        "report-output-is-a-file",
        lambda tmp, run: ["report", str(run), "--output", str(run / "config.json")],
        2,
        "config.json is a file; report writes its PNGs into a folder",
    ),
    (
        "report-of-a-file",
        lambda tmp, run: ["report", str(_file(tmp))],
        2,
        "a_file is a file, not a run directory",
    ),
    (
        "play-truncated-config",
        lambda tmp, run: ["play", str(_truncated_config_copy(run, tmp / "run")), "--num-envs", "2"],
        2,
        "config.json: not valid JSON (empty or truncated)",
    ),
]


def _file(tmp: Path) -> Path:
    path = tmp / "a_file"
    path.write_text("not a directory")
    return path


def _corrupted_copy(run: Path, target: Path) -> Path:
    _copy(run, target)
    _corrupt_every_checkpoint(target)
    return target


def _truncated_config_copy(run: Path, target: Path) -> Path:
    _copy(run, target)
    config = target / "config.json"
    config.write_text(config.read_text()[:100])
    return target


def _foreign_checkpoint(run: Path, other: Path) -> Path:
    """A checkpoint of another run (its own directory ``other``), as the run's newest checkpoint copied."""
    state = torch.load(checkpoint_path(run, 2), weights_only=False)
    state["run_id"] = "another_run"
    path = checkpoint_path(other, 9)
    path.parent.mkdir(parents=True)
    torch.save(state, path)
    return path


@pytest.mark.parametrize(("case", "setup", "code", "fragment"), BAD_INPUTS, ids=[c[0] for c in BAD_INPUTS])
def test_bad_inputs_exit_with_their_code_and_one_clear_line(
    tmp_path, finished_run, case, setup, code, fragment
):
    if case == "cuda-without-cuda" and torch.cuda.is_available():
        pytest.skip("needs a machine without CUDA")
    out = trainrt(*setup(tmp_path, finished_run))
    assert out.returncode == code, out.stderr[-3000:]
    assert fragment in out.stderr, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr[-3000:]


def test_a_locked_run_dir_is_refused_naming_the_holder(tmp_path):
    run_dir = tmp_path / "run"
    holder = _hold_lock(run_dir)
    try:
        out = trainrt("train", *SAC, *TINY, f"training.run_dir={run_dir}")
        # the refused run wrote nothing and left the holder's lock alone
        assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_FILE_NAME]
        assert read_lock_holder(run_dir).run_id == "holder"
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)
    assert out.returncode == 2, out.stderr[-3000:]
    assert f"is in use by pid {holder.pid} on host" in out.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="permission bits do not stop root")
def test_an_unwritable_run_dir_is_a_usage_error(tmp_path):
    parent = tmp_path / "locked"
    parent.mkdir(mode=0o500)
    out = trainrt("train", *SAC, *TINY, f"training.run_dir={parent / 'run'}")
    assert out.returncode == 2 and "is not writable" in out.stderr and "Traceback" not in out.stderr


def test_debug_shows_the_traceback_of_an_expected_error(tmp_path):
    out = trainrt("--debug", "train", *SAC, *TINY, f"training.run_dir={_file(tmp_path)}")
    assert out.returncode == 2
    assert "Traceback" in out.stderr and "is a file, not a directory" in out.stderr


def test_overflow_is_fatal_with_fail_on_overflow(tmp_path):
    run_dir = tmp_path / "run"
    out = train(
        run_dir,
        "sac",
        "g1_walk_flat",
        "mujoco",
        "sim.nconmax=1",
        "training.fail_on_overflow=true",
        "algo.max_iterations=1",
    )
    assert out.returncode == 1, out.stderr[-3000:]
    assert "sim.nconmax=" in out.stderr and "fail_on_overflow" in out.stderr
    assert "Traceback" not in out.stderr
    assert "warning: algo.max_iterations is given 2 times" in out.stderr  # TINY sets it too
    summary = load_run_summary(run_dir)
    assert summary.status == "failed" and "sim.nconmax" in summary.error


def test_play_and_export_fall_back_past_a_damaged_newest_checkpoint(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    newest = checkpoint_path(run_dir, 2)
    newest.write_bytes(b"")
    out = trainrt("play", str(run_dir), "--num-envs", "2", "--steps", "2")
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"{newest} is empty (0 bytes)" in out.stderr and "falling back to" in out.stderr
    assert json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 1
    out = trainrt("export", str(run_dir), "--output", str(tmp_path / "policy.onnx"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ckpt_000001.pt" in out.stderr and (tmp_path / "policy.onnx").is_file()


def test_play_takes_only_checkpoints_of_the_run_that_owns_the_directory(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    foreign = torch.load(checkpoint_path(run_dir, 2), weights_only=False)
    foreign["run_id"] = "another_run"
    foreign["iteration"] = 7
    torch.save(foreign, checkpoint_path(run_dir, 7))
    out = trainrt("play", str(run_dir), "--num-envs", "2", "--steps", "2")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "belongs to run another_run" in out.stderr
    assert json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 2


def test_play_and_export_take_an_iteration_number_as_checkpoint(finished_run, tmp_path):
    out = trainrt("play", str(finished_run), "--checkpoint", "1", "--num-envs", "2", "--steps", "2")
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 1
    out = trainrt("export", str(finished_run), "--checkpoint", "1", "--output", str(tmp_path / "p.onnx"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 1


def test_export_of_an_older_checkpoint_leaves_the_runs_policy_and_other_files_alone(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    out = trainrt("export", str(run_dir))
    assert out.returncode == 0, out.stderr[-3000:]
    latest = (run_dir / "policy.onnx").read_bytes()
    out = trainrt("export", str(run_dir), "--checkpoint", "1")
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout[out.stdout.index("{") :])["path"] == str(run_dir / "policy_1.onnx")
    assert (run_dir / "policy.onnx").read_bytes() == latest  # still the checkpoint run_summary.json names
    notes = tmp_path / "notes.txt"
    notes.write_text("keep me")
    out = trainrt("export", str(run_dir), "--output", str(notes))
    assert out.returncode == 2 and "exists and is not an .onnx file" in out.stderr
    assert notes.read_text() == "keep me"


def test_evaluating_a_checkpoint_again_says_it_replaces_the_file(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    args = ("eval", str(run_dir), "--num-envs", "2", "--steps", "2", "--commands", "stand")
    first, second = trainrt(*args), trainrt(*args)
    assert first.returncode == 0 and second.returncode == 0, second.stderr[-3000:]
    assert "replaces the previous evaluation" not in first.stdout
    assert "(it replaces the previous evaluation of this checkpoint)" in second.stdout


def test_report_plots_the_scalars_of_a_run_whose_summary_is_damaged(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    (run_dir / "run_summary.json").write_text("")
    out = trainrt("report", str(run_dir))
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"{run_dir / 'run_summary.json'}: not valid JSON (empty or truncated)" in out.stderr
    assert (run_dir / "report" / "episode.png").is_file() and "Traceback" not in out.stderr


def test_resuming_a_copied_run_writes_into_the_copy(finished_run, tmp_path):
    copy = _copy(finished_run, tmp_path / "copy")
    before = sorted(p.name for p in (finished_run / "checkpoints").iterdir())
    out = trainrt("train", *SAC, f"training.resume={copy}", "algo.max_iterations=3")
    assert out.returncode == 0, out.stderr[-3000:]
    assert checkpoint_path(copy, 3).is_file()
    assert sorted(p.name for p in (finished_run / "checkpoints").iterdir()) == before
    assert load_run_summary(copy).status == "completed" and load_run_summary(copy).resumed_from_iteration == 2
    assert "the replay itself refills during warm-up" in out.stdout


def test_overwrite_clears_a_used_run_dir(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    old_id = load_run_summary(run_dir).run_id
    (run_dir / "checkpoints" / "ckpt_000050.pt").write_bytes(b"an old run's checkpoint")
    out = train(run_dir, "sac", "g1_walk_flat", "mujoco", "training.overwrite=true", "algo.max_iterations=1")
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["ckpt_000001.pt"]
    assert load_run_summary(run_dir).run_id != old_id


# --- signals ------------------------------------------------------------------------------------------------


def _start_long_run(run_dir: Path) -> subprocess.Popen:
    overrides = [
        *TINY,
        "algo.max_iterations=100000",
        "training.tensorboard=false",
        f"training.run_dir={run_dir}",
    ]
    return subprocess.Popen(
        [sys.executable, "-m", "trainrt", "train", *SAC, *overrides],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_an_iteration(process: subprocess.Popen, run_dir: Path, timeout_sec: float = 600) -> None:
    """Poll the running summary until it records a completed iteration (the run checkpoints every one)."""
    deadline = time.monotonic() + timeout_sec
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()[-3000:]
        try:
            summary = json.loads((run_dir / "run_summary.json").read_text())
        except (OSError, ValueError):
            summary = {}
        if summary.get("status") == "running" and summary.get("completed_iterations", 0) >= 1:
            return
        time.sleep(0.05)  # a polling interval, not a wait for something to happen
    process.kill()
    raise AssertionError("the run reported no iteration in time")


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGHUP, 129)], ids=["TERM", "HUP"])
def test_a_stop_signal_saves_a_checkpoint_and_an_interrupted_summary(tmp_path, sig, code):
    run_dir = tmp_path / "run"
    process = _start_long_run(run_dir)
    _wait_for_an_iteration(process, run_dir)
    process.send_signal(sig)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == code, stderr[-3000:]
    summary = load_run_summary(run_dir)
    assert summary.status == "interrupted" and summary.signal == sig.name
    assert summary.completed_iterations >= 1
    assert Path(summary.checkpoint_path) == checkpoint_path(run_dir, summary.completed_iterations)
    assert Path(summary.checkpoint_path).is_file()
    assert not (run_dir / LOCK_FILE_NAME).exists()
    assert f"interrupted by {sig.name}" in stderr


def test_kill_9_leaves_a_running_summary_and_the_run_resumes(tmp_path):
    run_dir = tmp_path / "run"
    process = _start_long_run(run_dir)
    _wait_for_an_iteration(process, run_dir)
    process.kill()
    process.communicate(timeout=60)
    summary = load_run_summary(run_dir)
    assert summary.status == "running" and summary.completed_iterations >= 1
    assert (run_dir / LOCK_FILE_NAME).exists()  # nobody holds it any more: stale
    # The kill can land between the summary's last update and a newer checkpoint: resume goes on from the
    # newest checkpoint, which is at least as far as the summary says.
    done = int(checkpoints_newest_first(run_dir)[0].stem.split("_")[1])
    assert done >= summary.completed_iterations
    out = trainrt("train", *SAC, f"training.resume={run_dir}", f"algo.max_iterations={done + 1}")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "taking over the stale lock" in out.stdout
    resumed = load_run_summary(run_dir)
    assert resumed.status == "completed" and resumed.completed_iterations == done + 1
    assert resumed.run_id == summary.run_id
