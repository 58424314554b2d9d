"""Fixtures of the CLI end-to-end tests."""

import pytest
from cli_runs import train


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A finished tiny SAC run of ``g1_walk_flat`` on CPU MuJoCo (one per test module)."""
    run_dir = tmp_path_factory.mktemp("e2e") / "sac"
    out = train(run_dir, "sac", "g1_walk_flat", "mujoco")
    assert out.returncode == 0, out.stderr[-3000:]
    return run_dir
