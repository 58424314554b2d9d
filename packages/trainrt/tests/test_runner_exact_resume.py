"""Exact resume: with ``training.save_replay=true`` a run killed with SIGKILL and resumed writes the same
checkpoints, bit for bit, as the run that was never stopped (CPU MuJoCo, SAC walking and FlashSAC tracking)."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_runner_train import tiny_config

from trainrt.runner import OffPolicyRunner
from trainrt.runner.checkpoint import checkpoint_path, load_checkpoint
from trainrt.runner.summary import load_run_summary

pytestmark = pytest.mark.filterwarnings("ignore:.* is given 2 times")

TESTS = Path(__file__).parent
EXACT = (
    "algo.max_iterations=4",
    "algo.params.buffer_size_per_env=8",  # the ring wraps before the resume point
    "algo.params.updates_per_iteration=2",
    "training.save_replay=true",
    "training.final_eval=false",
    "training.export_onnx=false",
)
KILLED_AT = 2

# A run that kills itself with SIGKILL once iteration KILLED_AT's checkpoint is on disk: no handler, no summary.
_KILLED_RUN = """
import os, signal, sys, torch
sys.path.insert(0, {tests!r})
torch.set_num_threads({threads})
from test_runner_train import tiny_config
from trainrt.runner import OffPolicyRunner

class Killed(OffPolicyRunner):
    def _after_iteration(self, iteration):
        super()._after_iteration(iteration)
        if iteration == {killed_at}:
            os.kill(os.getpid(), signal.SIGKILL)

Killed(tiny_config({run_dir!r}, {algo!r}, {task!r}, *{extra!r}), log=lambda line: None).run()
"""

# What a checkpoint holds that is the run's state; timings, paths and the config (training.resume) differ.
STATE_KEYS = ("agent", "rng", "replay", "env_state", "collector", "iteration", "run_id")


def _assert_identical(a, b, where: str) -> None:
    """Tensors equal bit for bit (dtype and shape too), containers key by key, other values equal."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape, where
        assert torch.equal(a, b), f"{where} differs"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{where}: keys {sorted(a)} vs {sorted(b)}"
        for key in a:
            _assert_identical(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list | tuple):
        assert isinstance(b, list | tuple) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_identical(x, y, f"{where}[{i}]")
    else:
        assert a == b, f"{where}: {a!r} vs {b!r}"


@pytest.mark.slow
@pytest.mark.parametrize(("algo", "task"), [("sac", "g1_walk_flat"), ("flashsac", "g1_motion_tracking")])
def test_a_killed_run_resumed_from_its_replay_continues_bit_for_bit(tmp_path, algo, task):
    whole, killed = tmp_path / "whole", tmp_path / "killed"
    OffPolicyRunner(tiny_config(whole, algo, task, *EXACT), log=lambda line: None).run()

    script = _KILLED_RUN.format(
        tests=str(TESTS),
        threads=torch.get_num_threads(),  # the same float reductions as this process
        killed_at=KILLED_AT,
        run_dir=str(killed),
        algo=algo,
        task=task,
        extra=EXACT,
    )
    died = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    assert json.loads((killed / "run_summary.json").read_text())["status"] == "running"
    assert not checkpoint_path(killed, KILLED_AT + 1).exists()

    lines: list[str] = []
    resumed = tiny_config(killed, algo, task, *EXACT, f"training.resume={killed}")
    OffPolicyRunner(resumed, log=lines.append).run()
    assert any(line.startswith(f"continuing exactly where iteration {KILLED_AT} ended") for line in lines)
    assert load_run_summary(killed).status == "completed"

    for iteration in range(KILLED_AT, 5):
        mine = load_checkpoint(checkpoint_path(killed, iteration))
        reference = load_checkpoint(checkpoint_path(whole, iteration))
        for key in STATE_KEYS:
            if key == "run_id":
                continue  # two runs, two ids
            _assert_identical(mine[key], reference[key], f"iteration {iteration} {key}")
    # The resume did not repeat warm-up: as many updates as the run that never stopped.
    assert mine["agent"]["num_updates"] == reference["agent"]["num_updates"]


def test_without_the_replay_a_resume_refills_it_and_says_so(tmp_path):
    run_dir = tmp_path / "run"
    short = ("algo.max_iterations=2", "training.final_eval=false", "training.export_onnx=false")
    OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_flat", *short), log=lambda line: None).run()
    assert "env_state" not in load_checkpoint(checkpoint_path(run_dir, 2))
    lines: list[str] = []
    more = tiny_config(
        run_dir, "sac", "g1_walk_flat", "algo.max_iterations=3", f"training.resume={run_dir}", *short[1:]
    )
    OffPolicyRunner(more, log=lines.append).run()
    assert not any(line.startswith("continuing exactly") for line in lines)
    assert any("the replay itself refills during warm-up" in line for line in lines)


@pytest.mark.slow
def test_an_env_state_of_another_layout_is_named_and_the_run_continues_from_a_fresh_env(tmp_path):
    run_dir = tmp_path / "run"
    OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_flat", *EXACT), log=lambda line: None).run()
    last = checkpoint_path(run_dir, 4)
    data = torch.load(last, weights_only=True)
    data["env_state"]["episode_length_buf"] = torch.zeros(3, dtype=torch.long)  # saved with 3 envs
    torch.save(data, last)
    lines: list[str] = []
    more = tiny_config(
        run_dir, "sac", "g1_walk_flat", *EXACT[1:], "algo.max_iterations=5", f"training.resume={run_dir}"
    )
    OffPolicyRunner(more, log=lines.append).run()
    assert any(
        "episode_length_buf is (3,) torch.int64 saved, (2,) torch.int64 here" in line for line in lines
    )
    assert not any(line.startswith("continuing exactly") for line in lines)
    assert os.path.exists(checkpoint_path(run_dir, 5))


def test_a_resume_removes_the_temp_file_a_killed_checkpoint_write_left(tmp_path):
    run_dir = tmp_path / "run"
    short = ("algo.max_iterations=2", "training.final_eval=false", "training.export_onnx=false")
    OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_flat", *short), log=lambda line: None).run()
    torn = checkpoint_path(run_dir, 3).with_name(".ckpt_000003.pt.k3j4h5g6.tmp")  # as atomic_write names it
    torn.write_bytes(b"PK\x03\x04 half a checkpoint")
    kept = checkpoint_path(run_dir, 3).with_name("my_notes.tmp")
    kept.write_text("not trainrt's")
    lines: list[str] = []
    more = tiny_config(
        run_dir, "sac", "g1_walk_flat", "algo.max_iterations=3", f"training.resume={run_dir}", *short[1:]
    )
    OffPolicyRunner(more, log=lines.append).run()
    assert not torn.exists() and kept.read_text() == "not trainrt's"
    assert any(str(torn) in line for line in lines)
