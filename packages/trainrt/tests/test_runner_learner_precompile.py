"""The helper process that compiles the learner while a run builds its envs (trainrt.runner.learner_precompile)."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.replay.buffer import Batch
from trainrt.runner.build import build_replay
from trainrt.runner.learner_precompile import (
    LEARNER_MARKS,
    PRECOMPILE_ENV,
    LearnerPrecompile,
    helper_replay,
    learner_key,
    learner_marked,
    mark_learner,
    precompile_refusal,
)

OBS_DIMS = {"policy": 7, "critic": 11}


def _cfg(algo: str = "sac", *overrides: str):
    task = "g1_walk_flat" if algo == "sac" else "g1_motion_tracking"
    return apply_overrides(cpu_demo_preset(algo, task), list(overrides))


class _EnvSizes:
    """What ``build_replay`` reads of an env."""

    num_envs, obs_dims, num_actions, device = 4, OBS_DIMS, 3, torch.device("cpu")


def _metadata(batch: Batch) -> dict[str, object]:
    def describe(value: object) -> object:
        if isinstance(value, dict):
            return {k: describe(v) for k, v in value.items()}
        assert isinstance(value, torch.Tensor)
        return (tuple(value.shape), value.stride(), value.dtype, value.device.type, value.requires_grad)

    return {f.name: describe(getattr(batch, f.name)) for f in dataclasses.fields(Batch)}


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_the_helpers_replay_hands_the_learner_the_runs_batch_shapes(algo):
    """The learner's graphs are keyed by its inputs' shapes, strides and dtypes: the helper's small replay must
    give the batch a run's replay gives, or the run finds none of the helper's graphs in the cache."""
    cfg = _cfg(algo, "algo.params.batch_size=64")
    run, helper = build_replay(cfg, _EnvSizes()), helper_replay(cfg, OBS_DIMS, 3, "cpu")
    assert helper.num_envs == 1 and helper.capacity_per_env < run.capacity_per_env
    for replay in (run, helper):
        replay.freeze_view()
    generator = torch.Generator().manual_seed(0)
    run_batch, helper_batch = (r.sample(64, generator, from_view=True) for r in (run, helper))
    assert _metadata(helper_batch) == _metadata(run_batch)


def test_a_run_starts_no_helper_where_nothing_would_use_it():
    cfg, on = _cfg(), {PRECOMPILE_ENV: "1"}
    # auto (unset or "auto"): a helper unless inductor's cache holds this run's learner
    for auto in ({}, {PRECOMPILE_ENV: "auto"}, {PRECOMPILE_ENV: " AUTO "}):
        assert precompile_refusal(cfg, "cuda:0", 1, False, auto) is None
        assert precompile_refusal(cfg, "cuda:0", 1, True, auto) == (
            "inductor's cache holds this learner (an earlier run compiled the same algo settings and sizes on "
            f"this GPU model): the run loads it from there ({PRECOMPILE_ENV}=1 starts a helper anyway)"
        )
    assert precompile_refusal(cfg, "cuda:0", 1, True, on) is None  # 1: whatever the cache holds
    assert precompile_refusal(cfg, "cuda:0", 1, False, {PRECOMPILE_ENV: "0"}) == f"off ({PRECOMPILE_ENV}=0)"
    assert precompile_refusal(cfg, "cpu", 1, False, on) == "not a CUDA device"
    assert precompile_refusal(cfg, "cpu", 1, False, {}) == "not a CUDA device"
    assert precompile_refusal(cfg, "cuda:0", 2, False, on).startswith("a data-parallel run")
    uncompiled = _cfg("sac", "training.compile_learner=false")
    assert "training.compile_learner" in precompile_refusal(uncompiled, "cuda:0", 1, False, on)
    with pytest.raises(
        ValueError,
        match=rf"{PRECOMPILE_ENV}='maybe': set it to auto \(the default: a helper unless inductor's cache holds "
        r"this learner\), 1 \(always\) or 0 \(never\)",
    ):
        precompile_refusal(cfg, "cuda:0", 1, False, {PRECOMPILE_ENV: "maybe"})
    helper = LearnerPrecompile.start(cfg, OBS_DIMS, 3, "not a CUDA device")
    assert not helper.running and helper.wait() == {"skipped": "not a CUDA device"}


def test_a_learners_mark_is_keyed_by_what_decides_its_graphs(tmp_path):
    """The mark a run leaves once its learner compiled answers for that learner only: another algo setting,
    another observation or action size, another device kind is another key. A folder that cannot be written
    costs a helper, not the run."""
    cfg = _cfg()
    key = learner_key(cfg, OBS_DIMS, 3, "cpu")
    assert key == learner_key(_cfg(), dict(reversed(OBS_DIMS.items())), 3, "cpu")  # equal inputs, equal key
    assert key == learner_key(_cfg("sac", "algo.num_envs=64"), OBS_DIMS, 3, "cpu")  # sizes the replay only
    others = [
        learner_key(_cfg("sac", "algo.params.batch_size=64"), OBS_DIMS, 3, "cpu"),
        learner_key(_cfg("sac", "training.compile_learner=false"), OBS_DIMS, 3, "cpu"),
        learner_key(cfg, {**OBS_DIMS, "critic": 12}, 3, "cpu"),
        learner_key(cfg, OBS_DIMS, 4, "cpu"),
        learner_key(_cfg("flashsac"), OBS_DIMS, 3, "cpu"),
    ]
    assert len({key, *others}) == 1 + len(others)
    inductor = tmp_path / "inductor"
    assert not learner_marked(inductor, key) and not learner_marked(None, key)
    mark_learner(inductor, key, {"task": "g1_walk_flat"})
    assert learner_marked(inductor, key) and not any(learner_marked(inductor, other) for other in others)
    assert json.loads((inductor / LEARNER_MARKS / f"{key}.json").read_text()) == {"task": "g1_walk_flat"}
    assert [p.name for p in (inductor / LEARNER_MARKS).iterdir()] == [f"{key}.json"]  # no scratch file left
    blocked = tmp_path / "a_file"
    blocked.write_text("not a folder")
    mark_learner(blocked, key, {})  # nothing raised, nothing marked
    assert not learner_marked(blocked, key) and blocked.read_text() == "not a folder"


def _launch(spec: dict) -> LearnerPrecompile:
    """A helper started without the refusal check (so it runs on the CPU, where the learner compiles nothing)."""
    return LearnerPrecompile.launch(json.dumps(spec), {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})


@pytest.mark.slow
def test_the_helper_process_runs_to_its_end_and_reports_its_time_or_its_error():
    """The helper's process: the spec on its input, its exit, its seconds, the tail of its output as the error.
    On the CPU the learner compiles and captures nothing, so this checks the process, not the compile (the GPU
    test below does that)."""
    cfg = _cfg()
    helper = _launch({"config": cfg.model_dump(mode="json"), "obs_dims": OBS_DIMS, "num_actions": 3})
    assert helper.running
    note, record = helper.wait_note(), helper.record  # the console's line on what it did
    assert set(record) == {"seconds", "waited_sec", "steps_sec"}, record
    assert 0 < record["waited_sec"] <= record["seconds"]
    steps = record["steps_sec"]  # where the helper's time went, from its launch
    assert list(steps) == ["start", "config", "imports", "agent", "learner"], steps
    assert all(value >= 0 for value in steps.values()) and sum(steps.values()) <= record["seconds"] + 0.1
    assert not helper.running and helper.wait() is record
    seconds, waited = record["seconds"], record["waited_sec"]
    assert note == f"the learner helper done after {seconds:.1f}s, waited for it {waited:.1f}s"

    broken = cfg.model_dump(mode="json")
    broken["algo"]["params"]["batch_size"] = -1
    helper = _launch({"config": broken, "obs_dims": OBS_DIMS, "num_actions": 3})
    note, record = helper.wait_note(), helper.record
    assert "batch_size" in record["error"], record
    assert note.startswith(f"the learner helper failed ({record['error'].splitlines()[-1]}) after"), note


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_after_the_helper_the_run_compiles_its_learner_from_the_cache(tmp_path):
    """From empty compiler caches, the helper compiles the learner; a run's learner warm-up in another process
    (its own replay, of another size) then finds every learner graph in the cache: its only inductor compile is
    its replay's sampling, whose graph holds the replay's size."""
    script = f"""
