"""CLI end to end: `trainrt train` -> run_summary.json -> checkpoint -> resume -> play/export.

Each case runs the real command line in a subprocess (as a user would), with tiny settings on the CPU.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trainrt.runner import load_run_summary

TINY = [
    "algo.num_envs=2",
    "algo.max_iterations=2",
    "algo.steps_per_iteration=2",
    "algo.params.batch_size=8",
    "algo.params.buffer_size_per_env=16",
    "algo.params.learning_starts=2",
    "algo.params.actor_hidden_dim=8",
    "algo.params.critic_hidden_dim=8",
    "training.checkpoint_every=1",
    "training.final_eval=false",
    "training.export_onnx=false",
]
FLASHSAC_TINY = ["algo.params.actor_num_blocks=1", "algo.params.critic_num_blocks=1"]


def trainrt(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run ``python -m trainrt`` with ``args``; returns the completed process."""
    return subprocess.run(
        [sys.executable, "-m", "trainrt", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def train(run_dir: Path, algo: str, task: str, sim: str, *extra: str) -> subprocess.CompletedProcess:
    """Train a tiny run into ``run_dir``."""
    overrides = [*TINY, *(FLASHSAC_TINY if algo == "flashsac" else []), f"training.run_dir={run_dir}", *extra]
    return trainrt("train", "--algo", algo, "--task", task, "--sim", sim, "--preset", "cpu-demo", *overrides)


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_train_writes_a_valid_summary_and_a_checkpoint(tmp_path, algo, task, sim):
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


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("e2e") / "sac"
    out = train(run_dir, "sac", "g1_walk_flat", "mujoco")
    assert out.returncode == 0, out.stderr[-3000:]
    return run_dir


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


def test_play_and_export_use_the_checkpoint(finished_run, tmp_path):
    out = trainrt("play", str(finished_run), "--num-envs", "2", "--steps", "5")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "mean_return" in out.stdout
    onnx_path = tmp_path / "policy.onnx"
    out = trainrt("export", str(finished_run), "--output", str(onnx_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert onnx_path.is_file() and onnx_path.stat().st_size > 0


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
