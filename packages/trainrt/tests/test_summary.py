"""run_summary.json: the tail metric, the schema's consistency checks, and atomic writing."""

import importlib.util
import json
import math
import shutil
import subprocess

import pytest
from pydantic import ValidationError

from trainrt.runner.atomic_files import atomic_write_text
from trainrt.runner.iteration_clock import IterationClock
from trainrt.runner.summary import (
    IterationTiming,
    RunSummary,
    final_env_steps_per_sec,
    load_run_summary,
    tail_throughput,
    write_run_summary,
)


def _timings(walls, env_steps=1000):
    steps = env_steps if isinstance(env_steps, list) else [env_steps] * len(walls)
    return [
        IterationTiming(
            iteration=i + 1, env_steps=s, wall_time_sec=w, collect_time_sec=w / 2, learn_time_sec=w / 4
        )
        for i, (w, s) in enumerate(zip(walls, steps))
    ]


def _summary_dict(timings, window=100, **changes):
    tail = tail_throughput(timings, window)
    fields = {
        "status": "completed",
        "error": None,
        "algo": "sac",
        "task": "g1_walk_flat",
        "sim_backend": "mujoco",
        "device": "cpu",
        "num_envs": 2,
        "steps_per_iteration": 4,
        "updates_per_iteration": 1,
        "max_iterations": len(timings),
        "tail_env_steps_per_sec": tail.env_steps_per_sec,
        "tail_iteration_count": tail.iteration_count,
        "tail_window": window,
        "final_env_steps_per_sec": final_env_steps_per_sec(timings),
        "completed_iterations": len(timings),
        "total_env_steps": sum(t.env_steps for t in timings),
        "training_wall_time_sec": math.fsum(t.wall_time_sec for t in timings),
        "warmup_time_sec": 100.0,
        "warmup_env_steps": 20,
        "iterations": [t.model_dump() for t in timings],
        "effective_steps_per_replay": 1,
        "collector_graph": {"graph_enabled": False, "eager_fallback_reason": "cpu device"},
        "learner_graph": {"update_graph_enabled": False, "update_fallback_reason": "cpu device"},
        "backend_diagnostics": {"backend": "mujoco"},
        "episode_statistics": {"Episode/length": 10.0},
        "run_dir": "/tmp/run",
        "config_path": "/tmp/run/config.json",
        "commit": "unknown",
        "versions": {"torch": "2.x"},
        "python_version": "3.12.0",
        "gpu_name": None,
        "cuda_visible_devices": None,
        "started_at": "2026-01-01T00:00:00+00:00",
        "finished_at": "2026-01-01T00:01:00+00:00",
    }
    fields.update(changes)
    return fields


def test_tail_is_an_aggregate_not_a_mean_of_rates():
    # Iteration rates: 1000/1 = 1000/s and 1000/9 = 111/s -> mean of rates 555.6/s; aggregate 2000/10 = 200/s.
    timings = _timings([1.0, 9.0])
    tail = tail_throughput(timings, window=100)
    mean_of_rates = sum(t.env_steps / t.wall_time_sec for t in timings) / len(timings)
    assert tail.env_steps_per_sec == pytest.approx(200.0)
    assert mean_of_rates == pytest.approx(555.5556, rel=1e-4)


def test_tail_window_smaller_than_the_run_uses_only_the_last_iterations():
    timings = _timings([100.0, 100.0, 1.0, 3.0], env_steps=[1, 1, 1000, 1000])
    tail = tail_throughput(timings, window=2)
    assert tail.iteration_count == 2
    assert tail.env_steps_per_sec == pytest.approx(2000 / 4.0)


def test_tail_window_larger_than_the_run_uses_all_iterations():
    timings = _timings([2.0, 2.0, 4.0])
    tail = tail_throughput(timings, window=100)
    assert tail.iteration_count == 3
    assert tail.env_steps_per_sec == pytest.approx(3000 / 8.0)


def test_tail_of_no_iterations_is_zero_and_window_must_be_positive():
    assert tail_throughput([], window=100).iteration_count == 0
    assert tail_throughput([], window=100).env_steps_per_sec == 0.0
    with pytest.raises(ValueError, match="window"):
        tail_throughput(_timings([1.0]), window=0)


