"""Command manager: per-row resampling timers, resample on reset for masked rows only, null manager."""

from __future__ import annotations

import pytest
import torch
from managers_toy_scene import UniformTargetCommand, UniformTargetCommandApart, make_env, toy_cfg

from trainrt.managers import CommandTermCfg, NullCommandManager


def _commands(low: float, high: float, cls: type = UniformTargetCommand):
    return {"target": CommandTermCfg(cls, resampling_time_range_s=(low, high))}


@pytest.mark.parametrize("cls", [UniformTargetCommand, UniformTargetCommandApart])
def test_commands_resample_when_their_timer_expires(cls):
    """The same with a term that draws as it resamples (the step's eager path) and one that draws apart
    (the step's draws first, then the math)."""
    env = make_env(toy_cfg(commands=_commands(0.03, 0.03, cls), terminations={}, events={}))
    assert env.command_manager.draws_apart is (cls is UniformTargetCommandApart)
    assert bool(env._inline_drawers) is (cls is UniformTargetCommand)  # which path the step takes
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


class _OwnCompute(UniformTargetCommandApart):
    def compute(self, dt: float) -> None:
        super().compute(dt)


def test_a_term_that_replaces_compute_or_resample_does_not_count_as_drawing_apart():
    env = make_env(toy_cfg(commands=_commands(1.0, 1.0, _OwnCompute), events={}))
    assert not env.command_manager.get_term("target").draws_apart
    assert env.command_manager.terms_drawing_inline() == ["target"]
    assert env._inline_drawers == ["command term 'target'"]
    env = make_env(toy_cfg(commands=_commands(1.0, 1.0, UniformTargetCommand)))
    with pytest.raises(NotImplementedError, match="implements _resample, not _draw_"):
        env.command_manager.get_term("target").draw_reset_(env.rng)
