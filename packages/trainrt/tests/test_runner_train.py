"""End to end on the CPU: a tiny training run writes a valid summary and checkpoints, resumes, and records
interruptions and failures (mujoco backend, 2 envs, tiny networks)."""

import io
import json
import os
import shutil
import signal

import numpy as np
import pytest
import torch
from tiny_runs import TINY_RUN

from trainrt.config import TrainConfig, apply_overrides, cpu_demo_preset
from trainrt.runner import OffPolicyRunner, checkpointing, load_run_summary, stop_signals, summary_writer
from trainrt.runner.checkpoint import checkpoint_path, checkpoints_newest_first, load_checkpoint
from trainrt.runner.collector import Collector
from trainrt.runner.manifest import load_resolved_config
from trainrt.runner.off_policy_runner import RunInterrupted
from trainrt.runner.summary import TailThroughput

TINY = [*TINY_RUN, "training.play_steps=3"]


def tiny_config(run_dir, algo="sac", task="g1_walk_flat", *extra) -> TrainConfig:
    """A seconds-long run on the CPU MuJoCo backend."""
    networks = (
        ["algo.params.actor_hidden_dim=8", "algo.params.critic_hidden_dim=8"]
        if algo == "sac"
        else [
            "algo.params.actor_hidden_dim=8",
            "algo.params.critic_hidden_dim=8",
            "algo.params.actor_num_blocks=1",
            "algo.params.critic_num_blocks=1",
        ]
    )
    return apply_overrides(
        cpu_demo_preset(algo, task, "mujoco"), [*TINY, *networks, f"training.run_dir={run_dir}", *extra]
    )


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """One completed 2-iteration SAC run; tests copy it before changing it."""
    run_dir = tmp_path_factory.mktemp("run") / "sac"
    lines: list[str] = []
    summary = OffPolicyRunner(tiny_config(run_dir), log=lines.append).run()
    return run_dir, summary, lines


def test_a_tiny_run_writes_a_valid_summary_and_checkpoints(trained_run):
    run_dir, summary, _ = trained_run
    loaded = load_run_summary(run_dir)
    assert loaded == summary
    assert loaded.status == "completed" and loaded.error is None
    assert loaded.completed_iterations == 2
    assert [it.iteration for it in loaded.iterations] == [1, 2]
    assert loaded.total_env_steps == 2 * 2 * 2  # iterations * steps_per_iteration * num_envs
    assert loaded.tail_iteration_count == 2
    assert loaded.tail_env_steps_per_sec > 0
    # warm-up (prefill of learning_starts vector steps) is counted apart from the iterations
    assert loaded.warmup_env_steps >= 2 * 2
    assert loaded.warmup_time_sec > 0
    assert loaded.startup_sec is not None and loaded.startup_sec > 0  # this process's life before the run
    assert loaded.collector_graph["graph_enabled"] is False
    assert loaded.collector_graph["eager_fallback_reason"] == "cpu device"
    assert loaded.collector_graph["step_math_compiled"] is False
    assert loaded.collector_graph["step_math_fallback_reason"] == "cpu device"
    assert loaded.learner_graph["update_graph_enabled"] is False
    assert loaded.backend_diagnostics["backend"] == "mujoco"
    assert loaded.final_eval is not None and loaded.final_eval["num_steps"] == 3
    assert loaded.onnx_path is not None
    assert set(loaded.versions) >= {"torch", "warp-lang", "mujoco", "mujoco-warp"}
    assert torch.__version__.startswith(loaded.versions["torch"])
    for iteration in (1, 2):
        assert checkpoint_path(run_dir, iteration).is_file()
    assert loaded.checkpoint_path == str(checkpoint_path(run_dir, 2))