def test_warmup_is_outside_the_iteration_timings():
    # The clock only covers start() .. finish(); what happens before the first start() (warm-up) is not timed.
    clock = IterationClock("cpu")
    warmup_work = sum(i * i for i in range(200_000))  # real work before iteration 1
    clock.start()
    clock.mark_collected()
    clock.mark_learned()
    clock.synchronize_split()
    timing = clock.finish(iteration=1, env_steps=8)
    assert warmup_work > 0
    summary = RunSummary.model_validate(_summary_dict([timing], warmup_time_sec=50.0))
    assert summary.training_wall_time_sec == pytest.approx(timing.wall_time_sec)
    assert summary.tail_env_steps_per_sec == pytest.approx(8 / timing.wall_time_sec)
    assert summary.warmup_time_sec == 50.0


def test_final_rate_is_the_last_iteration_alone():
    assert final_env_steps_per_sec(_timings([1.0, 4.0])) == pytest.approx(250.0)
    assert final_env_steps_per_sec([]) is None


def test_a_consistent_summary_validates_and_round_trips(tmp_path):
    path = tmp_path / "run_summary.json"
    written = write_run_summary(path, _summary_dict(_timings([1.0, 2.0, 3.0]), window=2))
    loaded = load_run_summary(tmp_path)
    assert loaded == written
    assert loaded.tail_iteration_count == 2
    assert loaded.tail_env_steps_per_sec == pytest.approx(2000 / 5.0)


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"tail_env_steps_per_sec": 1234.0}, "does not follow from the timings"),
        ({"tail_iteration_count": 1}, "tail_iteration_count"),
        ({"completed_iterations": 7}, "completed_iterations"),
        ({"total_env_steps": 1}, "total_env_steps"),
        ({"training_wall_time_sec": 0.5}, "training_wall_time_sec"),
        ({"status": "failed"}, "must say why"),
        ({"status": "finished"}, "status"),
        ({"unexpected_field": 1}, "unexpected_field"),
        ({"warmup_time_sec": float("nan")}, "warmup_time_sec"),
        ({"tail_window": 0}, "tail_window"),
        ({"finished_at": None}, "must say when it finished"),
        ({"status": "interrupted", "finished_at": None}, "must say when it finished"),
    ],
)
def test_schema_rejects_a_malformed_summary(change, problem):
    fields = _summary_dict(_timings([1.0, 2.0]))
    fields.update(change)
    with pytest.raises(ValidationError, match=problem):
        RunSummary.model_validate(fields)


def test_a_summary_written_before_the_final_eval_rename_loads_with_the_new_name(tmp_path):
    result = {
        "mean_return": 1.5,
        "mean_episode_length": 3.0,
        "terminated_fraction": 0.0,
        "num_envs": 2.0,
        "num_steps": 3.0,
    }
    old = _summary_dict(_timings([1.0, 2.0]), evaluation=result)
    (tmp_path / "run_summary.json").write_text(json.dumps(old))
    loaded = load_run_summary(tmp_path)
    assert loaded.final_eval == result
    assert "evaluation" not in loaded.model_dump()
    # writing it again records the new name only
    write_run_summary(tmp_path / "run_summary.json", old)
    written = json.loads((tmp_path / "run_summary.json").read_text())
    assert written["final_eval"] == result and "evaluation" not in written
    assert RunSummary.model_validate({**old, "final_eval": result}).final_eval == result  # agreeing: fine
    both = {**old, "final_eval": {**result, "num_steps": 4.0}}
    with pytest.raises(ValidationError, match="evaluation is the deprecated name of final_eval"):
        RunSummary.model_validate(both)


def test_schema_rejects_missing_fields_and_bad_iteration_numbers():
    fields = _summary_dict(_timings([1.0, 2.0]))
    del fields["commit"]
    with pytest.raises(ValidationError, match="commit"):
        RunSummary.model_validate(fields)
    fields = _summary_dict(_timings([1.0, 2.0]))
    fields["iterations"][1]["iteration"] = 5
    with pytest.raises(ValidationError, match="numbered"):
        RunSummary.model_validate(fields)


def test_writing_a_malformed_summary_raises_and_leaves_the_old_file(tmp_path):
    path = tmp_path / "run_summary.json"
    write_run_summary(path, _summary_dict(_timings([1.0])))
    before = path.read_text()
    with pytest.raises(ValidationError):
        write_run_summary(path, _summary_dict(_timings([1.0]), tail_env_steps_per_sec=5.0))
    assert path.read_text() == before
    assert [p.name for p in tmp_path.iterdir()] == ["run_summary.json"]


