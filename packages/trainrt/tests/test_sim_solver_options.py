"""``sim.solver_iterations`` and ``sim.ls_iterations``: unset, the task's model keeps its own limits; set, every
model the scene builds (the env's, the benchmarks') carries them, they survive config.json, and a bad value
names the key."""

import pytest
from g1_assets import require_g1_assets

from trainrt.config import OverrideError, TrainConfig, resolve_train_config
from trainrt.runner.build import build_env, make_env_cfg
from trainrt.tasks import make_task_cfg


@pytest.fixture
def g1_assets():
    require_g1_assets()


def _cfg(*overrides: str) -> TrainConfig:
    cfg, _ = resolve_train_config("sac", "g1_walk_flat", "mujoco", ["algo.num_envs=1", *overrides], "cpu")
    return cfg


def test_unset_limits_leave_the_tasks_model_as_it_is(g1_assets):
    # the preset sets 5 (docs/perf/tuning/0022); null gives the model's own
    cfg = _cfg("sim.solver_iterations=null")
    assert make_env_cfg(cfg).scene.model_factory is make_task_cfg(cfg.task).scene.model_factory
    opt = make_env_cfg(cfg).scene.model_factory().opt
    assert (opt.iterations, opt.ls_iterations) == (10, 20)


def test_set_limits_reach_the_model_and_the_env(g1_assets):
    cfg = _cfg("sim.solver_iterations=5", "sim.ls_iterations=7")
    opt = make_env_cfg(cfg).scene.model_factory().opt
    assert (opt.iterations, opt.ls_iterations) == (5, 7)
    env = build_env(cfg)
    assert (env.backend.mj_model.opt.iterations, env.backend.mj_model.opt.ls_iterations) == (5, 7)
    reloaded = TrainConfig.model_validate_json(cfg.model_dump_json())  # what config.json holds
    assert (reloaded.sim.solver_iterations, reloaded.sim.ls_iterations) == (5, 7)


def test_one_limit_alone_keeps_the_other(g1_assets):
    opt = make_env_cfg(_cfg("sim.ls_iterations=30")).scene.model_factory().opt
    assert (opt.iterations, opt.ls_iterations) == (5, 30)  # the preset's solver limit stays
    opt = make_env_cfg(_cfg("sim.solver_iterations=null", "sim.ls_iterations=30")).scene.model_factory().opt
    assert (opt.iterations, opt.ls_iterations) == (10, 30)


@pytest.mark.parametrize("key", ["sim.solver_iterations", "sim.ls_iterations"])
def test_a_limit_below_one_is_refused_naming_the_key(key):
    with pytest.raises(OverrideError, match=key.split(".")[1]):
        _cfg(f"{key}=0")