def test_the_warm_up_line_says_how_long_since_the_command_started(trained_run):
    """The process's age comes from the system's own record of its start: a process that slept a second
    before asking is at least that old, and not minutes older; the warm-up's console line adds it to the
    warm-up's seconds (the time from the command to iteration 1)."""
    import subprocess
    import sys

    script = (
        "import time; time.sleep(1.0); from trainrt.runner.warm_up import process_age_sec as a; print(a())"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    assert 1.0 <= float(out.stdout) < 60.0
    _, summary, lines = trained_run
    line = next(line for line in lines if line.startswith("warm-up done in"))
    assert f"; {summary.startup_sec + summary.warmup_time_sec:.1f}s since the command started)" in line


def test_the_resolved_config_is_in_the_run_directory(trained_run):
    run_dir, _, _ = trained_run
    assert load_resolved_config(run_dir) == tiny_config(run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["device"] == "cpu"


def test_console_blocks_and_output_locations_are_logged(trained_run):
    run_dir, _, lines = trained_run
    text = "\n".join(lines)
    assert "iteration 1/2" in text and "iteration 2/2" in text
    assert "env steps/s" in text and "collect" in text
    # the compact block: one row per concern, losses by name, counts as integers
    assert "\nlosses     critic_loss " in text and "\nepisodes   0 finished" in text
    assert "\ntime       " in text and "8 env steps" in text
    assert "Loss/critic_loss" not in text and "0.0000" not in text
    assert f"run directory: {run_dir.resolve()}" in text
    assert "run_summary.json" in text and "ckpt_000002.pt" in text


def test_a_relative_run_directory_is_announced_with_absolute_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    lines: list[str] = []
    OffPolicyRunner(
        tiny_config("runs/relative", "sac", "g1_walk_flat", "training.final_eval=false"), log=lines.append
    ).run()
    announced = {
        line.split(":", 1)[0].strip(): line.split(":", 1)[1].strip()
        for line in "\n".join(lines).splitlines()
        if line.startswith("  ") and ":" in line
    }
    run_dir = (tmp_path / "runs" / "relative").resolve()
    assert announced["run directory"] == str(run_dir)
    assert announced["onnx policy"] == str(run_dir / "policy.onnx")
    assert announced["checkpoints"] == str(checkpoint_path(run_dir, 2))


def test_tensorboard_scalars_use_the_tag_groups(trained_run):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    run_dir, _, _ = trained_run
    accumulator = event_accumulator.EventAccumulator(str(run_dir / "tensorboard"))
    accumulator.Reload()
    tags = accumulator.Tags()["scalars"]
    for group in ("Loss/", "Perf/", "Train/", "Episode/"):
        assert any(tag.startswith(group) for tag in tags), (group, tags)
    assert [event.step for event in accumulator.Scalars("Perf/env_steps_per_sec")] == [1, 2]


def test_checkpoint_holds_what_resume_and_export_need(trained_run):
    run_dir, _, _ = trained_run
    data = load_checkpoint(run_dir)
    assert data["iteration"] == 2
    assert {"actor", "critic", "actor_optimizer", "critic_optimizer", "actor_obs_normalizer"} <= set(
        data["agent"]
    )
    assert "env" in data["rng"] and "torch_cpu" in data["rng"]
    assert len(data["timings"]) == 2
    assert data["env_meta"]["num_actions"] == 29
    assert "policy" in data["env_meta"]["observation_terms"]


def test_resume_continues_the_iteration_count(trained_run, tmp_path):
    run_dir, first, _ = trained_run
    copy = tmp_path / "resumed"
    shutil.copytree(run_dir, copy)
    cfg = tiny_config(copy, "sac", "g1_walk_flat", "algo.max_iterations=3", f"training.resume={copy}")
    summary = OffPolicyRunner(cfg, log=lambda line: None).run()
    assert summary.status == "completed"
    assert summary.resumed_from_iteration == 2
    assert summary.completed_iterations == 3
    assert [it.iteration for it in summary.iterations] == [1, 2, 3]
    # the first two iterations' timings are carried over from the checkpoint; the checkpoint was written
    # during iteration 2, so its copy of iteration 2's wall time stops short of the write itself
    assert summary.iterations[0] == first.iterations[0]
    carried, original = summary.iterations[1], first.iterations[1]
    re_timed = {"wall_time_sec", "elapsed_sec"}
    assert carried.model_dump(exclude=re_timed) == original.model_dump(exclude=re_timed)
    assert carried.elapsed_sec <= original.elapsed_sec
    assert carried.wall_time_sec <= original.wall_time_sec
    assert load_checkpoint(copy)["iteration"] == 3


def test_resume_refuses_a_finished_run_or_another_algorithm_before_starting(trained_run, tmp_path):
    run_dir, _, _ = trained_run
    copy = tmp_path / "again"
    shutil.copytree(run_dir, copy)
    with pytest.raises(ValueError, match=r"raise algo.max_iterations"):
        OffPolicyRunner(tiny_config(copy, "sac", "g1_walk_flat", f"training.resume={copy}"))
    cfg = tiny_config(copy, "flashsac", "g1_walk_flat", f"training.resume={copy}", "algo.max_iterations=5")
    with pytest.raises(ValueError, match="it trained algo 'sac'"):
        OffPolicyRunner(cfg)
    # the refused attempts did not touch the run they pointed at
    assert load_run_summary(copy).status == "completed"
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        OffPolicyRunner(tiny_config(tmp_path / "new", "sac", "g1_walk_flat", f"training.resume={tmp_path}"))


def test_resume_refuses_other_network_sizes_before_anything_is_written(trained_run, tmp_path):
    run_dir, _, _ = trained_run
    copy = tmp_path / "resized"
    shutil.copytree(run_dir, copy)
    before = {path.name: path.read_bytes() for path in copy.iterdir() if path.is_file()}
    cfg = tiny_config(
        copy, "sac", "g1_walk_flat", f"training.resume={copy}", "algo.max_iterations=3",
        "algo.params.actor_hidden_dim=16",
    )  # fmt: skip
    with pytest.raises(
        ValueError,
        match=r"ckpt_000002.pt: its weights do not fit the networks this config builds \(RuntimeError: .*size "
        r"mismatch.*\); algo.params that differ from the run's: actor_hidden_dim=16 \(the run used 8\); drop "
        r"those overrides to resume",
    ):
        OffPolicyRunner(cfg, log=lambda line: None)
    assert {path.name: path.read_bytes() for path in copy.iterdir() if path.is_file()} == before
    cfg = tiny_config(
        copy, "sac", "g1_walk_flat", f"training.resume={copy}", "algo.max_iterations=3",
        "task.observations.policy.base_ang_vel.history_length=2",
    )  # fmt: skip
    with pytest.raises(
        ValueError,
        match=r"size mismatch.*; algo.params that differ from the run's: none; observation widths \{'policy': "
        r"(\d+), .*\} differ from the run's \{'policy': (?!\1)\d+, .*task.observations.*; drop those overrides",
    ):
        OffPolicyRunner(cfg, log=lambda line: None)
    assert {path.name: path.read_bytes() for path in copy.iterdir() if path.is_file()} == before


def _nan_motion(path):
    from g1_assets import g1_clip_or_skip

    from trainrt.motion import read_motion_arrays

    arrays = read_motion_arrays(g1_clip_or_skip())
    arrays["joint_pos"][3, 2] = float("nan")
    np.savez(path, **arrays)


@pytest.mark.parametrize(
    ("algo", "task", "override", "make", "message"),
    [
        (
            "sac", "g1_walk_flat", "algo.params.actor_obs_group=bogus", None,
            r"^actor_obs_group='bogus' is not an observation group; .* \(change algo.params.actor_obs_group\)$",
        ),
        (
            "flashsac", "g1_motion_tracking", "task.motion_file={path}", _nan_motion,
            r"^motion field 'joint_pos' has NaN .* \(change task.motion_file, now .*clip.npz\)$",
        ),
        (
            "flashsac", "g1_motion_tracking", "task.motion_file={path}", lambda path: path.write_text("fps\n"),
            r"clip.npz is not a readable .npz motion file: it is a text file",
        ),
    ],
    ids=["observation-group", "nan-motion", "text-motion"],
)  # fmt: skip
def test_input_the_env_or_agent_cannot_use_is_refused_before_anything_is_written(
    tmp_path, algo, task, override, make, message
):
    path = tmp_path / "clip.npz"
    if make is not None:
        make(path)
    cfg = tiny_config(tmp_path / "run", algo, task, override.format(path=path))
    with pytest.raises(ValueError, match=message):
        OffPolicyRunner(cfg, log=lambda line: None)
    assert not (tmp_path / "run").exists()  # the corrected command can use the directory


@pytest.mark.slow
def test_the_probe_of_the_config_does_not_change_what_a_run_does(tmp_path, monkeypatch):
    """The probe's env and agent draw on their own generators, not on the ones training uses."""
    probed_run = OffPolicyRunner(tiny_config(tmp_path / "probed"), log=lambda line: None)
    probed_run.run()
    sizes = probed_run._probed_sizes  # what the probe found, handed to the unprobed run's set-up
    monkeypatch.setattr(OffPolicyRunner, "_probe_config", lambda self, checkpoint: sizes)
    OffPolicyRunner(tiny_config(tmp_path / "unprobed"), log=lambda line: None).run()
    probed, unprobed = load_checkpoint(tmp_path / "probed"), load_checkpoint(tmp_path / "unprobed")
    # weights, optimizer states and generators of the agent, the env's and torch's generators
    first, second = ({**_tensors(c["agent"]), **_tensors(c["rng"], "rng")} for c in (probed, unprobed))
    assert first.keys() == second.keys() and len(first) > 100
    for name, tensor in first.items():
        assert torch.equal(tensor, second[name]), name


def _tensors(state, prefix=""):
    """The tensors of a nested state dict by their dotted path."""
    if isinstance(state, torch.Tensor):
        return {prefix: state}
    items = state.items() if isinstance(state, dict) else enumerate(state) if isinstance(state, list) else ()
    return {k: v for key, value in items for k, v in _tensors(value, f"{prefix}.{key}").items()}


def test_resume_play_and_eval_refuse_a_checkpoint_whose_actions_mean_other_targets(trained_run, tmp_path):
    """A task whose action bounds changed since the checkpoint (adr/0014) is refused before anything runs."""
    from trainrt.runner.evaluate import evaluate_run
    from trainrt.runner.play import load_run_policy

    run_dir, _, _ = trained_run
    copy = tmp_path / "rescaled"
    shutil.copytree(run_dir, copy)
    state = load_checkpoint(copy)
    path = checkpoint_path(copy, int(state["iteration"]))
    meta = state["env_meta"]["action_meta"]
    meta["action_scale"] = [2.0 * s for s in meta["action_scale"]]  # as if trained with other bounds
    torch.save(state, path)
    before = (copy / "run_summary.json").read_text(), (copy / "config.json").read_text()
    cfg = tiny_config(copy, "sac", "g1_walk_flat", f"training.resume={copy}", "algo.max_iterations=5")
    with pytest.raises(ValueError, match=r"another action mapping .*left_hip_pitch_joint: .* rad per unit"):
        OffPolicyRunner(cfg, log=lambda line: None)
    with pytest.raises(ValueError, match="another action mapping"):
        load_run_policy(copy, num_envs=1)
    with pytest.raises(ValueError, match="another action mapping"):
        evaluate_run(copy, num_envs=1, steps=2)
    # nothing of the run was touched
    assert ((copy / "run_summary.json").read_text(), (copy / "config.json").read_text()) == before
    # the way out the error names: resume with the scales the checkpoint was trained with
    scales = dict(zip(meta["joint_names"], meta["action_scale"]))
    same = tiny_config(
        copy, "sac", "g1_walk_flat", f"training.resume={copy}", "algo.max_iterations=3",
        f"task.actions.joint_pos.params.scale={json.dumps(scales)}",
    )  # fmt: skip
    summary = OffPolicyRunner(same, log=lambda line: None).run()
    assert summary.status == "completed" and summary.resumed_from_iteration == 2


@pytest.mark.parametrize(("decay", "horizon"), [(None, 2 * 1), (7, 7)])
def test_the_learning_rate_decays_over_the_configured_updates_or_else_the_run(tmp_path, decay, horizon):
    """``lr_decay_updates`` sets the cosine's horizon; unset, it spans the run (max_iterations * updates)."""
    extra = ["algo.params.lr_schedule=warmup_cosine", "algo.params.lr_final_ratio=0.5"]
    if decay is not None:
        extra.append(f"algo.params.lr_decay_updates={decay}")
    runner = OffPolicyRunner(
        tiny_config(tmp_path / "run", "sac", "g1_walk_flat", *extra), log=lambda line: None
    )
    runner.run()
    assert runner.agent._lr_schedule.horizon_updates == horizon


def test_check_action_mapping_names_what_differs():
    from types import SimpleNamespace

    from trainrt.runner.checkpoint import check_action_mapping

    env = SimpleNamespace(action_meta=lambda: {"joint_names": ["a", "b"], "action_scale": [1.0, 0.5]})

    def state(**meta):
        return {"path": "ckpt_000003.pt", "env_meta": {"action_meta": meta}}

    check_action_mapping(state(joint_names=["a", "b"], action_scale=[1.0, 0.5 + 1e-7]), env)
    check_action_mapping({"path": "old.pt"}, env)  # no action metadata: nothing to compare
    with pytest.raises(ValueError, match=r"ckpt_000003.pt .*\(b: 0.25 rad per unit action there, 0.5 here\)"):
        check_action_mapping(state(joint_names=["a", "b"], action_scale=[1.0, 0.25]), env)
    with pytest.raises(ValueError, match="other joints or another joint order"):
        check_action_mapping(state(joint_names=["b", "a"], action_scale=[0.5, 1.0]), env)
    with pytest.raises(ValueError, match="3 action columns, this env has 2"):
        check_action_mapping(state(action_scale=[1.0, 0.5, 0.5]), env)


def test_ctrl_c_saves_a_checkpoint_and_an_interrupted_summary(tmp_path, monkeypatch):
    real_collect = Collector.collect
    calls = []

    def collect_then_interrupt(self, num_steps):
        calls.append(num_steps)
        if len(calls) == 2:  # during iteration 2
            raise KeyboardInterrupt
        real_collect(self, num_steps)

    monkeypatch.setattr(Collector, "collect", collect_then_interrupt)
    cfg = tiny_config(
        tmp_path / "run", "sac", "g1_walk_flat", "algo.max_iterations=3", "training.checkpoint_every=0"
    )
    with pytest.raises(KeyboardInterrupt):
        OffPolicyRunner(cfg, log=lambda line: None).run()
    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "interrupted"
    assert summary.completed_iterations == 1
    assert load_checkpoint(tmp_path / "run")["iteration"] == 1


def test_a_stop_before_the_first_iteration_ends_says_there_is_nothing_to_save(tmp_path, monkeypatch):
    def interrupted_warm_up(self):
        raise KeyboardInterrupt

    monkeypatch.setattr(OffPolicyRunner, "_warm_up", interrupted_warm_up)
    lines = []
    cfg = tiny_config(tmp_path / "run", "sac", "g1_walk_flat", "algo.max_iterations=3")
    with pytest.raises(KeyboardInterrupt):
        OffPolicyRunner(cfg, log=lines.append).run()
    assert load_run_summary(tmp_path / "run").status == "interrupted"
    assert not any("saving a checkpoint" in line for line in lines), lines
    assert any("there is no checkpoint to save" in line for line in lines), lines
    assert checkpoints_newest_first(tmp_path / "run") == []


def _signal_during_iteration_2(monkeypatch, *signals):
    """Collector.collect sends ``signals`` to this process in the middle of iteration 2."""
    real_collect = Collector.collect
    calls = []

    def collect_and_signal(self, num_steps):
        calls.append(num_steps)
        real_collect(self, num_steps)
        if len(calls) == 2:
            for sig in signals:
                os.kill(os.getpid(), sig)

    monkeypatch.setattr(Collector, "collect", collect_and_signal)


@pytest.mark.parametrize(
    ("sig", "raised"),
    [(signal.SIGTERM, RunInterrupted), (signal.SIGHUP, RunInterrupted), (signal.SIGINT, KeyboardInterrupt)],
    ids=["TERM", "HUP", "INT"],
)
def test_a_signal_inside_an_iteration_stops_the_run_at_that_iterations_end(
    tmp_path, monkeypatch, sig, raised
):
    _signal_during_iteration_2(monkeypatch, sig)
    cfg = tiny_config(
        tmp_path / "run", "sac", "g1_walk_flat", "algo.max_iterations=4", "training.checkpoint_every=0"
    )
    runner = OffPolicyRunner(cfg, log=lambda line: None)
    before = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)}
    with pytest.raises(raised):
        runner.run()
    summary = load_run_summary(tmp_path / "run")
    # iteration 2 ran to its end (learner and bookkeeping included), then the run stopped and saved it
    assert summary.status == "interrupted" and summary.completed_iterations == 2
    assert summary.signal == sig.name
    assert load_checkpoint(tmp_path / "run")["iteration"] == 2
    assert runner.agent.num_updates == (2 + 1) * cfg.algo.params.updates_per_iteration  # + warm-up updates
    assert {s: signal.getsignal(s) for s in before} == before  # the run's handlers are gone again


