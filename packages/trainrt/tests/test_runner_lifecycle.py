"""Run lifecycle on the CPU: directory ownership, the running summary, overflow reports, resume continuity."""

import json
import re

import pytest
import torch
from test_runner_train import tiny_config

from trainrt.runner import OffPolicyRunner, load_run_summary
from trainrt.runner.checkpoint import checkpoint_path, load_checkpoint
from trainrt.runner.collector import Collector
from trainrt.runner.off_policy_runner import ContactBufferOverflow
from trainrt.runner.run_dir import LOCK_FILE_NAME, RunDirError, RunDirLock

QUIET = ["training.final_eval=false", "training.export_onnx=false", "training.tensorboard=false"]
STATISTICS = ("return_mean", "return_var", "return_count", "return_abs_max", "running_return")


def _run(run_dir, *extra, algo="sac", log=None):
    cfg = tiny_config(run_dir, algo, "g1_walk_flat", *QUIET, *extra)
    return OffPolicyRunner(cfg, log=log or (lambda line: None)).run()


@pytest.fixture(scope="module")
def flashsac_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("lifecycle") / "flashsac"
    summary = _run(run_dir, "algo.max_iterations=1", algo="flashsac")
    return run_dir, summary


def test_a_finished_run_owns_its_directory_and_releases_the_lock(flashsac_run):
    run_dir, summary = flashsac_run
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert summary.run_id and manifest["run_id"] == summary.run_id
    assert load_checkpoint(run_dir)["run_id"] == summary.run_id
    assert not (run_dir / LOCK_FILE_NAME).exists()
    assert summary.status == "completed" and summary.finished_at is not None and summary.warnings == []


def test_a_new_run_refuses_a_used_directory_and_overwrite_clears_it(flashsac_run, tmp_path):
    run_dir, first = flashsac_run
    before = sorted(p.name for p in run_dir.iterdir())
    with pytest.raises(RunDirError, match=r"is not empty .*training.resume=.*training.overwrite=true"):
        OffPolicyRunner(tiny_config(run_dir, "flashsac", "g1_walk_flat", *QUIET))
    assert sorted(p.name for p in run_dir.iterdir()) == before  # nothing written, no lock left behind
    assert load_run_summary(run_dir).run_id == first.run_id
    # overwrite on a copy: the old checkpoints go, the new run has its own id
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(run_dir, copy)
    (copy / "checkpoints" / "ckpt_000009.pt").write_bytes(b"from the old run")
    lines = []
    summary = _run(
        copy, "training.overwrite=true", "algo.max_iterations=1", algo="flashsac", log=lines.append
    )
    assert any("training.overwrite=true: cleared" in line for line in lines)
    assert summary.run_id != first.run_id
    assert sorted(p.name for p in (copy / "checkpoints").iterdir()) == ["ckpt_000001.pt"]


def test_a_locked_directory_is_refused_before_anything_is_written(tmp_path):
    run_dir = tmp_path / "run"
    lock = RunDirLock(run_dir, "holder", log=lambda line: None)
    try:
        with pytest.raises(RunDirError, match=r"in use by pid \d+ on host .*run id holder"):
            OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_flat", *QUIET))
        assert sorted(p.name for p in run_dir.iterdir()) == [LOCK_FILE_NAME]
    finally:
        lock.release()


def test_overwrite_never_clears_the_run_being_resumed(flashsac_run):
    run_dir, _ = flashsac_run
    cfg = tiny_config(
        run_dir,
        "flashsac",
        "g1_walk_flat",
        *QUIET,
        "algo.max_iterations=3",
        f"training.resume={run_dir}",
        "training.overwrite=true",
    )
    with pytest.raises(RunDirError, match=r"would delete .*the run being resumed"):
        OffPolicyRunner(cfg)
    assert checkpoint_path(run_dir, 1).is_file()


