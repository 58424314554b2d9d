"""Presets and the config schema: canonical values, the CPU demo, strictness, JSON round trip."""

import pytest
from pydantic import ValidationError

from trainrt.algos import FlashSacConfig, SacConfig
from trainrt.config import PRESETS, TrainConfig, cpu_demo_preset, preset


def test_every_algo_task_pair_has_a_preset():
    assert set(PRESETS) == {
        ("sac", "g1_walk_flat"),
        ("sac", "g1_motion_tracking"),
        ("flashsac", "g1_walk_flat"),
        ("flashsac", "g1_motion_tracking"),
        ("sac", "t1_walk_flat"),
        ("flashsac", "t1_walk_flat"),
        ("sac", "g1_walk_rough"),
    }
    for (algo, task), factory in PRESETS.items():
        cfg = factory()
        assert (cfg.algo.name, cfg.task.name) == (algo, task)


def test_canonical_sac_walk_preset_values():
    cfg = preset("sac", "g1_walk_flat")
    assert isinstance(cfg.algo.params, SacConfig)
    assert cfg.algo.num_envs == 2048
    assert cfg.sim.backend == "mjwarp" and cfg.sim.device is None
    assert cfg.algo.steps_per_iteration == 8
    # 8 updates of 8192 per vector step, actor every 4th, tau 0.125 (the reference schedule)
    assert cfg.algo.params.updates_per_iteration == 64
    assert cfg.algo.params.batch_size == 8192
    assert cfg.algo.params.actor_update_period == 4
    # a replay of 4096 steps per env; the SAC tracking preset keeps the SAC default of 1024 (docs/perf/tuning/0018)
    assert cfg.algo.params.buffer_size_per_env == 4096
    assert preset("sac", "g1_motion_tracking").algo.params.buffer_size_per_env == 1024
    assert cfg.algo.params.gamma == pytest.approx(0.97)
    assert cfg.algo.params.n_step == 1
    assert cfg.algo.params.tau == pytest.approx(0.125)
    assert cfg.algo.params.actor_lr == pytest.approx(3e-4) and cfg.algo.params.critic_lr == pytest.approx(
        3e-4
    )
    # cosine decay of the actor and critic learning rates to 0.1x over the run's updates, no warm-up
    assert (cfg.algo.params.lr_schedule, cfg.algo.params.lr_final_ratio) == ("warmup_cosine", 0.1)
    assert cfg.algo.params.lr_warmup_updates == 0 and cfg.algo.params.lr_decay_updates is None
    assert preset("sac", "g1_motion_tracking").algo.params.lr_schedule == "constant"
    assert cfg.training.cuda_graph is True
    assert cfg.training.collector_steps_per_replay == 4
    assert cfg.training.tail_window == 100
    # the solver stops after 5 iterations on the two canonical workloads (docs/perf/tuning/0022); the others keep the model's 10
    assert (cfg.sim.solver_iterations, cfg.sim.ls_iterations) == (5, None)
    canonical = {("sac", "g1_walk_flat"), ("flashsac", "g1_motion_tracking")}
    assert preset("flashsac", "g1_motion_tracking").sim.solver_iterations == 5
    others = [factory() for pair, factory in PRESETS.items() if pair not in canonical]
    assert len(others) == 5 and all(other.sim.solver_iterations is None for other in others)


def test_canonical_flashsac_tracking_preset_values():
    cfg = preset("flashsac", "g1_motion_tracking")
    assert isinstance(cfg.algo.params, FlashSacConfig)
    assert cfg.algo.num_envs == 2048
    assert cfg.sim.backend == "mjwarp"
    # 4 updates of 2048 per vector step, actor every 2nd, tau 0.05 (the reference schedule)
    assert cfg.algo.params.batch_size == 2048
    assert cfg.algo.params.updates_per_iteration == 32
    assert cfg.algo.params.actor_update_period == 2
    assert cfg.algo.params.buffer_size_per_env == 4096
    assert cfg.algo.params.gamma == pytest.approx(0.99)
    assert cfg.algo.params.n_step == 3
    assert cfg.algo.params.tau == pytest.approx(0.05)
    assert cfg.algo.params.lr_schedule == "warmup_cosine" and cfg.algo.params.lr_final_ratio == 0.5
    # the linear actor head (the authors' unit-norm head tracked worse: adr/0016)
    assert cfg.algo.params.actor_head == "linear"
    assert (cfg.algo.params.log_std_min, cfg.algo.params.log_std_max) == (-5.0, 0.0)
    # unscaled rewards on the SAC-style support of the task's returns (adr/0017)
    assert cfg.algo.params.reward_scaling is False
    assert (cfg.algo.params.v_min, cfg.algo.params.v_max) == (-13.0, 13.0)