def test_one_ctrl_c_delivered_twice_counts_once(tmp_path, monkeypatch):
    """A launcher forwarding SIGINT to its process group (``uv run``) delivers one keypress twice."""
    _signal_during_iteration_2(monkeypatch, signal.SIGINT, signal.SIGINT)
    cfg = tiny_config(
        tmp_path / "run", "sac", "g1_walk_flat", "algo.max_iterations=4", "training.checkpoint_every=0"
    )
    with pytest.raises(KeyboardInterrupt):
        OffPolicyRunner(cfg, log=lambda line: None).run()
    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "interrupted" and summary.completed_iterations == 2  # iteration 2 ended
    assert load_checkpoint(tmp_path / "run")["iteration"] == 2


def test_a_second_ctrl_c_stops_at_once(tmp_path, monkeypatch):
    monkeypatch.setattr(stop_signals, "SAME_CTRL_C_SEC", 0.0)  # a person's second press, not a duplicate
    _signal_during_iteration_2(monkeypatch, signal.SIGINT, signal.SIGINT)
    cfg = tiny_config(
        tmp_path / "run", "sac", "g1_walk_flat", "algo.max_iterations=4", "training.checkpoint_every=0"
    )
    with pytest.raises(KeyboardInterrupt):
        OffPolicyRunner(cfg, log=lambda line: None).run()
    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "interrupted" and summary.completed_iterations == 1  # iteration 2 never ended
    # The live state holds part of iteration 2 (its rows, its draws): it is no checkpoint of iteration 1.
    assert checkpoints_newest_first(tmp_path / "run") == []
    assert "stopped iteration 2 half done, so no checkpoint was saved (the newest is none)" in summary.error


