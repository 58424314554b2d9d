"""``trainrt eval`` on CUDA: the rollout replayed as a CUDA graph gives the eager rollout's results."""

from __future__ import annotations

import pytest
import torch

from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.runner.build import build_agent

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)


def test_the_graph_walk_eval_matches_the_eager_one(monkeypatch):
    import trainrt.runner.evaluate as evaluate

    cfg = apply_overrides(
        cpu_demo_preset("sac", "g1_walk_flat", "mujoco"),
        ["sim.backend=mjwarp", "algo.params.actor_hidden_dim=32", "algo.params.critic_hidden_dim=32"],
    )
    # an untrained actor with the same seed in both runs: it falls and resets, which the graph must replay
    monkeypatch.setattr(
        evaluate,
        "_load_agent",
        lambda cfg, env, state: build_agent(cfg, env.obs_dims, env.num_actions, env.device),
    )
    names = ["stand", "forward_1.0", "combined"]
    bodies = [
        evaluate.evaluate_walk(
            cfg, {}, num_envs=16, steps=120, commands=names, use_graph=use_graph, log=lambda line: None
        )
        for use_graph in (True, False)
    ]
    graph, eager = (body["commands"] for body in bodies)
    for name in names:
        assert graph[name]["graph_enabled"] is True and eager[name]["graph_enabled"] is False
        for key in ("failed_fraction", "mean_episode_length", "lin_vel_error_xy", "ang_vel_error_z"):
            assert graph[name][key] == pytest.approx(eager[name][key], rel=1e-4, abs=1e-5), (name, key)
