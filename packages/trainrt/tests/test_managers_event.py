"""Event manager: startup once, reset events writing the payload, interval events on per-row timers."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch
from managers_toy_scene import CountCalls, make_env, toy_cfg

from trainrt.managers import EventTerm, EventTermCfg, NullEventManager


def test_startup_event_runs_once_for_all_rows():
    env = make_env(toy_cfg(events={"boot": EventTermCfg(CountCalls, "startup")}))
    boot = env.event_manager.get_term("boot")
    assert boot.calls == 1 and boot.count.tolist() == [1] * env.num_envs
    env.reset()
    env.step(torch.zeros(env.num_envs, env.num_actions))
    assert boot.calls == 1


def test_interval_event_fires_on_each_rows_timer():
    """An `EventTerm` on an interval: drawn first, then applied, every step."""
    events = {"tick": EventTermCfg(CountCalls, "interval", interval_range_s=(0.03, 0.03))}
    env = make_env(toy_cfg(events=events, terminations={}))  # step_dt 0.01 -> fires every 3rd step
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
    assert tick.draws == 9  # one draw per call, made before it


def test_interval_timers_are_per_row_and_in_range():
    events = {"tick": EventTermCfg(CountCalls, "interval", interval_range_s=(0.02, 0.08))}
    env = make_env(toy_cfg(events=events), num_envs=16)
    (time_left,) = env.event_manager.interval_time_left
    assert torch.all((time_left >= 0.02) & (time_left <= 0.08))
    assert time_left.unique().numel() > 1


def test_interval_timer_restarts_when_a_row_resets():
    events = {"tick": EventTermCfg(CountCalls, "interval", interval_range_s=(0.03, 0.03))}
    env = make_env(toy_cfg(events=events, episode_length_s=0.02))  # episodes of 2 steps
    env.reset()
    tick = env.event_manager.get_term("tick")
    for _ in range(6):
        env.step(torch.zeros(env.num_envs, env.num_actions))
    assert tick.count.tolist() == [0] * env.num_envs  # each reset restarts the 3-step timer


class ShiftRootX(EventTerm):
    """Reset event without random numbers: shift the payload's root x by ``offset``."""

    PARAMS: ClassVar[dict[str, float]] = {"offset": 0.0}

    def draw_(self, generator: torch.Generator) -> None:
        """Nothing to draw."""

    def apply(self, env, env_mask: torch.Tensor) -> None:
        qpos = env.reset_payload["qpos"]
        qpos[:, 0] = torch.where(env_mask, qpos[:, 0] + self.params["offset"], qpos[:, 0])


def _shift_root_x(env, env_mask, offset: float):
    """The same as a plain function, which draws as it runs (startup events only)."""
    qpos = env.reset_payload["qpos"]
    qpos[:, 0] = torch.where(env_mask, qpos[:, 0] + offset, qpos[:, 0])


def test_reset_events_write_the_payload_of_masked_rows():
    env = make_env(toy_cfg(events={"shift": EventTermCfg(ShiftRootX, "reset", params={"offset": 3.0})}))
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
        make_env(toy_cfg(events={"shift": EventTermCfg(ShiftRootX, "reset", params={"ofset": 1.0})}))


def test_no_events_uses_the_null_manager():
    env = make_env(toy_cfg(events={}))
    assert isinstance(env.event_manager, NullEventManager)
    env.reset()
    env.step(torch.zeros(env.num_envs, env.num_actions))
    assert "no event terms" in str(env.event_manager)


def test_reset_events_draw_once_per_reset():
    events = {"count": EventTermCfg(CountCalls, "reset")}
    env = make_env(toy_cfg(events=events, episode_length_s=0.02))  # episodes of 2 steps
    env.reset()
    count = env.event_manager.get_term("count")
    assert count.draws == count.calls == 1  # the full reset
    for _ in range(4):
        env.step(torch.zeros(env.num_envs, env.num_actions))
    assert count.draws == count.calls == 5  # every step runs the reset path, with fixed shapes
    assert count.count.tolist() == [3] * env.num_envs  # the full reset and two time-outs


class _OwnCall(CountCalls):
    def __call__(self, env, env_mask: torch.Tensor) -> None:
        self.apply(env, env_mask)


class _NoDraw(EventTerm):
    def apply(self, env, env_mask: torch.Tensor) -> None:
        """Nothing."""


@pytest.mark.parametrize("mode", ["reset", "interval"])
def test_reset_and_interval_events_off_the_draw_protocol_are_refused_by_name(mode):
    timer = {"interval_range_s": (0.02, 0.04)} if mode == "interval" else {}

    def build(func, **params):
        make_env(toy_cfg(events={"bad": EventTermCfg(func, mode, params=params, **timer)}))

    with pytest.raises(
        TypeError, match=r"event 'bad' \(.*_shift_root_x\) draws as it runs: .*draw_\(generator\)"
    ):
        build(_shift_root_x, offset=1.0)
    with pytest.raises(
        TypeError, match=r"event 'bad' \(.*_OwnCall\) overrides __call__.*apply\(env, env_mask\)"
    ):
        build(_OwnCall)
    with pytest.raises(TypeError, match=r"event 'bad' \(.*_NoDraw\) does not implement draw_: "):
        build(_NoDraw)


def test_startup_events_may_be_plain_functions():
    env = make_env(toy_cfg(events={"shift": EventTermCfg(_shift_root_x, "startup", params={"offset": 1.0})}))
    assert env.event_manager.mode_terms("startup") == ["shift"]