def test_a_ctrl_c_after_a_sigterm_stops_at_once_for_the_sigterm(tmp_path, monkeypatch):
    """The SIGTERM came first: the summary names it and the exit code is its own (143), not Ctrl-C's (130)."""
    _signal_during_iteration_2(monkeypatch, signal.SIGTERM, signal.SIGINT)
    cfg = tiny_config(
        tmp_path / "run", "sac", "g1_walk_flat", "algo.max_iterations=4", "training.checkpoint_every=0"
    )
    with pytest.raises(RunInterrupted) as raised:
        OffPolicyRunner(cfg, log=lambda line: None).run()
    assert raised.value.exit_code == 128 + signal.SIGTERM
    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "interrupted" and summary.signal == "SIGTERM"
    assert summary.completed_iterations == 1 and checkpoints_newest_first(tmp_path / "run") == []
    assert summary.error == (
        "interrupted by SIGTERM, then Ctrl-C; a Ctrl-C after the SIGTERM stopped iteration 2 half done, so no "
        "checkpoint was saved (the newest is none)"
    )


class _CtrlCMidWrite(io.BytesIO):
    """A file whose second write a Ctrl-C interrupts: torch.save reports that as a RuntimeError."""

    def write(self, data):
        if self.tell() > 0:
            raise KeyboardInterrupt
        return super().write(data)


