"""Data-parallel training on the CPU: two gloo ranks launched by ``trainrt train --gpus 2`` (the same launch
variables torchrun sets) train a tiny SAC run to identical weights, and a failing or dying rank ends the run
as failed on every rank with no process left behind."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tiny_runs import TINY_RUN

from trainrt.algos import SacConfig, make_agent
from trainrt.runner import load_run_summary
from trainrt.runner.checkpoint import checkpoint_path
from trainrt.runner.distributed import (
    INJECT_FAILURE_ENV,
    RANK_SEED_STRIDE,
    Boundary,
    DataParallelRanks,
    LaunchEnv,
    SingleProcess,
    agent_tensors,
    diverged_ranks,
    make_ranks,
    rank_device,
    rank_seed,
)
from trainrt.runner.launcher import rank_environment
from trainrt.runner.summary import SUMMARY_FILE_NAME

TINY = [
    *TINY_RUN,
    "algo.params.actor_hidden_dim=8",
    "algo.params.critic_hidden_dim=8",
    "training.final_eval=false",
    "training.export_onnx=false",
    "training.tensorboard=false",
    "training.distributed.timeout_sec=60",
    "training.distributed.check_every=1",
]
# A hung rank would hold the test until here; a healthy two-rank tiny run takes well under a minute.
RUN_TIMEOUT_SEC = 300


def _two_rank_launch(run_dir: Path, inject: str | None, extra: tuple[str, ...]) -> tuple[list[str], dict]:
    """The command line and environment of ``trainrt train --gpus 2`` on the CPU (mujoco, gloo)."""
    env = {k: v for k, v in os.environ.items() if k not in {"RANK", "LOCAL_RANK", "WORLD_SIZE"}}
    env["CUDA_VISIBLE_DEVICES"] = ""  # the CPU path (gloo) even where a GPU exists
    if inject is not None:
        env[INJECT_FAILURE_ENV] = inject
    command = [
        sys.executable,
        "-m",
        "trainrt",
        "train",
        "--algo=sac",
        "--task=g1_walk_flat",
        "--sim=mujoco",
        "--preset=cpu-demo",
        "--gpus=2",
        *TINY,
        f"training.run_dir={run_dir}",
        *extra,
    ]
    return command, env


def train_two_ranks(run_dir: Path, inject: str | None = None, *extra: str) -> subprocess.CompletedProcess:
    """``trainrt train --gpus 2`` on the CPU (mujoco, gloo) with tiny settings, to its end."""
    command, env = _two_rank_launch(run_dir, inject, extra)
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SEC)


def rank_summary(run_dir: Path, rank: int) -> dict:
    """The summary rank ``rank`` wrote (rank 0: the run's)."""
    path = (
        run_dir / SUMMARY_FILE_NAME if rank == 0 else run_dir / "ranks" / f"rank_{rank}" / SUMMARY_FILE_NAME
    )
    return json.loads(path.read_text())


# --- launch facts (fast) -----------------------------------------------------------------------------------


def test_rank_seeds_are_derived_from_the_run_seed_and_rank_0_keeps_it():
    assert rank_seed(7, 0) == 7
    assert rank_seed(7, 3) == 7 + 3 * RANK_SEED_STRIDE
    assert len({rank_seed(s, r) for s in range(4) for r in range(8)}) == 32


def test_the_launch_environment_is_read_and_checked():
    assert LaunchEnv.from_environ({}) == LaunchEnv(rank=0, local_rank=0, world_size=1)
    assert LaunchEnv.from_environ({"RANK": "1", "LOCAL_RANK": "1", "WORLD_SIZE": "2"}).rank == 1
    with pytest.raises(ValueError, match=r"RANK=2.*WORLD_SIZE=2"):
        LaunchEnv.from_environ({"RANK": "2", "WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match="integers"):
        LaunchEnv.from_environ({"WORLD_SIZE": "two"})


def test_each_rank_gets_its_own_gpu_and_a_single_gpu_device_is_refused():
    launch = LaunchEnv(rank=1, local_rank=1, world_size=2)
    assert rank_device("cuda", launch) == "cuda:1"
    assert rank_device("cpu", launch) == "cpu"
    assert rank_device("cuda:3", LaunchEnv()) == "cuda:3"
    with pytest.raises(ValueError, match="cuda:0"):
        rank_device("cuda:0", launch)


def test_a_single_process_run_has_no_collectives(monkeypatch):
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    ranks = make_ranks("cpu", backend="auto", timeout_sec=1.0, check_every=1)
    assert isinstance(ranks, SingleProcess)
    error = ValueError("boom")
    with pytest.raises(ValueError) as raised:
        ranks.end_iteration(1, error)
    assert raised.value is error
    ranks.end_iteration(1, None)


def test_spawned_ranks_get_the_torchrun_variables_and_nvlink_multicast_stays_off():
    env = rank_environment(1, 2, 29500, base={"PATH": "/bin"})
    assert {k: env[k] for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_PORT")} == {
        "RANK": "1",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "2",
        "MASTER_PORT": "29500",
    }
    assert env["MASTER_ADDR"] == "127.0.0.1"
    assert env["NCCL_NVLS_ENABLE"] == "0"


def test_agent_tensors_cover_every_trained_tensor_once():
    cfg = SacConfig(actor_hidden_dim=8, critic_hidden_dim=8)
    agent = make_agent("sac", cfg, {"policy": 5, "critic": 7}, 3, torch.device("cpu"), seed=0)
    params, buffers = agent_tensors(agent)
    stepped = [p for opt in (agent.actor_optimizer, agent.critic_optimizer, agent.alpha_optimizer)
               for group in opt.param_groups for p in group["params"]]  # fmt: skip
    ids = {id(t) for t in params}
    assert len(ids) == len(params)
    assert all(id(p) in ids for p in stepped)  # the temperature too, which lives in no module
    assert any(b is agent.actor_obs_normalizer.mean for b in buffers)


# --- two gloo ranks (subprocesses) ---------------------------------------------------------------------------


@pytest.mark.slow
def test_two_gloo_ranks_train_to_identical_weights_and_rank_0_sums_the_env_steps(tmp_path):
    run_dir = tmp_path / "dp"
    result = train_two_ranks(run_dir)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = load_run_summary(run_dir)
    assert summary.status == "completed" and summary.world_size == 2 and summary.rank == 0
    per_rank_steps = 2 * 2 * 2  # iterations * steps_per_iteration * num_envs
    assert summary.total_env_steps == 2 * per_rank_steps
    assert [f.rank for f in summary.per_rank] == [0, 1]
    assert [f.total_env_steps for f in summary.per_rank] == [per_rank_steps, per_rank_steps]
    assert summary.per_rank[0].seed != summary.per_rank[1].seed  # different envs and exploration
    # Identical weights: the end-of-run checksums agree exactly, and rank 1 recorded the same figures.
    assert summary.per_rank[0].parameter_checksum == summary.per_rank[1].parameter_checksum
    assert summary.learner_graph["num_updates"] > 0
    rank_1 = rank_summary(run_dir, 1)
    assert rank_1["status"] == "completed" and rank_1["rank"] == 1
    assert rank_1["per_rank"][1]["parameter_checksum"] == summary.per_rank[0].parameter_checksum
    # Only rank 0 writes checkpoints (into the shared run directory).
    assert checkpoint_path(run_dir, 2).is_file()
    assert not (run_dir / "ranks" / "rank_1" / "checkpoints").exists()


@pytest.mark.slow
def test_an_exception_on_one_rank_fails_every_rank(tmp_path):
    run_dir = tmp_path / "dp_fail"
    result = train_two_ranks(run_dir, inject="1:2")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    rank_0, rank_1 = rank_summary(run_dir, 0), rank_summary(run_dir, 1)
    assert rank_0["status"] == "failed" and rank_1["status"] == "failed"
    assert "rank(s) [1] failed at iteration 2" in rank_0["error"]
    assert "injected failure on rank 1" in rank_0["error"]
    assert "injected failure on rank 1" in rank_1["error"]
    assert rank_0["completed_iterations"] == 1


@pytest.mark.slow
def test_a_rank_that_dies_fails_the_run_without_hanging(tmp_path):
    run_dir = tmp_path / "dp_crash"
    result = train_two_ranks(run_dir, inject="1:2:crash")
    assert result.returncode == 1, result.stdout[-3000:] + result.stderr[-3000:]
    rank_0 = rank_summary(run_dir, 0)
    assert rank_0["status"] == "failed"
    assert "lost contact" in rank_0["error"]
    assert rank_0["completed_iterations"] == 1


def _assert_both_ranks_stopped_by_sigterm_after(run_dir: Path, iteration: int | None = None) -> int:
    """Both ranks' summaries say interrupted by SIGTERM after the same iteration; return that iteration."""
    rank_0, rank_1 = rank_summary(run_dir, 0), rank_summary(run_dir, 1)
    for summary in (rank_0, rank_1):
        assert summary["status"] == "interrupted" and summary["signal"] == "SIGTERM", summary["error"]
    done = rank_0["completed_iterations"]
    assert rank_1["completed_iterations"] == done and done >= 1
    if iteration is not None:
        assert done == iteration
    assert checkpoint_path(run_dir, done).is_file()
    return done


@pytest.mark.slow
def test_a_stop_signal_on_one_rank_stops_every_rank_after_the_same_iteration(tmp_path):
    run_dir = tmp_path / "dp_stop"
    # rank 1 alone receives SIGTERM during iteration 2; rank 0 learns of it at that iteration's boundary
    result = train_two_ranks(run_dir, "1:2:sigterm", "algo.max_iterations=6")
    assert result.returncode == 143, result.stdout[-3000:] + result.stderr[-3000:]
    _assert_both_ranks_stopped_by_sigterm_after(run_dir, 2)


@pytest.mark.slow
def test_a_time_limit_ends_every_rank_after_the_same_iteration(tmp_path):
    run_dir = tmp_path / "dp_time"
    result = train_two_ranks(run_dir, None, "algo.max_iterations=50", "training.time_limit_sec=0.001")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rank_0, rank_1 = rank_summary(run_dir, 0), rank_summary(run_dir, 1)
    for summary in (rank_0, rank_1):
        assert summary["status"] == "completed" and summary["time_limit_reached"]
        assert summary["completed_iterations"] == 1
    assert rank_0["per_rank"][0]["parameter_checksum"] == rank_0["per_rank"][1]["parameter_checksum"]


@pytest.mark.slow
def test_sigterm_to_the_launcher_is_forwarded_to_every_rank(tmp_path):
    run_dir = tmp_path / "dp_term"
    command, env = _two_rank_launch(run_dir, None, ("algo.max_iterations=100000",))
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + RUN_TIMEOUT_SEC
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read()[-3000:]
        try:
            started = rank_summary(run_dir, 0).get("completed_iterations", 0) >= 1
        except (OSError, ValueError):
            started = False
        if started:
            break
        time.sleep(0.05)  # a polling interval, not a wait for something to happen
    else:
        process.kill()
        raise AssertionError("the two-rank run reported no iteration in time")
    process.send_signal(signal.SIGTERM)  # to the launcher only, as `docker stop` does
    _, stderr = process.communicate(timeout=RUN_TIMEOUT_SEC)
    assert process.returncode == 143, stderr[-3000:]
    _assert_both_ranks_stopped_by_sigterm_after(run_dir)


class _PeerFlags:
    """A stand-in for torch.distributed whose all_reduce adds the boundary flags of the other ranks."""

    def __init__(self, peers: list[tuple[int, float, float]]):
        self.peers = peers  # (rank, stop signal, time up) of every other rank

    def all_reduce(self, flags: torch.Tensor) -> None:
        for rank, stop_signal, time_up in self.peers:
            flags[1, rank] += stop_signal
            flags[2, rank] += time_up


def _rank_at_boundary(rank: int, world_size: int, peers: list[tuple[int, float, float]]) -> DataParallelRanks:
    ranks = object.__new__(DataParallelRanks)  # no process group: the collective is the stand-in
    ranks.rank, ranks.world_size = rank, world_size
    ranks.collective_device = torch.device("cpu")
    ranks.dist = _PeerFlags(peers)
    return ranks


@pytest.mark.parametrize(
    ("mine", "peers", "agreed"),
    [
        ((None, False), [(1, 0.0, 0.0), (2, 0.0, 0.0)], Boundary(None, False)),
        ((None, False), [(1, 0.0, 0.0), (2, 15.0, 0.0)], Boundary(15, False)),  # only rank 2 got SIGTERM
        ((1, False), [(1, 0.0, 0.0), (2, 15.0, 0.0)], Boundary(1, False)),  # the lowest rank's signal
        ((None, False), [(1, 0.0, 1.0), (2, 0.0, 0.0)], Boundary(None, True)),  # one rank's time is up
        ((2, True), [(1, 15.0, 1.0), (2, 0.0, 1.0)], Boundary(2, True)),
    ],
)
def test_every_rank_gets_the_same_stop_and_time_limit_decision(mine, peers, agreed):
    ranks = _rank_at_boundary(0, 3, peers)
    assert ranks.end_iteration(7, None, *mine) == agreed


def test_checksums_that_differ_name_the_diverged_ranks():
    same = [1.5, 10.25]
    assert diverged_ranks([same, list(same), list(same)]) == []
    assert diverged_ranks([same, same, [1.5, 10.2500001]]) == [2]