@pytest.mark.parametrize(("algo", "task"), list(PRESETS))
def test_gpu_presets_use_their_algorithms_reference_schedule(algo, task):
    cfg = preset(algo, task)
    # the reference schedule is the learner class's defaults (its one home), which every preset keeps
    defaults = type(cfg.algo.params)()
    for key in ("updates_per_iteration", "batch_size", "actor_update_period", "tau"):
        assert getattr(cfg.algo.params, key) == getattr(defaults, key), key
    assert cfg.algo.params.updates_per_iteration == {"sac": 64, "flashsac": 32}[algo]
    # all updates of an iteration fit one learner graph: the actor period divides them
    assert cfg.algo.params.updates_per_iteration % cfg.algo.params.actor_update_period == 0
    assert cfg.algo.steps_per_iteration % cfg.training.collector_steps_per_replay == 0
    assert cfg.training.overlap is True and cfg.training.compile_learner is True


@pytest.mark.parametrize(("algo", "task"), list(PRESETS))
def test_cpu_demo_is_small_and_on_the_cpu(algo, task):
    demo = cpu_demo_preset(algo, task)
    canonical = preset(algo, task)
    assert demo.algo.num_envs < canonical.algo.num_envs
    assert demo.algo.params.batch_size < canonical.algo.params.batch_size
    assert demo.algo.params.actor_hidden_dim < canonical.algo.params.actor_hidden_dim
    assert demo.sim.device == "cpu"
    assert demo.sim.backend == "mujoco"
    assert demo.algo.params.bf16_autocast is False
    # same learning target as the canonical preset
    assert demo.algo.params.gamma == canonical.algo.params.gamma
    assert demo.task == canonical.task
    # and the same physics: the solver's iteration limits travel with it
    assert (demo.sim.solver_iterations, demo.sim.ls_iterations) == (
        canonical.sim.solver_iterations,
        canonical.sim.ls_iterations,
    )


def test_unknown_pair_names_the_valid_ones():
    with pytest.raises(ValueError, match="valid: sac/g1_walk_flat"):
        preset("ppo", "g1_walk_flat")


def test_config_round_trips_through_json():
    for factory in PRESETS.values():
        cfg = factory()
        assert TrainConfig.model_validate_json(cfg.model_dump_json()) == cfg


@pytest.mark.parametrize("section", ["algo", "task", "sim", "training"])
def test_every_section_forbids_unknown_fields(section):
    data = preset("sac", "g1_walk_flat").model_dump()
    data[section]["surprise"] = 1
    with pytest.raises(ValidationError, match="surprise"):
        TrainConfig.model_validate(data)


def test_algo_name_selects_the_params_model():
    data = preset("sac", "g1_walk_flat").model_dump()
    data["algo"]["name"] = "flashsac"
    # SAC-only parameters are not FlashSAC parameters
    with pytest.raises(ValidationError, match="autotune_alpha"):
        TrainConfig.model_validate(data)


@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking", "t1_walk_flat"])
def test_sac_support_is_sized_to_the_tasks_dt_scaled_returns(task):
    from trainrt.config.presets import G1_CONTROL_DT
    from trainrt.tasks import make_task_cfg

    params = preset("sac", task).algo.params
    best_step = sum(t.weight for t in make_task_cfg(task).rewards.values() if t.weight > 0) * G1_CONTROL_DT
    best_return = best_step / (1.0 - params.gamma)
    assert params.v_min == -params.v_max
    # the largest achievable return fits, and the support is not so wide that few atoms cover the returns
    assert best_return <= params.v_max <= 2.0 * best_return


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_the_t1_walk_presets_are_the_g1_walks(algo):
    t1, g1 = preset(algo, "t1_walk_flat").model_dump(), preset(algo, "g1_walk_flat").model_dump()
    assert t1["task"].pop("name") == "t1_walk_flat" and g1["task"].pop("name") == "g1_walk_flat"
    # the G1 walk's 5 solver iterations (docs/perf/tuning/0022) were measured on the G1: the T1 keeps the model's 10
    assert t1["sim"].pop("solver_iterations") is None
    g1["sim"].pop("solver_iterations")
    assert t1 == g1