def _save_then_stop(second):
    """A checkpoint save that a second Ctrl-C (or a full disk) stops, as ``second`` says."""

    def save(run_dir, iteration, payload):
        if second == "ctrl_c":
            raise KeyboardInterrupt
        if second == "ctrl_c_in_torch_save":
            torch.save(payload, _CtrlCMidWrite())
        raise OSError(28, "No space left on device")

    return save


@pytest.mark.parametrize(
    ("first", "second", "why"),
    [
        (KeyboardInterrupt, "ctrl_c", "a second Ctrl-C stopped its write"),
        (KeyboardInterrupt, "ctrl_c_in_torch_save", "a second Ctrl-C stopped its write"),
        (RunInterrupted, "ctrl_c_in_torch_save", "a second Ctrl-C stopped its write"),
        (KeyboardInterrupt, "disk_full", "OSError: [Errno 28] No space left on device"),
    ],
)
def test_a_save_stopped_during_an_interrupt_still_leaves_the_interrupted_summary(
    tmp_path, monkeypatch, first, second, why
):
    real_collect = Collector.collect
    calls = []

    def collect_then_stop(self, num_steps):
        calls.append(num_steps)
        if len(calls) == 2:  # during iteration 2
            raise first(signal.SIGTERM) if first is RunInterrupted else first()
        real_collect(self, num_steps)

    monkeypatch.setattr(Collector, "collect", collect_then_stop)
    monkeypatch.setattr(checkpointing, "save_checkpoint", _save_then_stop(second))
    cfg = tiny_config(
        tmp_path / "run", "sac", "g1_walk_flat", "algo.max_iterations=3", "training.checkpoint_every=0"
    )
    lines = []
    with pytest.raises(KeyboardInterrupt) as raised:
        OffPolicyRunner(cfg, log=lines.append).run()
    assert type(raised.value) is first  # the stop that came first decides the exit code
    summary = load_run_summary(tmp_path / "run")
    name = "SIGTERM" if first is RunInterrupted else "SIGINT"
    assert summary.status == "interrupted" and summary.signal == name
    assert summary.completed_iterations == 1
    abandoned = f"the checkpoint of iteration 1 was abandoned ({why})"
    assert summary.error == f"interrupted by {name}; {abandoned}"
    assert f"checkpoint of iteration 1 abandoned ({why}); writing the summary" in lines
    assert summary.checkpoint_path is None and not (tmp_path / "run" / "checkpoints").exists()


