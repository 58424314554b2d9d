"""The env on the mjwarp backend (Warp's CPU device here): float32 state, same observations as mujoco."""

from __future__ import annotations

import pytest
import torch
from managers_toy_scene import make_env, toy_cfg

from trainrt.managers import ObsGroupCfg


@pytest.mark.slow
def test_env_steps_on_mjwarp_like_on_mujoco():
    cfg = toy_cfg()
    cfg.observations["policy"] = ObsGroupCfg(cfg.observations["policy"].terms, enable_corruption=False)
    envs = {sim: make_env(cfg, sim=sim, num_envs=2, seed=3) for sim in ("mujoco", "mjwarp")}
    results = {}
    for sim, env in envs.items():
        env.reset()
        actions = torch.Generator().manual_seed(0)
        for _ in range(2):
            result = env.step(torch.rand(env.num_envs, env.num_actions, generator=actions) * 2 - 1)
        results[sim] = {g: t.clone() for g, t in result.obs.items()}
        assert result.obs["policy"].dtype == torch.float32 and result.valid.all()
    assert envs["mjwarp"].backend.qpos.dtype == torch.float32
    for group in ("policy", "critic"):
        torch.testing.assert_close(results["mjwarp"][group], results["mujoco"][group], atol=2e-4, rtol=1e-3)
