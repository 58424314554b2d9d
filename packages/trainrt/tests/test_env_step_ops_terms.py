"""The env_step_ops diagnostic's per-term counts: every term is listed, terms add up within their manager's
part, and the env's term lists are left as they were."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "env_step_ops.py"


@pytest.fixture(scope="module")
def env_step_ops():
    spec = importlib.util.spec_from_file_location("env_step_ops", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_per_term_counts_cover_every_term_and_fit_in_their_manager(env_step_ops):
    try:
        result = env_step_ops.count_env_step("g1_walk_flat", "mujoco", num_envs=2, steps=1, per_term=True)
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")
    terms, parts = result["terms"], result["parts"]
    rewards = {k: v["torch_kernel_ops"] for k, v in terms.items() if k.startswith("reward: ")}
    assert {"reward: track_lin_vel_xy_exp", "reward: joint_pos_limits", "reward: alive"} <= set(rewards)
    assert all(v >= 0 for v in rewards.values()) and rewards["reward: joint_pos_limits"] > 0
    assert sum(rewards.values()) <= parts["reward manager"]["torch_kernel_ops"]
    events = sum(v["torch_kernel_ops"] for k, v in terms.items() if k.startswith("event (reset): "))
    assert 0 < events <= parts["event manager (reset)"]["torch_kernel_ops"]
    assert "command (compute): twist" in terms and "termination: fell_over" in terms


def test_per_term_counting_restores_the_term_lists(env_step_ops):
    from trainrt.envs import ManagerBasedRlEnv
    from trainrt.tasks import make_task_cfg

    try:
        env = ManagerBasedRlEnv(make_task_cfg("g1_walk_flat"), sim="mujoco", num_envs=2, device="cpu", seed=0)
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")
    before = [entries[row][column] for entries, row, column, _ in env_step_ops._term_targets(env)]
    counter, warp = env_step_ops.OpCounter(), env_step_ops.WarpLaunchCounter()
    sink: dict = {}
    with env_step_ops._counting_terms(env, sink, counter, warp):
        wrapped = [entries[row][column] for entries, row, column, _ in env_step_ops._term_targets(env)]
        assert all(a is not b for a, b in zip(before, wrapped))
    after = [entries[row][column] for entries, row, column, _ in env_step_ops._term_targets(env)]
    assert all(a is b for a, b in zip(before, after)) and len(before) == len(after) > 10