@pytest.mark.parametrize("save_replay", [False, True])
def test_resume_restores_the_return_statistics_and_the_replay_on_request(tmp_path, save_replay):
    run_dir = tmp_path / "run"
    _run(
        run_dir, "algo.max_iterations=1", f"training.save_replay={str(save_replay).lower()}", algo="flashsac"
    )
    saved = load_checkpoint(run_dir)["replay"]
    assert set(saved["statistics"]) == set(STATISTICS)
    assert float(saved["statistics"]["return_count"]) > 0
    assert ("rings" in saved) == save_replay
    lines = []
    cfg = tiny_config(
        run_dir, "flashsac", "g1_walk_flat", *QUIET, "algo.max_iterations=2", f"training.resume={run_dir}"
    )
    runner = OffPolicyRunner(cfg, log=lines.append)
    try:
        runner._set_up()  # restores the checkpoint; warm-up would then add rows to the replay
        for name in STATISTICS:
            assert torch.equal(getattr(runner.replay, name), saved["statistics"][name]), name
        if save_replay:
            assert runner.replay.num_rows() == int(saved["rings"]["rows_written"])
            assert any("replay restored from the checkpoint" in line for line in lines), lines
        else:
            assert runner.replay.num_rows() == 0
            assert any("the replay itself refills during warm-up" in line for line in lines), lines
        assert load_run_summary(run_dir).status == "running"  # the resumed run's own summary, not the old one
    finally:
        runner._release_run_dir()


def test_the_summary_says_running_while_the_run_runs(tmp_path, monkeypatch):
    real_collect = Collector.collect
    seen = []

    def collect_and_read_the_summary(self, num_steps):
        seen.append(load_run_summary(tmp_path / "run"))
        real_collect(self, num_steps)

    monkeypatch.setattr(Collector, "collect", collect_and_read_the_summary)
    summary = _run(tmp_path / "run", "algo.max_iterations=2")
    assert [s.status for s in seen] == ["running", "running"]
    assert [s.completed_iterations for s in seen] == [0, 1]  # rewritten at iteration 1's checkpoint
    assert seen[1].checkpoint_path == str(checkpoint_path(tmp_path / "run", 1))
    assert seen[0].finished_at is None and summary.status == "completed"


@pytest.mark.slow
def test_a_reward_scale_set_by_one_outlier_return_is_reported_once_and_recorded(tmp_path):
    lines = []
    # normalized_return_max far below the returns: the max |return| term dwarfs the returns' std
    summary = _run(
        tmp_path / "run", "algo.max_iterations=3", "training.log_every=1", "algo.params.normalized_return_max=0.001",
        algo="flashsac", log=lines.append,
    )  # fmt: skip
    assert summary.status == "completed"
    reported = [line for line in lines if line.startswith("warning:") and "reward scale" in line]
    assert len(reported) == 1, reported  # logged at iterations 1, 2 and 3, reported once
    (warning,) = [w for w in summary.warnings if "reward scale" in w]
    assert warning.startswith("iteration 1: FlashSAC's reward scale") and "reward_scaling=false" in warning


def test_a_buffer_overflow_is_reported_at_log_time_and_recorded(tmp_path):
    lines = []
    # rows for every contact, so that only the contact buffer overflows (njmax derives from nconmax)
    summary = _run(tmp_path / "run", "sim.nconmax=1", "sim.njmax=400", log=lines.append)
    assert summary.status == "completed"
    assert len(summary.warnings) == 1
    assert "iteration 1:" in summary.warnings[0] and "sim.nconmax=" in summary.warnings[0]
    assert "(now 1)" in summary.warnings[0]
    reported = [line for line in lines if line.startswith("warning:") and "overflow" in line]
    assert len(reported) == 1, reported  # once, when it happened (iteration 1), not again


def test_fail_on_overflow_makes_an_overflow_fatal(tmp_path):
    with pytest.raises(ContactBufferOverflow, match=r"sim.nconmax=\d+ \(now 1\).*fail_on_overflow"):
        _run(tmp_path / "run", "sim.nconmax=1", "training.fail_on_overflow=true")
    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "failed" and "sim.nconmax" in summary.error


