"""Command manager: per-row resampling timers, resample on reset for masked rows only, null manager."""

from __future__ import annotations

import pytest
import torch
from managers_toy_scene import UniformTargetCommand, make_env, toy_cfg

from trainrt.managers import CommandTerm, CommandTermCfg, NullCommandManager


def _commands(low: float, high: float, cls: type = UniformTargetCommand):
    return {"target": CommandTermCfg(cls, resampling_time_range_s=(low, high))}


def test_commands_resample_when_their_timer_expires():
    """The step's draws first, then the math: expired rows take their new command."""
    env = make_env(toy_cfg(commands=_commands(0.03, 0.03), terminations={}, events={}))
    env.reset()
    command = env.command_manager.command("target")
    changed = []
    for _ in range(7):
        before = command.clone()
        env.step(torch.zeros(env.num_envs, env.num_actions))
        changed.append(bool((command != before).all(dim=1).all()))
    assert changed == [False, False, True, False, False, True, False]
    assert env.command_manager.get_term("target").updates == 7


def test_reset_resamples_only_the_reset_rows():
    env = make_env(toy_cfg(commands=_commands(10.0, 10.0)))
    env.reset()
    command = env.command_manager.command("target")
    before = command.clone()
    mask = torch.tensor([False, True, False, True])
    env.command_manager.reset(mask)
    changed = (command != before).any(dim=1)
    assert changed.tolist() == mask.tolist()


def test_timers_are_drawn_per_row_in_range():
    env = make_env(toy_cfg(commands=_commands(0.5, 2.0)), num_envs=16)
    env.reset()
    time_left = env.command_manager.get_term("target").time_left
    assert torch.all((time_left >= 0.5) & (time_left <= 2.0))
    assert time_left.unique().numel() > 1


def test_command_observation_and_table():
    env = make_env()
    obs = env.reset()
    torch.testing.assert_close(obs["policy"][:, 6:8], env.command_manager.command("target"))
    assert "UniformTargetCommand" in str(env.command_manager)


def test_no_commands_uses_the_null_manager():
    cfg = toy_cfg(commands={})
    del cfg.observations["policy"].terms["target"]
    env = make_env(cfg)
    assert isinstance(env.command_manager, NullCommandManager)
    env.reset()
    env.step(torch.zeros(env.num_envs, env.num_actions))
    with pytest.raises(ValueError, match="no commands"):
        env.command_manager.command("target")


def test_bad_command_configs_fail_early():
    with pytest.raises(ValueError, match="resampling_time_range_s"):
        CommandTermCfg(UniformTargetCommand, resampling_time_range_s=(2.0, 1.0))
    with pytest.raises(ValueError, match="CommandTerm"):
        make_env(toy_cfg(commands={"target": CommandTermCfg(dict)}))


class _OwnResample(UniformTargetCommand):
    def _resample(self, env_mask: torch.Tensor) -> None:
        self.resample(env_mask)


class _OwnCompute(UniformTargetCommand):
    def compute(self, dt: float) -> None:
        super().compute(dt)


class _NoDrawnResample(UniformTargetCommand):
    _resample_drawn = CommandTerm._resample_drawn


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (_OwnResample, r"_OwnResample overrides _resample, which the env no longer calls: "),
        (_OwnCompute, r"_OwnCompute overrides compute, which the env no longer calls: "),
        (_NoDrawnResample, r"_NoDrawnResample does not implement _resample_drawn: "),
    ],
)
def test_a_term_off_the_draw_protocol_is_refused_at_env_build_by_name(cls, message):
    with pytest.raises(TypeError, match=message + r".*_draw_\(generator\).*_resample_drawn\(env_mask\)"):
        make_env(toy_cfg(commands=_commands(1.0, 1.0, cls), events={}))
