"""One declaration and one check of term parameters, for function and class terms of every kind."""

from __future__ import annotations

from typing import ClassVar

import pytest
import torch

from trainrt import mdp
from trainrt.managers import (
    REQUIRED,
    ManagerTermBase,
    merge_term_params,
    term_param_defaults,
    term_param_names,
)
from trainrt.managers.base import resolve_term
from trainrt.managers.reward import RewardTermCfg
from trainrt.tasks import TASKS, make_task_cfg


def test_function_terms_declare_their_keyword_parameters():
    assert term_param_defaults(mdp.track_lin_vel_xy_exp) == {"command_name": REQUIRED, "std": REQUIRED}
    assert term_param_defaults(mdp.alive) == {}
    assert term_param_names(mdp.base_height_l2) == ["target_height"]


def test_class_terms_declare_params_once_including_their_bases():
    assert term_param_defaults(mdp.FeetSlipL2) == {
        "contact_body_names": REQUIRED,
        "body_names": REQUIRED,
        "force_threshold": 1.0,
    }
    assert term_param_defaults(mdp.JointPosLimits) == {"soft_ratio": 1.0}
    assert term_param_names(mdp.UniformVelocityCommand)[:3] == ["lin_vel_x", "lin_vel_y", "ang_vel_z"]


def test_merge_names_unknown_and_missing_params():
    defaults = {"std": REQUIRED, "scale": 2.0}
    assert merge_term_params("t", {"std": 0.5}, defaults) == {"std": 0.5, "scale": 2.0}
    with pytest.raises(ValueError, match=r"unknown params \['sdt'\]; valid: \['scale', 'std'\]"):
        merge_term_params("t", {"std": 0.5, "sdt": 1.0}, defaults)
    with pytest.raises(ValueError, match=r"missing required params \['std'\]"):
        merge_term_params("t", {}, defaults)


class _Env:
    num_envs, device = 2, torch.device("cpu")


def test_resolve_fills_function_defaults_and_leaves_class_params_to_the_instance():
    fn, params = resolve_term(
        "reward", "h", RewardTermCfg(mdp.base_height_l2, 1.0, params={"target_height": 0.7}), _Env()
    )
    assert fn is mdp.base_height_l2 and params == {"target_height": 0.7}
    with pytest.raises(ValueError, match=r"reward term 'h' .*missing required params \['target_height'\]"):
        resolve_term("reward", "h", RewardTermCfg(mdp.base_height_l2, 1.0), _Env())

    class Scaled(ManagerTermBase):
        PARAMS: ClassVar[dict[str, float]] = {"scale": 3.0}

        def __call__(self, env):
            return torch.full((env.num_envs,), self.params["scale"])

    term, params = resolve_term("reward", "s", RewardTermCfg(Scaled, 1.0, params={"scale": 2.0}), _Env())
    assert params == {} and term.params == {"scale": 2.0}
    torch.testing.assert_close(term(_Env()), torch.full((2,), 2.0))


def test_a_class_that_still_takes_params_in_call_is_refused():
    class Legacy(ManagerTermBase):
        def __call__(self, env, scale: float):
            return torch.zeros(env.num_envs)

    with pytest.raises(ValueError, match=r"__call__ must take only \(env\)"):
        resolve_term("reward", "legacy", RewardTermCfg(Legacy, 1.0), _Env())


def test_a_class_off_the_bases_without_params_refuses_params():
    class Plain:
        def __init__(self, cfg, env):
            pass

        def __call__(self, env):
            return torch.zeros(env.num_envs)

    with pytest.raises(ValueError, match=r"unknown params \['scale'\]; valid: \[\]"):
        resolve_term("reward", "plain", RewardTermCfg(Plain, 1.0, params={"scale": 1.0}), _Env())


@pytest.mark.parametrize("task", sorted(TASKS))
def test_every_configured_term_param_is_declared(task):
    cfg = make_task_cfg(task)
    groups = {
        "reward": (cfg.rewards, 1),
        "termination": (cfg.terminations, 1),
        "event": (cfg.events, 2),
        "metric": (cfg.metrics, 1),
        "curriculum": (cfg.curriculum, 2),
    }
    checked = 0
    for kind, (terms, leading) in groups.items():
        for name, term in (terms or {}).items():
            merge_term_params(f"{kind} {name}", term.params, term_param_defaults(term.func, leading))
            checked += 1
    for group in cfg.observations.values():
        for name, term in group.terms.items():
            merge_term_params(f"observation {name}", term.params, term_param_defaults(term.func))
            checked += 1
    for name, term in {**cfg.commands, **cfg.actions}.items():
        merge_term_params(f"{name}", term.params, term_param_defaults(term.cls))
        checked += 1
    assert checked > 10
