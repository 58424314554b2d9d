"""The tasks on both backends: from the same seed and state, mujoco and mjwarp agree on obs and rewards.

MuJoCo Warp runs on Warp's CPU device here (float32, slow), so the runs are tiny: two worlds, a few steps,
compared with float32-level tolerances (docs/design.md, backends: parity holds over short horizons only).
"""

from __future__ import annotations

import pytest
import torch

from trainrt.envs import ManagerBasedRlEnv
from trainrt.tasks import make_task_cfg

NUM_ENVS = 2
STEPS = 3

pytestmark = pytest.mark.slow


def _env(task: str, sim: str) -> ManagerBasedRlEnv:
    try:
        return ManagerBasedRlEnv(make_task_cfg(task), sim=sim, num_envs=NUM_ENVS, device="cpu", seed=7)
    except FileNotFoundError as err:
        pytest.skip(f"robot assets missing: {err}")


@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking", "t1_walk_flat"])
def test_mujoco_and_mjwarp_give_the_same_obs_and_rewards(task):
    cpu, warp = _env(task, "mujoco"), _env(task, "mjwarp")
    assert cpu.obs_dims == warp.obs_dims and cpu.num_actions == warp.num_actions
    obs_cpu, obs_warp = cpu.reset(), warp.reset()
    for group in obs_cpu:
        torch.testing.assert_close(obs_warp[group], obs_cpu[group], atol=1e-5, rtol=1e-5, msg=group)
    g = torch.Generator().manual_seed(3)
    for step in range(STEPS):
        action = 0.3 * (torch.rand(NUM_ENVS, cpu.num_actions, generator=g) * 2 - 1)
        r_cpu, r_warp = cpu.step(action), warp.step(action.clone())
        assert bool(torch.isfinite(r_warp.reward).all()) and bool(r_warp.valid.all())
        torch.testing.assert_close(r_warp.terminated, r_cpu.terminated, msg=f"step {step}")
        torch.testing.assert_close(r_warp.truncated, r_cpu.truncated, msg=f"step {step}")
        torch.testing.assert_close(r_warp.reward, r_cpu.reward, atol=1e-5, rtol=1e-4, msg=f"step {step}")
        per_term_cpu, per_term_warp = cpu.reward_manager.step_reward, warp.reward_manager.step_reward
        torch.testing.assert_close(
            per_term_warp, per_term_cpu, atol=1e-5, rtol=1e-4, msg=f"terms, step {step}"
        )
        torch.testing.assert_close(
            r_warp.obs["critic"], r_cpu.obs["critic"], atol=1e-3, rtol=1e-3, msg=f"step {step}"
        )
