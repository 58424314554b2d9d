"""CLI end to end: `trainrt train` -> run_summary.json -> checkpoint -> resume -> play/export.

Each case runs the real command line in a subprocess (as a user would), with tiny settings on the CPU.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import train, trainrt

from trainrt.cli import CPU_THREADS_NOTE
from trainrt.runner import load_run_summary


@pytest.mark.slow
@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_train_writes_a_valid_summary_and_a_checkpoint(tmp_path, algo, task, sim, request):
    if (algo, task, sim) == ("sac", "g1_walk_flat", "mujoco"):  # the session's shared run is this case's
        run_dir, out = request.getfixturevalue("finished_training")
    else:
        run_dir = tmp_path / "run"
        out = train(run_dir, algo, task, sim)
    assert out.returncode == 0, out.stderr[-3000:]
    summary = load_run_summary(run_dir)  # validates against the schema
    assert summary.status == "completed"
    assert (summary.algo, summary.task, summary.sim_backend) == (algo, task, sim)
    assert summary.completed_iterations == 2
    assert summary.total_env_steps == 2 * 2 * 2
    assert summary.tail_iteration_count == 2
    assert summary.tail_env_steps_per_sec > 0
    assert summary.collector_graph["graph_enabled"] is False
    assert summary.collector_graph["eager_fallback_reason"] == "cpu device"
    assert Path(summary.checkpoint_path).is_file()
    assert json.loads((run_dir / "config.json").read_text())["algo"]["num_envs"] == 2
    assert str(run_dir) in out.stdout


@pytest.mark.slow
def test_resume_continues_from_the_last_checkpoint(finished_run, tmp_path):
    resumed = tmp_path / "resumed"
    out = trainrt(
        "train",
        "--algo",
        "sac",
        "--task",
        "g1_walk_flat",
        "--sim",
        "mujoco",
        f"training.resume={finished_run}",
        "algo.max_iterations=4",
        f"training.run_dir={resumed}",
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = load_run_summary(resumed)
    assert summary.status == "completed"
    assert summary.resumed_from_iteration == 2
    assert [it.iteration for it in summary.iterations][-1] == 4


@pytest.mark.slow
def test_play_and_export_use_the_checkpoint(finished_run, tmp_path):
    out = trainrt("play", str(finished_run), "--num-envs", "2", "--steps", "5")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "mean return" in out.stdout and "mean episode length" in out.stdout
    onnx_path = tmp_path / "policy.onnx"
    out = trainrt("export", str(finished_run), "--output", str(onnx_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert onnx_path.is_file() and onnx_path.stat().st_size > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("algo.num_envz=4", "num_envz"),
        ("algo.num_envs=many", "algo.num_envs"),
        ("sim.device=tpu", "sim.device"),
        ("training.final_eval=maybe", "training.final_eval"),
        ("training.no_play=maybe", "training.no_play"),
    ],
)
def test_bad_overrides_exit_2_naming_the_key(tmp_path, override, message):
    out = trainrt("train", "--algo", "sac", "--task", "g1_walk_flat", "--sim", "mujoco", override)
    assert out.returncode == 2
    assert message in out.stderr


def test_unknown_algo_lists_the_choices():
    out = trainrt("train", "--algo", "ppo", "--task", "g1_walk_flat")
    assert out.returncode == 2
    assert "sac" in out.stderr and "flashsac" in out.stderr


@pytest.mark.slow
@pytest.mark.parametrize(("given", "threads", "applied"), [(None, 1, True), ("2", 2, False)])
def test_a_process_takes_one_cpu_thread_unless_omp_num_threads_is_set(given, threads, applied):
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if given is not None:
        env["OMP_NUM_THREADS"] = given
    probe = (
        "from trainrt.cli import one_cpu_thread_unless_set\n"
        "applied = one_cpu_thread_unless_set()\n"
        "import torch\n"
        "print(applied, torch.get_num_threads())"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == [str(applied), str(threads)]


@pytest.mark.slow
def test_train_says_it_chose_one_cpu_thread(finished_training):
    _, out = finished_training
    assert out.returncode == 0, out.stderr[-3000:]
    if "OMP_NUM_THREADS" not in os.environ:
        assert CPU_THREADS_NOTE in out.stdout
