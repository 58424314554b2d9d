"""The env's state cache and the fused term evaluation change no value: memoized vs recomputed, stacked vs
per-term, shared vs per-group, on both G1 tasks (mujoco backend, deterministic)."""

from __future__ import annotations

import pytest
import torch

from trainrt.envs import ManagerBasedRlEnv
from trainrt.envs.manager_based_rl_env import finite_rows
from trainrt.envs.state_cache import StateCache
from trainrt.tasks import make_task_cfg

NUM_ENVS = 4
TASK_NAMES = ("g1_walk_flat", "g1_motion_tracking")


def _make_env(task: str, seed: int = 0) -> ManagerBasedRlEnv:
    try:
        return ManagerBasedRlEnv(
            make_task_cfg(task), sim="mujoco", num_envs=NUM_ENVS, device="cpu", seed=seed
        )
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")


def _actions(env: ManagerBasedRlEnv, steps: int, seed: int = 1) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.rand(NUM_ENVS, env.num_actions, generator=gen) * 1.6 - 0.8 for _ in range(steps)]


def _flat(obs: dict) -> list[torch.Tensor]:
    out = []
    for value in obs.values():
        out.extend(value.values() if isinstance(value, dict) else [value])
    return out


def _time_out_row_soon(env: ManagerBasedRlEnv, step: int) -> None:
    """Before step 2, row 1 reaches its episode limit: steps 2 and later see a reset row."""
    if step == 2:
        env.episode_length_buf[1] = env.max_episode_length - 1


@pytest.fixture(scope="module", params=TASK_NAMES)
def stepped_env(request) -> ManagerBasedRlEnv:
    """An env a few steps into its episodes (bodies moving, commands away from their start)."""
    env = _make_env(request.param)
    env.reset()
    for action in _actions(env, 3):
        env.step(action)
    return env


def test_cache_memoizes_only_while_active_and_for_one_version():
    cache = StateCache()
    calls = []

    def compute():
        calls.append(1)
        return len(calls)

    assert cache.get("k", compute) == 1 and cache.get("k", compute) == 2  # inactive: always recomputes
    with cache.memoizing():
        assert cache.active
        assert cache.get("k", compute) == 3 and cache.get("k", compute) == 3
        version = cache.version
        cache.bump()
        assert cache.version == version + 1
        assert cache.get("k", compute) == 4
        cache.forget()  # drops the memo, the state did not change
        assert cache.version == version + 1 and cache.active
        assert cache.get("k", compute) == 5 and cache.get("k", compute) == 5
    assert not cache.active
    with cache.memoizing():
        assert cache.get("k", compute) == 6  # a new step starts empty


@pytest.mark.parametrize("task", TASK_NAMES)
def test_memoized_steps_equal_recomputed_steps_bit_for_bit(task, monkeypatch):
    cached_env = _make_env(task)
    cached_obs = [t.clone() for t in _flat(cached_env.reset())]
    with monkeypatch.context() as patch:
        patch.setattr(StateCache, "get", lambda self, key, compute: compute())
        plain_env = _make_env(task)
        plain_obs = [t.clone() for t in _flat(plain_env.reset())]
        plain_steps = []
        for k, action in enumerate(_actions(plain_env, 6)):
            _time_out_row_soon(plain_env, k)
            r = plain_env.step(action)
            plain_steps.append(
                [r.reward.clone(), r.terminated.clone(), r.truncated.clone()]
                + [t.clone() for t in _flat(r.obs) + _flat(r.final_obs)]
            )
    for a, b in zip(cached_obs, plain_obs):
        assert torch.equal(a, b)
    for k, (action, expected) in enumerate(zip(_actions(cached_env, 6), plain_steps)):
        _time_out_row_soon(cached_env, k)
        r = cached_env.step(action)
        got = [r.reward, r.terminated, r.truncated, *_flat(r.obs), *_flat(r.final_obs)]
        for a, b in zip(got, expected):
            assert torch.equal(a, b)


def test_stacked_reward_equals_each_term_times_weight_and_dt(stepped_env):
    env = stepped_env
    manager = env.reward_manager
    with env.state_cache.memoizing():
        total = manager.compute(env.step_dt).clone()
        step_reward = manager.step_reward.clone()
    # outside the env's step the cache is off: every term recomputes from the state
    evaluated = set()
    for i, fn, params, weight in manager._evaluated:
        expected = fn(env, **params) * (weight * env.step_dt)
        assert torch.equal(step_reward[:, i], expected.to(step_reward.dtype)), manager._term_names[i]
        evaluated.add(i)
    for i in set(range(len(manager._term_names))) - evaluated:
        assert torch.all(step_reward[:, i] == 0)
    assert torch.equal(total, step_reward.sum(dim=1))
    assert step_reward.abs().sum(dim=0).count_nonzero() >= len(evaluated) // 2  # the terms are not all zero


def test_shared_observation_terms_equal_each_group_evaluating_its_own(stepped_env):
    env = stepped_env
    manager = env.observation_manager
    with env.state_cache.memoizing():
        manager.compute(update_history=False)
    shared = sum(1 for g in manager._groups.values() for t in g.terms) - len(manager._sources)
    assert shared > 0  # the critic repeats policy terms, so some evaluations are shared
    for group in manager._groups.values():
        for term in group.terms:
            if term.history is not None or (group.corrupt and term.noise is not None):
                continue
            expected = term.fn(env, **term.params).reshape(NUM_ENVS, -1).to(term.out.dtype)
            if term.clip is not None:
                expected = expected.clamp(*term.clip)
            if term.scale is not None:
                expected = expected * term.scale
            assert torch.equal(term.out, expected), f"{group.name}/{term.name}"


