"""Non-finite or blown-up physics (a velocity past ``MAX_PHYSICS_SPEED``): the row is detected on device, reset,
flagged invalid and counted; others unaffected."""

from __future__ import annotations

import pytest
import torch
from managers_toy_scene import make_env

BAD_ROW = 2
BAD_STEP = 3


def _inject(env, channel: str, value: float):
    """Make the physics of BAD_ROW blow up (``value`` in ``channel``) during step BAD_STEP."""
    backend_step = env.backend.step
    calls = {"n": 0}

    def exploding_step():
        backend_step()
        calls["n"] += 1
        if calls["n"] == BAD_STEP:
            getattr(env.backend, channel)[BAD_ROW, 1] = value

    env.backend.step = exploding_step


def _run(env, steps: int):
    actions = torch.Generator().manual_seed(5)
    env.reset()
    results = []
    for _ in range(steps):
        r = env.step(torch.rand(env.num_envs, env.num_actions, generator=actions) * 2 - 1)
        results.append(
            {
                "obs": {g: t.clone() for g, t in r.obs.items()},
                "final": {g: t.clone() for g, t in r.final_obs.items()},
                "reward": r.reward.clone(),
                "terminated": r.terminated.clone(),
                "truncated": r.truncated.clone(),
                "valid": r.valid.clone(),
                "qpos": env.backend.qpos.clone(),
            }
        )
    return results


@pytest.mark.parametrize(
    ("channel", "value"), [("qvel", float("nan")), ("qpos", float("inf")), ("qvel", 5.0e3), ("qvel", -5.0e3)]
)
def test_nonfinite_row_is_reset_flagged_and_counted(channel: str, value: float):
    reference = make_env(seed=11)
    exploding = make_env(seed=11)
    _inject(exploding, channel, value)
    ref = _run(reference, BAD_STEP)
    bad = _run(exploding, BAD_STEP)
    last, ref_last = bad[-1], ref[-1]
    others = [r for r in range(exploding.num_envs) if r != BAD_ROW]

    assert last["valid"].tolist() == [r != BAD_ROW for r in range(exploding.num_envs)]
    assert last["truncated"][BAD_ROW] and not last["terminated"][BAD_ROW]
    assert last["reward"][BAD_ROW] == 0
    assert exploding.nonfinite_resets.item() == 1
    # the row restarted from a sane state and everything handed out is finite
    assert torch.isfinite(exploding.backend.qpos).all() and torch.isfinite(exploding.backend.qvel).all()
    assert torch.all(exploding.backend.qvel[BAD_ROW] == 0)
    assert exploding.episode_length_buf[BAD_ROW] == 0
    for group in ("policy", "critic"):
        assert torch.isfinite(last["obs"][group]).all() and torch.isfinite(last["final"][group]).all()
    # the other rows are bit-identical to a run without the explosion
    for key in ("reward", "terminated", "truncated", "valid", "qpos"):
        assert torch.equal(last[key][others], ref_last[key][others]), key
    for group in ("policy", "critic"):
        assert torch.equal(last["obs"][group][others], ref_last["obs"][group][others])
        assert torch.equal(last["final"][group][others], ref_last["final"][group][others])


def test_nonfinite_episodes_stay_out_of_episode_statistics():
    env = make_env(seed=11)
    _inject(env, "qvel", float("nan"))
    _run(env, BAD_STEP)
    stats = env.episode_stats()
    assert stats["Episode/num_finished"] == 0
    assert stats["Diagnostics/nonfinite_resets"] == 1.0
    assert all(v == v for v in stats.values())  # no NaN published
    # the invalid row's reward sums were cleared, so later statistics stay finite
    assert torch.isfinite(env.reward_manager.episode_sums).all()


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_a_world_that_explodes_inside_the_physics_recovers_after_its_reset(sim: str):
    """NaN fed into the solver (warm start, contacts, forces all go non-finite), then reset: the row steps on."""
    env = make_env(seed=3, sim=sim)
    actions = torch.Generator().manual_seed(1)
    env.reset()
    for _ in range(2):
        env.step(torch.rand(env.num_envs, env.num_actions, generator=actions) * 2 - 1)
    env.backend.qvel[BAD_ROW] = float("nan")  # before the physics step: the solver consumes it
    result = env.step(torch.zeros(env.num_envs, env.num_actions))
    assert not result.valid[BAD_ROW] and bool(
        result.valid[[r for r in range(env.num_envs) if r != BAD_ROW]].all()
    )
    for _ in range(5):
        result = env.step(torch.rand(env.num_envs, env.num_actions, generator=actions) * 2 - 1)
        assert bool(result.valid.all()), "a reset row must not stay poisoned by stale solver state"
        assert torch.isfinite(env.backend.qpos).all() and torch.isfinite(env.backend.qvel).all()
    assert env.nonfinite_resets.item() == 1
