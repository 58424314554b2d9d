"""Terms whose outputs a manager cannot take (wrong shape, a termination that is not bool, NaN) are named before
training: `ManagerBasedRlEnv.check_term_outputs`, which the runner's set-up probe calls."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch
from managers_toy_scene import make_env, toy_cfg

from trainrt.managers import (
    EventTermCfg,
    MetricTermCfg,
    ObsGroupCfg,
    ObsTermCfg,
    RewardTermCfg,
    TerminationTermCfg,
)
from trainrt.mdp import time_out


def _column(env):
    return torch.ones(env.num_envs, 1, device=env.device)


def _half(env):
    return torch.full((env.num_envs,), 0.5, device=env.device)


def _nan(env):
    return torch.full((env.num_envs, 2), float("nan"), device=env.device)


def _checked(**overrides):
    env = make_env(toy_cfg(**overrides))
    env.reset()
    env.check_term_outputs()


def test_the_toy_tasks_terms_pass():
    env = make_env()
    env.reset()
    env.check_term_outputs()
    env.step(torch.zeros(env.num_envs, env.num_actions))
    env.check_term_outputs()


def test_a_reward_of_the_wrong_shape_is_named_with_the_fix():
    with pytest.raises(
        ValueError, match=r"reward term 'column' must return a \(num_envs,\) tensor, got shape \(4, 1\)"
    ):
        _checked(rewards={"column": RewardTermCfg(_column, weight=1.0)})


def test_a_termination_that_is_not_bool_is_named():
    terms = {"time_out": TerminationTermCfg(time_out, time_out=True), "half": TerminationTermCfg(_half)}
    with pytest.raises(ValueError, match=r"termination term 'half' .* got torch.float32 \(compare"):
        _checked(terminations=terms)


def test_a_metric_of_the_wrong_shape_and_a_nan_observation_are_named():
    with pytest.raises(ValueError, match=r"metric term 'column' must return a \(num_envs,\) tensor"):
        _checked(metrics={"column": MetricTermCfg(_column)})
    policy = dataclasses.replace(toy_cfg().observations["policy"])
    group = ObsGroupCfg({**policy.terms, "broken": ObsTermCfg(_nan)})
    with pytest.raises(ValueError, match=r"observation term 'policy/broken' returned NaN or infinite values"):
        _checked(observations={**toy_cfg().observations, "policy": group})


@pytest.mark.parametrize("weight", [float("nan"), "2.0", [1.0, 2.0], None, True])
def test_a_reward_weight_that_is_not_a_finite_number_is_named(weight):
    with pytest.raises(ValueError, match=r"reward term 'alive': weight must be a finite number"):
        make_env(toy_cfg(rewards={"alive": RewardTermCfg(_half, weight=weight)}))


def test_a_term_function_that_does_not_take_env_first_is_named_with_the_fix():
    def above(max_height=1.0):  # forgot env: the manager would pass env as max_height
        return max_height

    with pytest.raises(
        ValueError, match=r"takes \(env\) first, then its params as keywords; it starts with \(max_height\)"
    ):
        make_env(toy_cfg(rewards={"above": RewardTermCfg(above, weight=1.0, params={"max_height": 0.5})}))
    with pytest.raises(ValueError, match=r"it starts with \(nothing\)"):
        make_env(toy_cfg(rewards={"none": RewardTermCfg(lambda: 0.0, weight=1.0)}))


def test_an_event_function_without_the_row_mask_is_named_instead_of_getting_it_as_a_param():
    def push(env, strength=1.0):  # forgot env_mask: the manager would pass the mask as strength
        return None

    def push_ids(env, env_ids):  # an env-ids habit from other stacks: it gets a bool mask, not ids
        return None

    for func in (push, push_ids):
        name = list(inspect.signature(func).parameters)[1]
        with pytest.raises(
            ValueError,
            match=rf"its second parameter '{name}' would receive the rows to act on, a bool mask of shape "
            r"\(num_envs,\) \(not row ids\); write the function as \(env, env_mask, \.\.\.\)",
        ):
            make_env(toy_cfg(events={"push": EventTermCfg(func, "startup")}))
    make_env(toy_cfg(events={"push": EventTermCfg(lambda env, mask, strength=1.0: None, "startup")}))