def test_terminations_and_metrics_read_the_cache_without_changing_values(stepped_env):
    env = stepped_env
    with env.state_cache.memoizing():
        env.termination_manager.compute()
        dones = env.termination_manager.term_dones.clone()
        env.metrics_manager.compute()
        metrics = getattr(env.metrics_manager, "step_values", torch.zeros(0)).clone()
    for i, fn, params in env.termination_manager._terms:
        assert torch.equal(dones[:, i], fn(env, **params).to(torch.bool))
    for i, fn, params in getattr(env.metrics_manager, "_terms", []):
        assert torch.equal(metrics[:, i], fn(env, **params).to(metrics.dtype))


def test_one_copy_group_write_equals_per_term_copies_with_noise(stepped_env):
    env = stepped_env
    manager = env.observation_manager
    groups = list(manager._groups.values())
    assert any(g.writes_in_one_copy for g in groups)
    assert any(g.corrupt and any(t.noise is not None for t in g.terms) for g in groups)  # noise is covered
    rng_state = env.rng.get_state()
    fused = [t.clone() for t in _flat(manager.compute(update_history=False))]
    env.rng.set_state(rng_state)
    flags = [g.writes_in_one_copy for g in groups]
    try:
        for group in groups:
            group.writes_in_one_copy = False
        per_term = [t.clone() for t in _flat(manager.compute(update_history=False))]
    finally:
        for group, flag in zip(groups, flags):
            group.writes_in_one_copy = flag
    for a, b in zip(fused, per_term):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_finite_rows_are_finite_with_velocities_within_the_speed_bound(dtype):
    from trainrt.envs.manager_based_rl_env import MAX_PHYSICS_SPEED

    big = torch.finfo(dtype).max
    qpos = torch.zeros(9, 5, dtype=dtype)
    qvel = torch.zeros(9, 4, dtype=dtype)
    qpos[0, 1], qvel[1, 3], qpos[2, 0], qvel[3, 2] = float("inf"), float("-inf"), float("nan"), float("nan")
    qpos[4] = big  # huge but finite positions stay valid (a robot far from the origin)
    qvel[5] = -big  # a finite velocity past the bound is a blow-up
    qpos[6, 4] = -0.0
    qvel[7, 0] = 0.99 * MAX_PHYSICS_SPEED
    qvel[8, 1] = -1.01 * MAX_PHYSICS_SPEED
    out = torch.zeros(9, dtype=torch.bool)
    finite_rows(qpos, qvel, out)
    expected = torch.isfinite(qpos).all(dim=1) & (qvel.abs() < MAX_PHYSICS_SPEED).all(dim=1)
    assert torch.equal(out, expected)
    assert expected.tolist() == [False] * 4 + [True, False, True, True, False]


def test_an_interval_event_writing_the_velocities_leaves_no_stale_derived_value():
    """No term marks the cache stale: the event manager bumps the state version after the push's math."""
    env = _make_env("g1_walk_flat")
    env.reset()
    robot, events = env.robot, env.event_manager
    (time_left,) = events.interval_time_left
    with env.state_cache.memoizing():
        before = robot.root_lin_vel_b
        assert robot.root_lin_vel_b is before  # memoized for this version
        version = env.state_cache.version
        time_left.zero_()  # every row's push fires now
        events.draw_interval_()
        events.apply_interval(env.step_dt)
        assert env.state_cache.version > version
        inside = robot.root_lin_vel_b.clone()
    recomputed = robot.root_lin_vel_b  # outside a step every read recomputes
    assert torch.equal(inside, recomputed)
    assert not torch.equal(inside, before)


def test_a_motion_command_moving_its_frame_leaves_no_stale_reference():
    """The clip's frame moves inside the command's math; the command manager bumps the version after it."""
    env = _make_env("g1_motion_tracking")
    env.reset()
    motion = env.command_manager.get_term("motion")
    with env.state_cache.memoizing():
        before = motion.ref_joint_pos
        assert motion.ref_joint_pos is before
        env.command_manager.draw_compute_()
        env.command_manager.apply_compute(env.step_dt)  # one frame on
        assert torch.equal(motion.ref_joint_pos, motion.clip.joint_pos[motion.frame])
        assert not torch.equal(motion.ref_joint_pos, before)
        frames = motion.frame.clone()
        targets_before = motion.relative_body_targets()[0]
        mask = torch.ones(env.num_envs, dtype=torch.bool)
        env.command_manager.draw_reset_()
        env.command_manager.apply_reset(mask)  # new start frames
        assert not torch.equal(motion.frame, frames)
        targets = motion.relative_body_targets()[0].clone()
    assert torch.equal(targets, motion.relative_body_targets()[0])  # recomputed outside the step
    assert not torch.equal(targets, targets_before)


def test_every_step_and_reset_moves_the_version_forward():
    env = _make_env("g1_walk_flat")
    versions = [env.state_cache.version]
    env.reset()
    versions.append(env.state_cache.version)
    for action in _actions(env, 2):
        env.step(action)
        versions.append(env.state_cache.version)
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
