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
    state = torch.load(checkpoint_path(run, 2), weights_only=True)
    state["run_id"] = "another_run"
    path = checkpoint_path(other, 9)
    path.parent.mkdir(parents=True)
    torch.save(state, path)
    return path


@pytest.mark.slow
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


@pytest.mark.slow
def test_a_cache_folder_that_is_a_file_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setenv("TRAINRT_CACHE_DIR", str(_file(tmp_path)))
    out = trainrt("train", *SAC, *TINY, f"training.run_dir={tmp_path / 'run'}")
    assert out.returncode == 2, out.stderr[-3000:]
    assert f"TRAINRT_CACHE_DIR={tmp_path / 'a_file'} is a file, not a folder" in out.stderr
    assert "Traceback" not in out.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
def test_play_and_export_fall_back_past_a_damaged_newest_checkpoint(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    newest = checkpoint_path(run_dir, 2)
    newest.write_bytes(b"")
    out = trainrt("play", str(run_dir), "--num-envs", "2", "--steps", "2", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"{newest} is empty (0 bytes)" in out.stderr and "falling back to" in out.stderr
    assert json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 1
    out = trainrt("export", str(run_dir), "--output", str(tmp_path / "policy.onnx"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert "ckpt_000001.pt" in out.stderr and (tmp_path / "policy.onnx").is_file()


@pytest.mark.slow
def test_play_takes_only_checkpoints_of_the_run_that_owns_the_directory(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    foreign = torch.load(checkpoint_path(run_dir, 2), weights_only=True)
    foreign["run_id"] = "another_run"
    foreign["iteration"] = 7
    torch.save(foreign, checkpoint_path(run_dir, 7))
    out = trainrt("play", str(run_dir), "--num-envs", "2", "--steps", "2", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "belongs to run another_run" in out.stderr
    assert json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 2


@pytest.mark.slow
def test_play_and_export_take_an_iteration_number_as_checkpoint(finished_run, tmp_path):
    out = trainrt("play", str(finished_run), "--checkpoint", "1", "--num-envs", "2", "--steps", "2", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 1
    out = trainrt("export", str(finished_run), "--checkpoint", "1", "--output", str(tmp_path / "p.onnx"))
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 1


@pytest.mark.slow
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


@pytest.mark.slow
def test_evaluating_a_checkpoint_again_says_it_replaces_the_file(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    args = ("eval", str(run_dir), "--num-envs", "2", "--steps", "2", "--commands", "stand")
    first, second = trainrt(*args), trainrt(*args)
    assert first.returncode == 0 and second.returncode == 0, second.stderr[-3000:]
    assert "replaces the previous evaluation" not in first.stdout
    assert "(it replaces the previous evaluation of this checkpoint)" in second.stdout


@pytest.mark.slow
def test_report_plots_the_scalars_of_a_run_whose_summary_is_damaged(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    (run_dir / "run_summary.json").write_text("")
    out = trainrt("report", str(run_dir))
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"{run_dir / 'run_summary.json'}: not valid JSON (empty or truncated)" in out.stderr
    # the learner's scalars, and the throughput from the Perf/* scalars in place of the summary's timings
    assert (run_dir / "report" / "losses.png").is_file() and "Traceback" not in out.stderr
    assert (run_dir / "report" / "throughput.png").is_file()


@pytest.mark.slow
def test_resuming_a_copied_run_writes_into_the_copy(finished_run, tmp_path):
    copy = _copy(finished_run, tmp_path / "copy")
    before = sorted(p.name for p in (finished_run / "checkpoints").iterdir())
    out = trainrt("train", *SAC, f"training.resume={copy}", "algo.max_iterations=3")
    assert out.returncode == 0, out.stderr[-3000:]
    assert checkpoint_path(copy, 3).is_file()
    assert sorted(p.name for p in (finished_run / "checkpoints").iterdir()) == before
    assert load_run_summary(copy).status == "completed" and load_run_summary(copy).resumed_from_iteration == 2
    assert "the replay itself refills during warm-up" in out.stdout


@pytest.mark.slow
def test_overwrite_clears_a_used_run_dir(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    old_id = load_run_summary(run_dir).run_id
    (run_dir / "checkpoints" / "ckpt_000050.pt").write_bytes(b"an old run's checkpoint")
    out = train(run_dir, "sac", "g1_walk_flat", "mujoco", "training.overwrite=true", "algo.max_iterations=1")
    assert out.returncode == 0, out.stderr[-3000:]
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["ckpt_000001.pt"]
    assert load_run_summary(run_dir).run_id != old_id


# --- checkpoints that would run code, do not fit, or are no checkpoint file ---------------------------------


class _RunsCode:
    """Unpickles by calling ``os.system``: what a planted checkpoint carries."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def _planted_copy(run: Path, target: Path, marker: Path, iterations: tuple[int, ...]) -> Path:
    """A copy of ``run`` whose checkpoints of ``iterations`` would create ``marker`` when unpickled."""
    _copy(run, target)
    for iteration in iterations:
        state = torch.load(checkpoint_path(target, iteration), weights_only=True)
        torch.save({**state, "timings": _RunsCode(marker)}, checkpoint_path(target, iteration))
    return target


def _policy_command(command: str, run_dir: Path, tmp: Path, *extra: str) -> list[str]:
    """``play``, ``eval`` or ``export`` of ``run_dir`` as a tiny CLI call."""
    if command == "export":
        return ["export", str(run_dir), "--output", str(tmp / "policy.onnx"), *extra]
    rollout = ["--num-envs", "2", "--steps", "2"] + (
        ["--commands", "stand"] if command == "eval" else ["--json"]
    )
    return [command, str(run_dir), *rollout, *extra]


def _one_error_line(out: subprocess.CompletedProcess) -> str:
    """The single ``error:`` line of a refused command (asserting exit 2 and no traceback)."""
    assert out.returncode == 2, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr[-3000:]
    return errors[0]


@pytest.mark.slow
def test_play_eval_export_and_resume_pass_over_a_newest_checkpoint_that_would_run_code(
    finished_run, tmp_path
):
    marker = tmp_path / "marker"
    run_dir = _planted_copy(finished_run, tmp_path / "run", marker, (2,))
    planted = checkpoint_path(run_dir, 2)
    for command in ("play", "eval", "export"):
        out = trainrt(*_policy_command(command, run_dir, tmp_path))
        assert out.returncode == 0, out.stderr[-3000:]
        assert f"checkpoint {planted} holds Python objects that could run code when loaded" in out.stderr
        assert f"falling back to {checkpoint_path(run_dir, 1)}" in out.stderr
        assert not marker.exists(), command
    out = trainrt("train", *SAC, f"training.resume={run_dir}", "algo.max_iterations=3")
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"checkpoint {planted} holds Python objects that could run code" in out.stdout + out.stderr
    assert load_run_summary(run_dir).resumed_from_iteration == 1
    assert not marker.exists()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["play", "eval", "export", "resume"])
def test_a_run_whose_every_checkpoint_would_run_code_is_refused(finished_run, tmp_path, command):
    marker = tmp_path / "marker"
    run_dir = _planted_copy(finished_run, tmp_path / "run", marker, (1, 2))
    if command == "resume":
        args = ["train", *SAC, f"training.resume={run_dir}", "algo.max_iterations=3"]
    else:
        args = _policy_command(command, run_dir, tmp_path)
    out = trainrt(*args)
    assert "no usable checkpoint" in _one_error_line(out)
    assert out.stderr.count("holds Python objects that could run code when loaded") == 2, out.stderr[-3000:]
    assert not marker.exists()


def _numpy_values(value):
    """``value`` with every tensor as a numpy array, as an earlier version might have written a checkpoint."""
    if isinstance(value, torch.Tensor):
        return value.numpy()
    if isinstance(value, dict):
        return type(value)((key, _numpy_values(item)) for key, item in value.items())
    if isinstance(value, list | tuple):
        return type(value)(_numpy_values(item) for item in value)
    return value


@pytest.mark.slow
def test_checkpoint_convert_rewrites_numpy_values_and_refuses_code(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    path = checkpoint_path(run_dir, 2)
    state = torch.load(path, weights_only=True)
    torch.save({**state, "agent": _numpy_values(state["agent"])}, path)
    out = trainrt(*_policy_command("play", run_dir, tmp_path))
    assert out.returncode == 0 and json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 1
    assert f"trainrt checkpoint convert {path}" in out.stderr
    out = trainrt("checkpoint", "convert", str(path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"numpy values of {path}: wrote {path}, the original is {path}.unsafe" in out.stdout
    out = trainrt(*_policy_command("play", run_dir, tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 2 and "warning" not in out.stderr
    marker = tmp_path / "marker"
    planted = _planted_copy(finished_run, tmp_path / "planted", marker, (2,))
    out = trainrt("checkpoint", "convert", str(checkpoint_path(planted, 2)))
    assert "holds Python objects beyond numpy values (posix.system)" in _one_error_line(out)
    assert not marker.exists()


def _edited_widths(run_dir: Path) -> None:
    """The run's config.json says other network widths than its checkpoints hold."""
    config = json.loads((run_dir / "config.json").read_text())
    config["algo"]["params"]["actor_hidden_dim"] = 16
    (run_dir / "config.json").write_text(json.dumps(config))


def _no_agent(run_dir: Path) -> None:
    """The run's newest checkpoint lacks the agent's state."""
    state = torch.load(checkpoint_path(run_dir, 2), weights_only=True)
    del state["agent"]
    torch.save(state, checkpoint_path(run_dir, 2))


MISFITS = [
    (
        "config-widths-edited",
        _edited_widths,
        [],
        "its weights do not fit the networks {run}/config.json builds (RuntimeError: size mismatch: ",
        "algo.params that differ from the run's: actor_hidden_dim=16 (the run used 8)",
    ),
    (
        "no-agent",
        _no_agent,
        ["--checkpoint", "2"],
        "has no 'agent' (it holds config, ",
        "--checkpoint ITERATION",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["play", "eval", "export"])
@pytest.mark.parametrize(("case", "damage", "extra", "problem", "fix"), MISFITS, ids=[m[0] for m in MISFITS])
def test_a_checkpoint_that_does_not_fit_is_one_line_naming_the_file(
    finished_run, tmp_path, command, case, damage, extra, problem, fix
):
    run_dir = _copy(finished_run, tmp_path / "run")
    damage(run_dir)
    line = _one_error_line(trainrt(*_policy_command(command, run_dir, tmp_path, *extra)))
    assert str(checkpoint_path(run_dir, 2)) in line and problem.format(run=run_dir) in line, line
    assert fix in line, line


@pytest.mark.slow
def test_play_falls_back_past_entries_that_are_no_checkpoint_file(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    checkpoint_path(run_dir, 2).unlink()
    checkpoint_path(run_dir, 2).mkdir()
    checkpoint_path(run_dir, 3).symlink_to(run_dir / "gone.pt")
    out = trainrt(*_policy_command("play", run_dir, tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"checkpoint {checkpoint_path(run_dir, 3)} is a symlink to {run_dir / 'gone.pt'}" in out.stderr
    assert f"checkpoint {checkpoint_path(run_dir, 2)} is a directory, not a checkpoint file" in out.stderr
    assert json.loads(out.stdout[out.stdout.index("{") :])["iteration"] == 1


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


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- what training.overwrite=true may delete, and writes the filesystem refuses ------------------------------


def _tree(folder: Path) -> list[str]:
    """Every path under ``folder``, relative to it."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.slow
def test_overwrite_refuses_a_folder_that_holds_no_run_and_deletes_nothing(tmp_path):
    thesis = tmp_path / "thesis"
    (thesis / "figures").mkdir(parents=True)
    (thesis / "chapter1.tex").write_text("\\chapter{Introduction}")
    (thesis / "figures" / "returns.png").write_bytes(b"png")
    before = _tree(thesis)
    out = trainrt("train", *SAC, *TINY, f"training.run_dir={thesis}", "training.overwrite=true")
    line = _one_error_line(out)
    assert f"{thesis} has no manifest.json with a run id" in line and "(chapter1.tex, figures)" in line
    assert "nothing was deleted" in line
    assert _tree(thesis) == before


@pytest.mark.slow
def test_overwrite_refuses_a_run_dir_holding_a_users_file(finished_run, tmp_path):
    run_dir = _copy(finished_run, tmp_path / "run")
    (run_dir / "notes.md").write_text("what I changed for this run")
    before = _tree(run_dir)
    out = trainrt("train", *SAC, *TINY, f"training.run_dir={run_dir}", "training.overwrite=true")
    line = _one_error_line(out)
    assert "holds entries trainrt did not write (notes.md)" in line and "nothing was deleted" in line
    assert _tree(run_dir) == before


@pytest.mark.slow
@pytest.mark.parametrize("where", ["parent", "inside"])
def test_overwrite_never_deletes_the_run_being_resumed(finished_run, tmp_path, where):
    if where == "parent":  # training.run_dir=<parent> while resuming <parent>/child
        resumed = _copy(finished_run, tmp_path / "parent" / "child")
        run_dir = tmp_path / "parent"
    else:  # training.run_dir=<resumed>/again
        resumed = _copy(finished_run, tmp_path / "run")
        run_dir = resumed / "again"
    checkpoints = _tree(resumed / "checkpoints")
    out = trainrt(
        "train",
        *SAC,
        "algo.max_iterations=3",
        f"training.resume={resumed}",
        f"training.run_dir={run_dir}",
        "training.overwrite=true",
    )
    line = _one_error_line(out)
    assert f"training.overwrite=true would delete {run_dir}" in line and "the run being resumed" in line
    assert _tree(resumed / "checkpoints") == checkpoints
    assert load_run_summary(resumed).status == "completed"


def _file_size_limit(limit_bytes: int):
    """A ``preexec_fn`` that limits the size of every file the child writes (``ulimit -f``)."""

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    return limit


@pytest.mark.slow
def test_a_file_size_limit_fails_the_run_with_one_line_and_a_failed_summary(tmp_path):
    # 64 KiB: room for the config, manifest, env tables and summaries, not for a checkpoint (~130 KB).
    run_dir = tmp_path / "run"
    overrides = [*TINY, "training.tensorboard=false", f"training.run_dir={run_dir}"]
    out = subprocess.run(
        [sys.executable, "-m", "trainrt", "train", *SAC, *overrides],
        capture_output=True,
        text=True,
        timeout=900,
        preexec_fn=_file_size_limit(64 * 1024),
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        check=False,
    )
    assert out.returncode == 1, out.stderr[-3000:]
    assert "Traceback" not in out.stderr and "inline_container" not in out.stderr, out.stderr[-3000:]
    failed = [line for line in out.stderr.splitlines() if line.startswith("training failed:")]
    assert len(failed) == 1, out.stderr[-3000:]
    line = failed[0].removeprefix("training failed: ")
    assert line.startswith(f"cannot write {checkpoint_path(run_dir, 1)}: file too large for this process's ")
    assert " free on " in line
    assert line.endswith("raise the limit (ulimit -f unlimited) or choose another training.run_dir")
    summary = load_run_summary(run_dir)
    assert summary.status == "failed" and summary.error == line
    assert not (run_dir / LOCK_FILE_NAME).exists()
    assert [p for p in run_dir.rglob("*") if p.name.endswith(".tmp")] == []


# --- settings that cannot run: refused before a run directory exists (finite floats, the warm-up, memory) ---

UNRUNNABLE_SETTINGS = [
    ("algo.num_envs=1000000000", "algo.num_envs=1000000000 needs ~", "lower algo.num_envs"),
    ("algo.params.batch_size=1000000000000", "most for the update batch", "lower algo.params.batch_size"),
    ("algo.params.critic_hidden_dim=1000000", "most for the networks", "lower algo.params.critic_hidden_dim"),
    ("algo.params.actor_lr=inf", "'algo.params.actor_lr': 'inf'", "must be a finite number, not inf or nan"),
    ("algo.params.v_max=inf", "'algo.params.v_max': 'inf'", "must be a finite number, not inf or nan"),
    (
        "algo.params.target_entropy_per_action=nan",
        "'algo.params.target_entropy_per_action': 'nan'",
        "must be a finite number, not inf or nan",
    ),
    (
        "task.episode_length_s=inf",
        "'task.episode_length_s': 'inf'",
        "must be a finite number, not inf or nan",
    ),
    ("algo.params.learning_starts=16", "warm-up steps do not fit", "buffer_size_per_env=16 rows per env"),
]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "names", "fix"), UNRUNNABLE_SETTINGS, ids=[s[0].split("=")[0] for s in UNRUNNABLE_SETTINGS]
)
def test_a_setting_that_cannot_run_exits_2_with_one_line_and_no_run_directory(tmp_path, override, names, fix):
    run_dir = tmp_path / "run"
    out = trainrt("train", *SAC, *TINY, f"training.run_dir={run_dir}", override)
    assert out.returncode == 2, out.stderr[-3000:]
    assert names in out.stderr and fix in out.stderr, out.stderr[-3000:]
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert len([line for line in out.stderr.splitlines() if line.startswith("error:")]) == 1, out.stderr
    assert not run_dir.exists()


def _motion_file_of_gigabytes(path: Path) -> Path:
    """A few hundred bytes whose ``joint_pos`` header declares 10^8 frames of 36 float64 columns (26.8 GiB)."""
    import io
    import zipfile

    import numpy as np

    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        member, {"descr": "<f8", "fortran_order": False, "shape": (10**8, 36)}
    )
    member.write(b"\0" * 64)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("joint_pos.npy", member.getvalue())
    return path


@pytest.mark.slow
def test_a_motion_file_that_decompresses_to_gigabytes_is_refused_before_the_run(tmp_path):
    run_dir = tmp_path / "run"
    clip = _motion_file_of_gigabytes(tmp_path / "bomb.npz")
    tracking = ["--algo", "sac", "--task", "g1_motion_tracking", "--sim", "mujoco", "--preset", "cpu-demo"]
    out = trainrt("train", *tracking, *TINY, f"training.run_dir={run_dir}", f"task.motion_file={clip}")
    assert out.returncode == 2, out.stderr[-3000:]
    assert f"{clip} (" in out.stderr and "holds 26.8 GiB of arrays once decompressed" in out.stderr
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    assert len([line for line in out.stderr.splitlines() if line.startswith("error:")]) == 1, out.stderr
    assert not run_dir.exists()


@pytest.mark.slow
@pytest.mark.parametrize("command", ["play", "eval"])
def test_a_rollout_with_more_envs_than_memory_is_refused_naming_num_envs(finished_run, command):
    out = trainrt(command, str(finished_run), "--num-envs", "1000000000", "--steps", "2")
    assert out.returncode == 2, out.stderr[-3000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, out.stderr[-3000:]
    assert errors[0].startswith("error: --num-envs 1000000000 ")
    assert errors[0].endswith("lower --num-envs")
    assert "Traceback" not in out.stderr