import json, torch
from torch._dynamo.utils import counters
from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.runner.build import build_agent, build_replay
from trainrt.runner.learner_precompile import LearnerPrecompile
from trainrt.runner.warm_up import capture_learner
cfg = apply_overrides(cpu_demo_preset("sac", "g1_walk_flat", "mjwarp"), ["sim.device=cuda", "algo.num_envs=64"])
obs_dims, actions = {OBS_DIMS!r}, 3
record = LearnerPrecompile.start(cfg, obs_dims, actions, None).wait()
class Sizes:
    num_envs, obs_dims, num_actions, device = 64, obs_dims, actions, torch.device("cuda")
replay = build_replay(cfg, Sizes())
replay.compile_sample()
replay.freeze_view()
replay.sample(cfg.algo.params.batch_size, torch.Generator("cuda").manual_seed(0), from_view=True)
sampling = dict(counters["inductor"])
agent = build_agent(cfg, obs_dims, actions, "cuda")
capture_learner(cfg, agent, replay)
learner = {{k: v - sampling.get(k, 0) for k, v in counters["inductor"].items()}}
print(json.dumps({{"record": record, "sampling": sampling, "learner": learner, "compiled": agent.compile_enabled,
                  "graph": agent.update_graph_enabled}}))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    env.update(TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"), TRITON_CACHE_DIR=str(tmp_path / "triton"))
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=900, check=False,
        cwd=str(Path(__file__).parent),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    out = json.loads(result.stdout.splitlines()[-1])
    assert set(out["record"]) == {"seconds", "waited_sec", "steps_sec"}, out["record"]
    assert out["sampling"].get("fxgraph_cache_miss", 0) >= 1, out["sampling"]  # the test can see a compile
    assert out["compiled"] and out["graph"]
    assert out["learner"].get("fxgraph_cache_hit", 0) >= 2, out["learner"]
    assert out["learner"].get("fxgraph_cache_miss", 0) == 0, out["learner"]


def test_a_bad_setting_is_refused_before_the_run_writes_anything(tmp_path, monkeypatch):
    from test_runner_train import tiny_config

    from trainrt.runner import OffPolicyRunner

    monkeypatch.setenv(PRECOMPILE_ENV, "maybe")
    with pytest.raises(ValueError, match=PRECOMPILE_ENV):
        OffPolicyRunner(tiny_config(tmp_path / "run"), log=lambda line: None)
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("setting", "skipped"), [("0", f"off ({PRECOMPILE_ENV}=0)"), (None, "not a CUDA device")]
)
def test_the_run_summary_says_why_no_helper_ran(tmp_path, monkeypatch, setting, skipped):
    from test_runner_train import tiny_config

    from trainrt.runner import OffPolicyRunner, load_run_summary

    if setting is None:
        monkeypatch.delenv(PRECOMPILE_ENV, raising=False)
    else:
        monkeypatch.setenv(PRECOMPILE_ENV, setting)
    OffPolicyRunner(tiny_config(tmp_path / "run"), log=lambda line: None).run()
    assert load_run_summary(tmp_path / "run").learner_precompile == {"skipped": skipped}