def test_signals_while_the_interrupted_summary_is_written_are_ignored(tmp_path, monkeypatch):
    _signal_during_iteration_2(monkeypatch, signal.SIGINT)
    real_write = summary_writer.write_run_summary

    def write_after_a_ctrl_c(path, summary):
        if summary["status"] == "interrupted":
            os.kill(os.getpid(), signal.SIGINT)
        return real_write(path, summary)

    monkeypatch.setattr(summary_writer, "write_run_summary", write_after_a_ctrl_c)
    cfg = tiny_config(
        tmp_path / "run", "sac", "g1_walk_flat", "algo.max_iterations=4", "training.checkpoint_every=0"
    )
    with pytest.raises(KeyboardInterrupt):
        OffPolicyRunner(cfg, log=lambda line: None).run()
    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "interrupted" and summary.completed_iterations == 2
    assert load_checkpoint(tmp_path / "run")["iteration"] == 2


def test_a_time_limit_ends_the_run_like_its_last_iteration(tmp_path):
    lines = []
    # set-up alone takes longer than this: the limit is up when iteration 1 ends
    cfg = tiny_config(
        tmp_path / "run", "sac", "g1_walk_flat", "algo.max_iterations=1000", "training.time_limit_sec=0.001"
    )
    summary = OffPolicyRunner(cfg, log=lines.append).run()
    assert summary.status == "completed" and summary.time_limit_reached
    assert summary.completed_iterations == 1 and summary.max_iterations == 1000
    assert load_checkpoint(tmp_path / "run")["iteration"] == 1  # saved as at the last iteration
    assert summary.final_eval is not None  # and finished as a completed run is
    assert any("training.time_limit_sec=0.001 reached after iteration 1 of 1000" in line for line in lines)
    assert load_run_summary(tmp_path / "run").time_limit_reached


