"""``t1_walk_flat``: the velocity task with the Booster T1 builds and steps on the mujoco backend, with the
G1 walk's terms and weights and the T1's own values (gait period, standing height, action scale, feet)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainrt.envs import ManagerBasedRlEnv
from trainrt.robots import T1
from trainrt.tasks import make_task_cfg
from trainrt.tasks.velocity.env_cfg import velocity_env_cfg

NUM_ENVS = 2
JOINT_TERMS = ("joint_pos", "joint_vel", "actions")


def _cfg_or_skip(task: str):
    try:
        return make_task_cfg(task)
    except FileNotFoundError as err:
        pytest.skip(f"assets missing: {err}")


@pytest.fixture(scope="module")
def env() -> ManagerBasedRlEnv:
    return ManagerBasedRlEnv(
        _cfg_or_skip("t1_walk_flat"), sim="mujoco", num_envs=NUM_ENVS, device="cpu", seed=0
    )


def test_the_config_is_the_g1_walk_with_the_t1_values():
    cfg, g1 = _cfg_or_skip("t1_walk_flat"), _cfg_or_skip("g1_walk_flat")
    weights = {name: term.weight for name, term in cfg.rewards.items()}
    g1_weights = {name: term.weight for name, term in g1.rewards.items()}
    # the G1 walk's weights (holosoma weighs its G1 and T1 alike), plus the head, a joint group the G1 lacks
    assert weights == {**g1_weights, "head_deviation_l1": -0.1}
    assert cfg.rewards["head_deviation_l1"].params["joint_names"] == ("AAHead_yaw", "Head_pitch")
    assert cfg.rewards["base_height_l2"].params["target_height"] == T1.standing_root_height()
    assert cfg.commands["gait"].params == {"period_s": 1.0, "foot_offsets": (0.0, 0.5)}  # holosoma T1 gait
    assert cfg.commands["twist"].params == g1.commands["twist"].params
    assert set(cfg.terminations) == set(g1.terminations) and set(cfg.events) == set(g1.events)
    assert cfg.events["foot_friction"].params["geom_names"] == (r"(L|R)_rail_[1-7]",)
    assert cfg.scene.bodies == ("Trunk", "left_foot_link", "right_foot_link")
    assert cfg.scene.contact_bodies == cfg.scene.foot_bodies == ("left_foot_link", "right_foot_link")
    scale = cfg.actions["joint_pos"].params["scale"]
    assert list(scale) == list(T1.joint_names) and set(scale.values()) == {0.75}  # 3 x holosoma's 0.25 rad
    for term in ("foot_contact", "foot_height"):
        assert tuple(next(iter(cfg.observations["critic"].terms[term].params.values()))) == T1.feet


def test_the_env_has_29_joint_terms_and_random_actions_step_without_nans(env):
    assert env.num_actions == 29 and env.action_meta()["joint_names"] == list(T1.joint_names)
    dims = env.observation_manager.group_obs_term_dim
    for group in ("policy", "critic"):
        assert all(dims[group][term] == 29 for term in JOINT_TERMS), dims[group]
    assert env.obs_dims == {"policy": 3 + 3 + 3 + 29 + 29 + 29 + 2, "critic": 98 + 3 + 1 + 2 + 2}
    obs = env.reset()
    assert obs["policy"].shape == (NUM_ENVS, 98) and bool(torch.isfinite(obs["critic"]).all())
    torch.testing.assert_close(
        env.robot.root_pos_w[:, 2], torch.full((NUM_ENVS,), T1.standing_root_height()), atol=1e-6, rtol=0
    )
    g = torch.Generator().manual_seed(1)
    for _ in range(20):
        result = env.step(torch.rand(NUM_ENVS, env.num_actions, generator=g) * 2 - 1)
        assert bool(torch.isfinite(result.reward).all()) and bool(result.valid.all())
        assert all(bool(torch.isfinite(obs).all()) for obs in result.obs.values())
        assert bool(torch.isfinite(env.reward_manager.step_reward).all())


def test_a_robot_whose_joint_names_do_not_match_its_mjcf_is_refused_by_the_task():
    _cfg_or_skip("t1_walk_flat")
    swapped = (T1.joint_names[1], T1.joint_names[0], *T1.joint_names[2:])
    bad = dataclasses.replace(T1, joint_names=swapped, _computed={})
    with pytest.raises(
        ValueError, match=r"RobotDescription.joint_names does not match .*valid .*'AAHead_yaw'"
    ):
        velocity_env_cfg(bad, gait_period_s=1.0)