def test_a_non_finite_loss_stops_the_run_naming_it(tmp_path, monkeypatch):
    from trainrt.algos import Agent
    from trainrt.runner.run_log import LearnerDiverged

    losses = Agent.losses

    def diverged(self):
        out = dict(losses(self))
        out["critic_loss"] = torch.full_like(out["critic_loss"], float("nan"))
        return out

    monkeypatch.setattr(Agent, "losses", diverged)
    with pytest.raises(
        LearnerDiverged, match=r"iteration 1: the learner's losses went non-finite \(critic_loss=nan\)"
    ):
        _run(tmp_path / "run", "algo.max_iterations=2")
    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "failed" and "critic_loss=nan" in summary.error


def test_a_replay_larger_than_the_free_device_memory_fails_naming_its_two_sizes(tmp_path, monkeypatch):
    import trainrt.runner.build as build

    monkeypatch.setattr(build, "free_device_bytes", lambda device: 1024)
    with pytest.raises(build.ReplayDoesNotFit) as raised:
        _run(tmp_path / "run")
    message = str(raised.value)
    assert re.search(r"need \d+\.\d\d GiB and 0\.00 GiB are free", message), message
    assert re.search(r"algo\.params\.buffer_size_per_env \(now \d+\) or algo\.num_envs \(now \d+\)", message)
    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "failed" and "buffer_size_per_env" in summary.error
    assert (tmp_path / "run" / "config.json").is_file()  # the resolved config stays to rerun from


def test_a_cpu_replay_is_checked_against_the_hosts_available_memory(tmp_path, monkeypatch):
    import trainrt.runner.build as build

    available = build.host_available_bytes()
    assert available is None or available > 0
    assert build.free_device_bytes("cpu") == available
    monkeypatch.setattr(build, "host_available_bytes", lambda: 1024)
    cfg = tiny_config(tmp_path / "run", "sac", "g1_walk_flat")
    env = build.build_env(cfg, num_envs=2)
    try:
        with pytest.raises(build.ReplayDoesNotFit, match=r"0\.00 GiB are free.*Or free host memory"):
            build.build_replay(cfg, env)
    finally:
        env.close()


def test_a_replay_allocation_that_runs_out_of_memory_fails_naming_its_two_sizes(tmp_path, monkeypatch):
    import trainrt.runner.build as build

    class OutOfMemoryReplay(build.DeviceReplayBuffer):
        def __init__(self, *args, **kwargs):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 12.00 GiB")

    monkeypatch.setattr(build, "DeviceReplayBuffer", OutOfMemoryReplay)
    with pytest.raises(build.ReplayDoesNotFit, match=r"the allocation failed.*buffer_size_per_env") as raised:
        _run(tmp_path / "run")
    assert isinstance(raised.value.__cause__, torch.OutOfMemoryError)


def test_the_run_reports_its_replay_size_at_set_up(tmp_path):
    lines = []
    _run(tmp_path / "run", log=lines.append)
    (line,) = [line for line in lines if line.startswith("replay: ")]
    assert re.fullmatch(r"replay: \d+ envs x \d+ steps per env, \d+\.\d\d GiB on cpu", line), line


def test_the_warm_up_line_says_which_learner_parts_run_uncompiled():
    from trainrt.runner.off_policy_runner import _compile_note

    assert _compile_note({"compile_enabled": True, "compile_fallback_reason": ""}) == ""
    assert _compile_note({"compile_enabled": False, "compile_fallback_reason": "cpu device"}) == (
        " [uncompiled: cpu device]"
    )
    partly = {"compile_enabled": True, "compile_fallback_reason": "_actor_step: compiling failed: X"}
    assert _compile_note(partly) == " [parts uncompiled: _actor_step: compiling failed: X]"