def test_atomic_write_replaces_whole_file_and_cleans_up_on_failure(tmp_path):
    path = tmp_path / "sub" / "data.json"
    atomic_write_text(path, json.dumps({"a": 1}))
    atomic_write_text(path, json.dumps({"b": 2}))
    assert json.loads(path.read_text()) == {"b": 2}

    from trainrt.runner.atomic_files import atomic_write

    def explode(handle):
        handle.write(b"partial")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError, match="disk on fire"):
        atomic_write(path, explode)
    assert json.loads(path.read_text()) == {"b": 2}
    assert sorted(p.name for p in path.parent.iterdir()) == ["data.json"]


def _rank(rank, steps):
    return {
        "rank": rank,
        "device": "cpu",
        "seed": rank,
        "num_envs": 2,
        "completed_iterations": 2,
        "total_env_steps": steps,
        "training_wall_time_sec": 1.0,
        "tail_env_steps_per_sec": float(steps),
        "parameter_checksum": [1.0, 2.0],
    }


def test_a_multi_rank_summary_lists_every_rank_and_their_steps_add_up():
    timings = _timings([1.0, 1.0], env_steps=8)  # 4 env steps per rank and iteration, 2 ranks
    ok = RunSummary.model_validate(_summary_dict(timings, world_size=2, per_rank=[_rank(0, 8), _rank(1, 8)]))
    assert ok.world_size == 2 and [f.rank for f in ok.per_rank] == [0, 1]
    single = RunSummary.model_validate(_summary_dict(timings))
    assert single.world_size == 1 and single.per_rank == []
    with pytest.raises(ValidationError, match=r"ranks 0\.\.1"):
        RunSummary.model_validate(_summary_dict(timings, world_size=2, per_rank=[_rank(0, 16)]))
    with pytest.raises(ValidationError, match="sum of the ranks"):
        RunSummary.model_validate(_summary_dict(timings, world_size=2, per_rank=[_rank(0, 8), _rank(1, 4)]))


def test_a_running_summary_has_no_end_and_an_interrupted_one_names_the_signal():
    running = RunSummary.model_validate(_summary_dict(_timings([1.0]), status="running", finished_at=None))
    assert running.status == "running" and running.finished_at is None and running.warnings == []
    interrupted = RunSummary.model_validate(
        _summary_dict(
            _timings([1.0]),
            status="interrupted",
            error="interrupted by SIGTERM",
            signal="SIGTERM",
            warnings=["iteration 1: mujoco buffer overflow (contacts: 2 of 2 worlds); raise sim.nconmax=6"],
            run_id="0123456789ab",
        )
    )
    assert (interrupted.signal, interrupted.run_id) == ("SIGTERM", "0123456789ab")
    assert "sim.nconmax=6" in interrupted.warnings[0]


def _summary_copy_under(root):
    """A copy of summary.py at ``root/pkg/summary.py``, imported as its own module (its __file__ is the copy)."""
    import trainrt.runner.summary as original

    (root / "pkg").mkdir(parents=True)
    target = root / "pkg" / "summary.py"
    shutil.copy(original.__file__, target)
    spec = importlib.util.spec_from_file_location("summary_copy", target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _git(cwd, *args):
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_the_commit_is_the_checkouts_only_when_it_tracks_the_source(tmp_path, monkeypatch):
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty", "-m", "x")
    (tmp_path / ".gitignore").write_text("exported/\n")
    monkeypatch.delenv("TRAINRT_REPO_COMMIT", raising=False)
    # exported into an ignored folder of another checkout: that checkout's HEAD is not this code's commit
    exported = _summary_copy_under(tmp_path / "exported")
    assert exported.repo_commit() == ("unknown", None)
    monkeypatch.setenv("TRAINRT_REPO_COMMIT", "abc123")
    assert exported.repo_commit() == ("abc123", None)
    # tracked and committed: the checkout's HEAD, clean
    tracked = _summary_copy_under(tmp_path / "src")
    _git(tmp_path, "add", "src", ".gitignore")
    _git(tmp_path, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "-m", "add")
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True, text=True
    ).stdout.strip()
    assert tracked.repo_commit() == (head, False)
