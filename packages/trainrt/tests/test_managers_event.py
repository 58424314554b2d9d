"""Event manager: startup once, reset events writing the payload, interval events on per-row timers."""

from __future__ import annotations

import pytest
import torch
from managers_toy_scene import CountCalls, CountCallsApart, make_env, toy_cfg

from trainrt.managers import EventTermCfg, NullEventManager


def test_startup_event_runs_once_for_all_rows():
    env = make_env(toy_cfg(events={"boot": EventTermCfg(CountCalls, "startup")}))
    boot = env.event_manager.get_term("boot")
    assert boot.calls == 1 and boot.count.tolist() == [1] * env.num_envs
    env.reset()
    env.step(torch.zeros(env.num_envs, env.num_actions))
    assert boot.calls == 1


@pytest.mark.parametrize("cls", [CountCalls, CountCallsApart])
def test_interval_event_fires_on_each_rows_timer(cls):
    """The same for an event that draws as it runs and an `EventTerm` (drawn first, then applied)."""
    events = {"tick": EventTermCfg(cls, "interval", interval_range_s=(0.03, 0.03))}
    env = make_env(toy_cfg(events=events, terminations={}))  # step_dt 0.01 -> fires every 3rd step
    assert env.event_manager.draws_apart is (cls is CountCallsApart)
    env.reset()
    tick = env.event_manager.get_term("tick")
    action = torch.zeros(env.num_envs, env.num_actions)
    history = []
    for _ in range(9):
        env.step(action)
        history.append(tick.count[0].item())
    assert history == [0, 0, 1, 1, 1, 2, 2, 2, 3]
    assert tick.count.tolist() == [3] * env.num_envs
    assert tick.calls == 9  # called every step with a fixed-shape mask
    if cls is CountCallsApart:
        assert tick.draws == 9  # one draw per call, made before it


def test_interval_timers_are_per_row_and_in_range():
    events = {"tick": EventTermCfg(CountCalls, "interval", interval_range_s=(0.02, 0.08))}
    env = make_env(toy_cfg(events=events), num_envs=16)
    (time_left,) = env.event_manager.interval_time_left
    assert torch.all((time_left >= 0.02) & (time_left <= 0.08))
    assert time_left.unique().numel() > 1


@pytest.mark.parametrize("cls", [CountCalls, CountCallsApart])
def test_interval_timer_restarts_when_a_row_resets(cls):
    events = {"tick": EventTermCfg(cls, "interval", interval_range_s=(0.03, 0.03))}
    env = make_env(toy_cfg(events=events, episode_length_s=0.02))  # episodes of 2 steps
    env.reset()
    tick = env.event_manager.get_term("tick")
    for _ in range(6):
        env.step(torch.zeros(env.num_envs, env.num_actions))
    assert tick.count.tolist() == [0] * env.num_envs  # each reset restarts the 3-step timer


def _shift_root_x(env, env_mask, offset: float):
    qpos = env.reset_payload["qpos"]
    qpos[:, 0] = torch.where(env_mask, qpos[:, 0] + offset, qpos[:, 0])


def test_reset_events_write_the_payload_of_masked_rows():
    env = make_env(toy_cfg(events={"shift": EventTermCfg(_shift_root_x, "reset", params={"offset": 3.0})}))
    env.reset()
    assert env.robot.root_pos_w[:, 0].tolist() == [3.0] * env.num_envs


def test_bad_event_configs_fail_early():
    with pytest.raises(ValueError, match="mode"):
        EventTermCfg(CountCalls, "sometimes")
    with pytest.raises(ValueError, match="interval_range_s"):
        EventTermCfg(CountCalls, "interval")
    with pytest.raises(ValueError, match="interval_range_s"):
        EventTermCfg(CountCalls, "reset", interval_range_s=(1.0, 2.0))
    with pytest.raises(ValueError, match="shift"):
        make_env(toy_cfg(events={"shift": EventTermCfg(_shift_root_x, "reset", params={"ofset": 1.0})}))


def test_no_events_uses_the_null_manager():
    env = make_env(toy_cfg(events={}))
    assert isinstance(env.event_manager, NullEventManager)
    env.reset()
    env.step(torch.zeros(env.num_envs, env.num_actions))
    assert "no event terms" in str(env.event_manager)


def test_reset_events_as_event_terms_draw_once_per_reset_and_say_when_a_function_draws_inline():
    events = {"count": EventTermCfg(CountCallsApart, "reset")}
    env = make_env(toy_cfg(events=events, episode_length_s=0.02))  # episodes of 2 steps
    env.reset()
    count = env.event_manager.get_term("count")
    assert count.draws == count.calls == 1  # the full reset
    for _ in range(4):
        env.step(torch.zeros(env.num_envs, env.num_actions))
    assert count.draws == count.calls == 5  # every step runs the reset path, with fixed shapes
    assert count.count.tolist() == [3] * env.num_envs  # the full reset and two time-outs
    events["shift"] = EventTermCfg(_shift_root_x, "reset", params={"offset": 0.0})
    env = make_env(toy_cfg(events=events))
    assert not env.event_manager.draws_apart
    assert env.event_manager.terms_drawing_inline() == ["shift"]
