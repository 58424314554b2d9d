"""Fixtures of the CLI end-to-end tests: tiny runs trained once per session and shared by the modules.

Tests only read a shared run or work on a copy of it (``shutil.copytree``); a test that changes a run
trains its own.
"""

import pytest
from cli_runs import train


@pytest.fixture(scope="session")
def finished_training(tmp_path_factory):
    """A finished tiny SAC run of ``g1_walk_flat`` on CPU MuJoCo (2 iterations) and its completed process."""
    run_dir = tmp_path_factory.mktemp("e2e") / "sac"
    out = train(run_dir, "sac", "g1_walk_flat", "mujoco")
    assert out.returncode == 0, out.stderr[-3000:]
    return run_dir, out


@pytest.fixture(scope="session")
def finished_run(finished_training):
    """The run directory of ``finished_training``."""
    return finished_training[0]


@pytest.fixture(scope="session")
def one_iteration_run(tmp_path_factory):
    """``one_iteration_run(task)``: a tiny one-iteration SAC run of ``task`` on CPU MuJoCo, trained on first use."""
    runs = {}

    def run_of(task: str):
        if task not in runs:
            run_dir = tmp_path_factory.mktemp(task) / "run"
            out = train(run_dir, "sac", task, "mujoco", iterations=1)
            assert out.returncode == 0, out.stderr[-3000:]
            runs[task] = run_dir
        return runs[task]

    return run_of