def test_a_run_that_reaches_max_iterations_first_did_not_hit_its_time_limit(tmp_path):
    cfg = tiny_config(tmp_path / "run", "sac", "g1_walk_flat", "training.time_limit_sec=3600")
    summary = OffPolicyRunner(cfg, log=lambda line: None).run()
    assert summary.status == "completed" and not summary.time_limit_reached
    assert summary.completed_iterations == cfg.algo.max_iterations
    # every iteration records the seconds since set-up at its end: past the warm-up, increasing
    elapsed = [t.elapsed_sec for t in summary.iterations]
    assert summary.warmup_time_sec < elapsed[0] < elapsed[1]
    assert elapsed[1] - elapsed[0] >= summary.iterations[1].wall_time_sec


def test_an_exception_is_a_failed_run_with_the_error_text(tmp_path, monkeypatch):
    def broken_collect(self, num_steps):
        raise RuntimeError("physics exploded on purpose")

    monkeypatch.setattr(Collector, "collect", broken_collect)
    with pytest.raises(RuntimeError, match="exploded on purpose"):
        OffPolicyRunner(tiny_config(tmp_path / "run"), log=lambda line: None).run()
    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "failed"
    assert "physics exploded on purpose" in summary.error
    assert summary.completed_iterations == 0
    assert (tmp_path / "run" / "config.json").is_file()


def test_a_malformed_summary_makes_the_run_fail(tmp_path, monkeypatch):
    real_tail = summary_writer.tail_throughput

    def wrong_tail(timings, window):
        tail = real_tail(timings, window)
        if not timings:
            return tail
        return TailThroughput(
            env_steps_per_sec=tail.env_steps_per_sec * 2 + 1, iteration_count=tail.iteration_count
        )

    monkeypatch.setattr(summary_writer, "tail_throughput", wrong_tail)
    cfg = tiny_config(
        tmp_path / "run", "sac", "g1_walk_flat", "training.final_eval=false", "training.export_onnx=false"
    )
    with pytest.raises(RuntimeError, match="run summary failed validation"):
        OffPolicyRunner(cfg, log=lambda line: None).run()
    summary = load_run_summary(tmp_path / "run")
    assert summary.status == "failed"
    assert "tail_env_steps_per_sec" in summary.error


def test_flashsac_motion_tracking_trains_end_to_end(tmp_path):
    cfg = tiny_config(
        tmp_path / "run",
        "flashsac",
        "g1_motion_tracking",
        "training.final_eval=false",
        "algo.max_iterations=1",
    )
    summary = OffPolicyRunner(cfg, log=lambda line: None).run()
    assert summary.status == "completed"
    assert summary.completed_iterations == 1
    assert summary.learner_graph["algo"] == "flashsac"
    assert (tmp_path / "run" / "policy.onnx").is_file()


def test_flashsac_tracks_the_crawl_clip_on_its_slope(tmp_path):
    from trainrt.robots import G1

    if not (G1.motions_dir() / "terrain_slope.obj").is_file():
        pytest.skip("G1 assets missing: run `make setup`")
    lines: list[str] = []
    cfg = tiny_config(
        tmp_path / "run",
        "flashsac",
        "g1_motion_tracking",
        "task.motion_file=motion_crawl_slope.npz",
        "training.final_eval=false",
        "algo.max_iterations=1",
    )
    summary = OffPolicyRunner(cfg, log=lines.append).run()
    assert summary.status == "completed" and summary.completed_iterations == 1
    assert load_resolved_config(tmp_path / "run").task.motion_file == "motion_crawl_slope.npz"
    from trainrt.runner.build import build_env

    env = build_env(load_resolved_config(tmp_path / "run"), num_envs=1)  # what the run trained in: the slope
    names = [env.backend.mj_model.geom(i).name for i in range(env.backend.mj_model.ngeom)]
    assert [n for n in names if n.startswith("crawl_slope")] == [
        "crawl_slope_0",
        "crawl_slope_1",
        "crawl_slope_2",
    ]


