"""Generic ``trainrt.mdp`` terms on the G1 env (mujoco backend), each against a hand-computed value."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from trainrt import mdp
from trainrt.envs import ManagerBasedRlEnv
from trainrt.managers import CommandTermCfg, EventTermCfg
from trainrt.robots.g1 import G1_FOOT_BODIES
from trainrt.tasks import make_task_cfg

NUM_ENVS = 3


@pytest.fixture(scope="module")
def env() -> ManagerBasedRlEnv:
    try:
        return ManagerBasedRlEnv(
            make_task_cfg("g1_walk_flat"), sim="mujoco", num_envs=NUM_ENVS, device="cpu", seed=4
        )
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")


def _cfg(**params):
    return SimpleNamespace(params=params)


def _write_joint_state(env, joint_pos: torch.Tensor) -> None:
    """Reset every row to the default root pose with ``joint_pos`` (num_envs, J) and zero velocity."""
    layout = mdp.robot_state_layout(env)
    payload = env.reset_payload
    payload["qpos"].copy_(env.robot.default_qpos.to(payload["qpos"].dtype).expand_as(payload["qpos"]))
    payload["qpos"][:, layout.joint_pos] = joint_pos.to(payload["qpos"].dtype)
    payload["qvel"].zero_()
    env.backend.reset(torch.ones(env.num_envs, dtype=torch.bool), payload, env.reset_spec)


def test_state_layout_matches_the_robot_view(env):
    env.reset()
    layout = mdp.robot_state_layout(env)
    torch.testing.assert_close(env.backend.qpos[:, layout.joint_pos].float(), env.robot.joint_pos)
    torch.testing.assert_close(env.backend.qpos[:, layout.root_quat].float(), env.robot.root_quat_w)
    torch.testing.assert_close(env.backend.qvel[:, layout.root_ang_vel].float(), env.robot.root_ang_vel_b)


def test_joint_pos_limits_measures_distance_beyond_the_soft_range(env):
    limits = env.robot.joint_pos_limits
    q = env.robot.default_joint_pos.clone()
    knee = env.robot.joint_names.index("left_knee_joint")
    q[0, knee] = limits[knee, 1] + 0.05  # past the hard limit (the constraint pushes back only at a step)
    q[1, knee] = limits[knee, 1] - 0.01  # inside the hard range, outside a 0.9 soft range
    _write_joint_state(env, q)
    hard = mdp.JointPosLimits(_cfg(soft_ratio=1.0), env)(env)
    torch.testing.assert_close(hard, torch.tensor([0.05, 0.0, 0.0]), atol=1e-5, rtol=0)
    soft = mdp.JointPosLimits(_cfg(soft_ratio=0.9), env)(env)
    margin = 0.05 * float(limits[knee, 1] - limits[knee, 0])
    torch.testing.assert_close(soft[:2], torch.tensor([0.05 + margin, margin - 0.01]), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="soft_ratio must lie in"):
        mdp.JointPosLimits(_cfg(soft_ratio=1.5), env)
    env.reset()


def test_joint_deviation_l1_weights_and_selection(env):
    q = env.robot.default_joint_pos.clone()
    names = env.robot.joint_names
    q[:, names.index("left_hip_yaw_joint")] += 0.2
    q[:, names.index("right_hip_roll_joint")] -= 0.1
    q[:, names.index("left_knee_joint")] += 0.5  # not selected
    _write_joint_state(env, q)
    term = mdp.JointDeviationL1(
        _cfg(
            joint_names=(r".*_hip_roll_joint", r".*_hip_yaw_joint"), joint_weights={r".*_hip_yaw_joint": 5.0}
        ),
        env,
    )
    assert term.joint_names == [
        "left_hip_roll_joint",
        "left_hip_yaw_joint",
        "right_hip_roll_joint",
        "right_hip_yaw_joint",
    ]
    torch.testing.assert_close(term(env), torch.full((NUM_ENVS,), 5.0 * 0.2 + 0.1), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="joint pattern 'nope_joint' matches no joint"):
        mdp.JointDeviationL1(_cfg(joint_names=("nope_joint",)), env)
    env.reset()


def test_action_rate_and_last_action_follow_the_action_manager(env):
    env.reset()
    a1 = torch.full((NUM_ENVS, 29), 0.2)
    a2 = torch.full((NUM_ENVS, 29), -0.1)
    env.step(a1)
    result = env.step(a2)
    kept = ~(result.terminated | result.truncated)
    torch.testing.assert_close(mdp.last_action(env)[kept], a2[kept])
    torch.testing.assert_close(mdp.action_rate_l2(env)[kept], torch.full((NUM_ENVS,), 29 * 0.09)[kept])
    env.reset()


def test_contact_terms_on_a_robot_standing_on_both_feet(env):
    _write_joint_state(env, env.robot.default_joint_pos)
    for _ in range(10):
        env.backend.step()
    count = mdp.UndesiredContacts(_cfg(contact_body_names=G1_FOOT_BODIES), env)(env)
    torch.testing.assert_close(count, torch.full((NUM_ENVS,), 2.0))
    contact = mdp.FootContact(_cfg(contact_body_names=G1_FOOT_BODIES, force_threshold=1.0), env)(env)
    torch.testing.assert_close(contact, torch.ones(NUM_ENVS, 2))
    heavy = mdp.FootContact(_cfg(contact_body_names=G1_FOOT_BODIES, force_threshold=1.0e5), env)(env)
    torch.testing.assert_close(heavy, torch.zeros(NUM_ENVS, 2))
    heights = mdp.BodyHeight(_cfg(body_names=G1_FOOT_BODIES), env)(env)
    assert bool((heights > 0.0).all()) and bool((heights < 0.1).all())
    torque = mdp.joint_torques_l2(env)
    torch.testing.assert_close(torque, env.robot.applied_torque.square().sum(dim=1))
    assert bool((torque > 0).all())  # holding the crouch takes torque
    env.reset()


def test_reset_root_state_writes_only_masked_payload_rows(env):
    cfg = EventTermCfg(
        mdp.ResetRootStateUniform,
        mode="reset",
        params={"pose_range": {"z": (0.1, 0.1)}, "velocity_range": {"x": (0.5, 0.5), "yaw": (1.0, 1.0)}},
    )
    term = mdp.ResetRootStateUniform(cfg, env)
    payload = env.reset_payload
    payload["qpos"].copy_(env.robot.default_qpos.to(payload["qpos"].dtype).expand_as(payload["qpos"]))
    payload["qvel"].zero_()
    before_qpos, before_qvel = payload["qpos"].clone(), payload["qvel"].clone()
    mask = torch.tensor([True, False, True])
    term(env, mask)
    torch.testing.assert_close(payload["qpos"][1], before_qpos[1], atol=0, rtol=0)
    torch.testing.assert_close(payload["qvel"][1], before_qvel[1], atol=0, rtol=0)
    torch.testing.assert_close(payload["qpos"][mask, 2].float(), before_qpos[mask, 2].float() + 0.1)
    torch.testing.assert_close(payload["qvel"][mask, :6].float(), torch.tensor([[0.5, 0, 0, 0, 0, 1.0]] * 2))
    with pytest.raises(ValueError, match=r"unknown range keys \['w'\]"):
        mdp.ResetRootStateUniform(
            EventTermCfg(mdp.ResetRootStateUniform, "reset", {"pose_range": {"w": (0, 1)}}), env
        )
    env.reset()


def test_friction_randomization_is_startup_only_and_validates_names(env):
    with pytest.raises(ValueError, match="startup only"):
        mdp.RandomizeGeomFriction(
            EventTermCfg(
                mdp.RandomizeGeomFriction, "reset", {"geom_names": ("floor",), "friction_range": (0.5, 1)}
            ),
            env,
        )
    with pytest.raises(ValueError, match="geom pattern 'no_geom' matches no geom"):
        mdp.RandomizeGeomFriction(
            EventTermCfg(
                mdp.RandomizeGeomFriction, "startup", {"geom_names": ("no_geom",), "friction_range": (0.5, 1)}
            ),
            env,
        )


def test_command_terms_reject_unknown_and_bad_params(env):
    with pytest.raises(ValueError, match=r"unknown params \['speed'\]"):
        mdp.UniformVelocityCommand(CommandTermCfg(mdp.UniformVelocityCommand, params={"speed": 1.0}), env)
    with pytest.raises(ValueError, match="lin_vel_x must be a finite"):
        mdp.UniformVelocityCommand(
            CommandTermCfg(mdp.UniformVelocityCommand, params={"lin_vel_x": (1.0, -1.0)}), env
        )
    with pytest.raises(ValueError, match="rel_standing_envs must lie in"):
        mdp.UniformVelocityCommand(
            CommandTermCfg(mdp.UniformVelocityCommand, params={"rel_standing_envs": 2.0}), env
        )
    with pytest.raises(ValueError, match="period_s must be a positive number"):
        mdp.GaitPhaseCommand(CommandTermCfg(mdp.GaitPhaseCommand, params={"period_s": 0.0}), env)


def test_gait_clock_phases_any_number_of_feet():
    """A four-foot trot clock: each foot's phase is the clock's plus its offset, wrapped into [0, 1)."""
    fake_env = SimpleNamespace(num_envs=2, device="cpu", step_dt=0.02)
    trot = (0.0, 0.5, 0.5, 0.0)
    cfg = CommandTermCfg(mdp.GaitPhaseCommand, params={"period_s": 1.0, "foot_offsets": trot})
    gait = mdp.GaitPhaseCommand(cfg, fake_env)
    gait.phase.copy_(torch.tensor([0.1, 0.75]))
    expected = torch.tensor([[0.1, 0.6, 0.6, 0.1], [0.75, 0.25, 0.25, 0.75]])
    torch.testing.assert_close(gait.foot_phase, expected)
    assert gait.foot_phase.shape == (2, len(trot))
    for bad in ((), (0.0, 1.0), "0.5"):
        with pytest.raises(ValueError, match="foot_offsets must be a non-empty sequence"):
            mdp.GaitPhaseCommand(CommandTermCfg(mdp.GaitPhaseCommand, params={"foot_offsets": bad}), fake_env)


def test_feet_contact_phase_needs_one_contact_body_per_clocked_foot(env, monkeypatch):
    four = CommandTermCfg(mdp.GaitPhaseCommand, params={"foot_offsets": (0.0, 0.5, 0.5, 0.0)})
    terms = dict(env.command_manager._terms, gait=mdp.GaitPhaseCommand(four, env))
    monkeypatch.setattr(env.command_manager, "_terms", terms)
    with pytest.raises(ValueError, match=r"lists 2 bodies .* clocks 4 feet"):
        mdp.FeetContactPhase(env.cfg.rewards["feet_contact_phase"], env)