@pytest.mark.slow
def test_a_helper_still_running_when_the_build_fails_is_stopped():
    cfg = _cfg()
    helper = _launch({"config": cfg.model_dump(mode="json"), "obs_dims": OBS_DIMS, "num_actions": 3})
    helper.stop()  # at once: the helper is still importing
    assert helper.record == {"skipped": "the run ended before its learner phase"} and not helper.running
    assert helper._process.returncode is not None and helper._process.returncode < 0  # killed, not finished
    assert helper.wait() is helper.record


def test_the_helper_leaves_room_only_with_headroom_past_what_the_run_still_allocates():
    from trainrt.runner.learner_precompile import HEADROOM_BYTES
    from trainrt.runner.preflight import MemoryEstimate

    gib = 2**30
    estimate = MemoryEstimate(
        replay=20 * gib, networks=gib, update_batch=2 * gib, env_state=3 * gib, motion_clips=0, runtime=gib
    )
    still_allocated = 23 * gib  # replay, update batch, runtime: the env's state and networks exist already
    assert LearnerPrecompile.room_beside(estimate, still_allocated + HEADROOM_BYTES)
    assert not LearnerPrecompile.room_beside(estimate, still_allocated + HEADROOM_BYTES - 1)
    assert not LearnerPrecompile.room_beside(None, 80 * gib)  # no estimate: wait first
    assert not LearnerPrecompile.room_beside(estimate, None)  # free memory unknown: wait first


def _run_with_helper(tmp_path, monkeypatch, room: bool) -> tuple[list[str], object]:
    """A tiny CPU run whose learner helper is started (on the CPU it compiles nothing, but it runs), with or
    without room beside it for the replay; the run's console lines and summary."""
    from test_runner_train import tiny_config

    import trainrt.runner.off_policy_runner as runner_module
    from trainrt.runner import OffPolicyRunner, load_run_summary

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    monkeypatch.setattr(runner_module, "precompile_refusal", lambda *args: None)
    monkeypatch.setattr(LearnerPrecompile, "room_beside", staticmethod(lambda estimate, free: room))
    lines: list[str] = []
    OffPolicyRunner(tiny_config(tmp_path / "run"), log=lines.append).run()
    return lines, load_run_summary(tmp_path / "run")


def _index(lines: list[str], start: str) -> int:
    return next(i for i, line in enumerate(lines) if line.startswith(start))