def test_an_older_run_directory_with_no_play_still_plays_and_exports(trained_run, tmp_path):
    from trainrt.runner import export_run, play_run

    run_dir, summary, _ = trained_run
    copy = tmp_path / "old"
    shutil.copytree(run_dir, copy)
    # what an older version wrote: training.no_play in config.json, the summary's result under "evaluation"
    config = json.loads((copy / "config.json").read_text())
    config["training"]["no_play"] = not config["training"].pop("final_eval")
    (copy / "config.json").write_text(json.dumps(config))
    record = json.loads((copy / "run_summary.json").read_text())
    record["evaluation"] = record.pop("final_eval")
    (copy / "run_summary.json").write_text(json.dumps(record))
    assert load_resolved_config(copy).training.final_eval is True
    assert load_run_summary(copy).final_eval == summary.final_eval
    played = play_run(copy, num_envs=2, num_steps=2)
    assert played["iteration"] == 2 and played["num_steps"] == 2 and played["requested_steps"] == 2
    assert isinstance(played["num_envs"], int) and isinstance(played["num_steps"], int)
    exported = export_run(copy, output=tmp_path / "policy.onnx")
    assert exported["iteration"] == 2 and (tmp_path / "policy.onnx").is_file()


def test_play_and_export_accept_a_checkpoint_from_another_device_type(trained_run, tmp_path):
    from trainrt.runner.build import build_agent
    from trainrt.runner.checkpoint import load_agent_weights

    run_dir, _, _ = trained_run
    data = load_checkpoint(run_dir)
    # what a CUDA run leaves: 16-byte CUDA generator states, which a CPU generator cannot take
    data["device"] = "cuda:0"
    data["agent"]["rng_state"] = {
        key: torch.zeros(16, dtype=torch.uint8) for key in data["agent"]["rng_state"]
    }
    cfg = load_resolved_config(run_dir)
    agent = build_agent(cfg, data["env_meta"]["obs_dims"], data["env_meta"]["num_actions"], "cpu")
    load_agent_weights(agent, data)
    for name, tensor in agent.actor.state_dict().items():
        assert torch.equal(tensor, data["agent"]["actor"][name]), name


@pytest.mark.parametrize("overlap", [False, True])
def test_the_summary_records_which_policy_acted_and_which_rows_the_learner_saw(tmp_path, overlap):
    cfg = tiny_config(
        tmp_path / "run",
        "sac",
        "g1_walk_flat",
        "algo.max_iterations=3",
        f"training.overlap={str(overlap).lower()}",
    )
    summary = OffPolicyRunner(cfg, log=lambda line: None).run()
    params = cfg.algo.params
    updates, steps = params.updates_per_iteration, cfg.algo.steps_per_iteration
    warmup_updates = (
        summary.learner_graph["num_updates"] - 3 * updates
    )  # capture warm-up + first iteration's worth
    assert summary.learner_graph["overlap_enabled"] is overlap
    assert summary.learner_graph["data_staleness_iterations"] == (1 if overlap else 0)
    for i, timing in enumerate(summary.iterations):
        # the collector of iteration i+1 acts with the weights after iteration i's updates
        assert timing.acting_policy_version == warmup_updates + i * updates
        # sequential: the learner sees this iteration's rows; overlapped: the rows up to the boundary
        assert timing.learner_view_steps == params.learning_starts + (i + (0 if overlap else 1)) * steps


def test_the_console_shows_the_env_summary_and_env_txt_has_the_full_tables(trained_run):
    run_dir, _, lines = trained_run
    text = "\n".join(lines)
    tables = (run_dir / "env.txt").read_text()
    assert "RewardManager: 16 active reward terms" in tables and "track_lin_vel_xy_exp" in tables
    assert "RewardManager" not in text, "the console has the summary, not the tables"
    assert "  reward: 16 terms: track_lin_vel_xy_exp" in text
    assert f"full manager tables written to {run_dir / 'env.txt'}" in text


def test_a_term_with_outputs_the_env_cannot_take_is_named_before_anything_is_written(tmp_path, monkeypatch):
    from trainrt import mdp

    def column(env):  # (num_envs, 1): an extender's forgotten squeeze
        return torch.zeros(env.num_envs, 1, device=env.device)

    monkeypatch.setattr(mdp, "lin_vel_z_l2", column)
    run_dir = tmp_path / "run"
    with pytest.raises(
        ValueError, match=r"reward term 'lin_vel_z_l2' must return a \(num_envs,\) tensor, got shape"
    ):
        OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_flat"), log=lambda line: None)
    assert not run_dir.exists()
