"""On CUDA: the env step never synchronizes with the host, and a CUDA graph of it replays the eager results."""

from __future__ import annotations

import pytest
import torch
from managers_toy_scene import CountCalls, make_env, toy_cfg

import simcore
from trainrt.managers import EventTermCfg

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

NUM_ENVS = 64


def _cfg():
    cfg = toy_cfg()
    cfg.events["tick"] = EventTermCfg(CountCalls, "interval", interval_range_s=(0.01, 0.05))
    return cfg


def _actions(steps: int) -> torch.Tensor:
    g = torch.Generator(device="cuda").manual_seed(1)
    return torch.rand(steps, NUM_ENVS, 2, generator=g, device="cuda") * 2 - 1


def test_step_is_sync_free():
    env = make_env(_cfg(), sim="mjwarp", num_envs=NUM_ENVS, device="cuda")
    actions = _actions(8)
    env.reset()
    env.step(actions[0])  # first call may compile and allocate
    done = torch.zeros(NUM_ENVS, dtype=torch.bool, device="cuda")
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for k in range(1, 8):
            result = env.step(actions[k])
            done |= result.terminated | result.truncated
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert done.all()  # every row went through the auto-reset path (5-step episodes)
    assert torch.isfinite(result.obs["policy"]).all()


def test_graph_replay_matches_eager_steps():
    eager = make_env(_cfg(), sim="mjwarp", num_envs=NUM_ENVS, device="cuda", seed=4)
    graphed = make_env(_cfg(), sim="mjwarp", num_envs=NUM_ENVS, device="cuda", seed=4)
    actions = _actions(12)
    action_buffer = actions[0].clone()
    eager.reset()
    graphed.reset()
    work = simcore.CapturedWork(
        lambda: graphed.step(action_buffer),
        backend=graphed.backend,
        name="env_step",
        generators=(graphed.rng,),
        require_graph=True,
        warmup_steps=2,
    )
    work.capture()  # the two warm-up steps run eagerly with actions[0]
    for _ in range(2):
        eager.step(actions[0])
    for k in range(1, 12):
        action_buffer.copy_(actions[k])
        work.replay()
        expected = eager.step(actions[k])
        got = graphed._result
        for group in ("policy", "critic"):
            torch.testing.assert_close(got.obs[group], expected.obs[group], atol=1e-4, rtol=1e-4)
            torch.testing.assert_close(got.final_obs[group], expected.final_obs[group], atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(got.reward, expected.reward)
        assert torch.equal(got.truncated, expected.truncated)
        assert torch.equal(got.terminated, expected.terminated)
    assert work.graph_enabled and work.replays == 11
    assert torch.equal(graphed.common_step_counter, eager.common_step_counter)
    assert graphed.episode_stats() == pytest.approx(eager.episode_stats())