@pytest.mark.slow
def test_with_room_beside_it_the_run_waits_for_its_helper_right_before_the_learner_phase(
    tmp_path, monkeypatch
):
    lines, summary = _run_with_helper(tmp_path, monkeypatch, room=True)
    assert summary.status == "completed"
    record = summary.learner_precompile
    assert set(record) == {"seconds", "waited_sec", "steps_sec"}, record
    phases = list(summary.warmup_phases_sec)
    assert phases.index("collector_capture") + 1 == phases.index("learner_helper_wait")
    assert phases.index("learner_helper_wait") + 1 == phases.index("learner_capture")
    started = _index(lines, "set-up: a helper process compiles the learner update")
    waits = _index(lines, "warm-up: waiting for the learner helper")
    done = _index(lines, "warm-up: the learner helper done after")
    assert (
        started < _index(lines, "replay: ") < _index(lines, "warm-up: capturing the collector") < waits < done
    )
    assert done < _index(lines, "warm-up: capturing the learner update")


@pytest.mark.slow
def test_without_room_beside_it_the_run_waits_for_its_helper_before_allocating_its_replay(
    tmp_path, monkeypatch
):
    lines, summary = _run_with_helper(tmp_path, monkeypatch, room=False)
    assert summary.status == "completed" and set(summary.learner_precompile) == {
        "seconds",
        "waited_sec",
        "steps_sec",
    }
    assert "learner_helper_wait" not in summary.warmup_phases_sec
    assert _index(lines, "set-up: the learner helper done after") < _index(lines, "replay: ")
    assert not any(line.startswith("warm-up: waiting for the learner helper") for line in lines)


@pytest.mark.slow
def test_a_helper_still_running_when_warm_up_fails_is_stopped(tmp_path, monkeypatch):
    from trainrt.runner.collector import Collector

    def broken(self):
        raise RuntimeError("no capture here")

    monkeypatch.setattr(Collector, "capture", broken)
    with pytest.raises(RuntimeError, match="no capture here"):
        _run_with_helper(tmp_path, monkeypatch, room=True)
    from trainrt.runner import load_run_summary

    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "failed"
    assert summary.learner_precompile == {"skipped": "the run ended before its learner phase"}


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_run_whose_learner_compiled_marks_it_and_the_next_run_of_it_starts_no_helper(tmp_path, monkeypatch):
    """A CUDA run on an inductor cache without its learner starts the helper and, its learner compiled, leaves
    the mark; the same run again finds the mark and starts none; the same task with another batch size is
    another learner and gets its helper."""
    from test_runner_train import tiny_config

    from trainrt.runner import OffPolicyRunner, load_run_summary

    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(sys.path))
    monkeypatch.delenv(PRECOMPILE_ENV, raising=False)
    inductor = tmp_path / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(inductor))
    cuda = ["sim.backend=mjwarp", "sim.device=cuda", "algo.num_envs=16"]

    def run(name: str, *extra: str) -> dict:
        OffPolicyRunner(
            tiny_config(tmp_path / name, "sac", "g1_walk_flat", *cuda, *extra), log=lambda line: None
        ).run()
        return load_run_summary(tmp_path / name).learner_precompile

    first = run("first")
    assert set(first) == {"seconds", "waited_sec", "steps_sec"}, first  # the helper ran
    marks = sorted((inductor / LEARNER_MARKS).glob("*.json"))
    assert len(marks) == 1 and json.loads(marks[0].read_text())["task"] == "g1_walk_flat"
    assert run("again") == {
        "skipped": "inductor's cache holds this learner (an earlier run compiled the same algo settings and "
        f"sizes on this GPU model): the run loads it from there ({PRECOMPILE_ENV}=1 starts a helper anyway)"
    }
    other = run("other", "algo.params.batch_size=32")
    assert set(other) == {"seconds", "waited_sec", "steps_sec"}, other
    assert len(list((inductor / LEARNER_MARKS).glob("*.json"))) == 2


def test_the_helpers_steps_are_read_from_its_last_line_or_left_out():
    """The helper's last line is data: its steps' seconds, timed from its launch; a missing or garbled line
    leaves them out of the record instead of failing the run that waited for a helper that did its work."""
    from trainrt.runner.learner_precompile import STEPS_LINE, _helper_steps

    line = STEPS_LINE + json.dumps({"entered_at": 103.5, "config": 0.2, "imports": 4.0})
    assert _helper_steps(f"compiling\n{line}", launched_at=100.0) == {
        "start": 3.5,
        "config": 0.2,
        "imports": 4.0,
    }
    for output in ("", "compiling", STEPS_LINE + "{not json", STEPS_LINE + json.dumps({"imports": 4.0})):
        assert _helper_steps(output, launched_at=100.0) is None, output
