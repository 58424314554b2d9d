"""Action manager and JointPositionAction: targets, scales, joint selection, action history, reset ctrl."""

from __future__ import annotations

import mujoco
import pytest
import torch
from managers_toy_scene import make_env, toy_cfg

from trainrt.envs import SceneCfg
from trainrt.managers import ActionTermCfg, JointPositionAction

DEFAULT = torch.tensor([0.3, 0.0], dtype=torch.float64)


def _actions(**params):
    return {"joint_pos": ActionTermCfg(JointPositionAction, params)}


def test_ctrl_is_default_plus_scaled_action():
    env = make_env(toy_cfg(actions=_actions(scale={"hinge_a": 0.5, "hinge_b": 0.25})))
    env.reset()
    torch.testing.assert_close(env.backend.ctrl, DEFAULT.expand(env.num_envs, -1).to(env.backend.ctrl.dtype))
    action = torch.linspace(-1, 1, env.num_envs * 2).reshape(env.num_envs, 2)
    env.step(action)
    expected = DEFAULT.to(torch.float32) + action * torch.tensor([0.5, 0.25])
    torch.testing.assert_close(env.backend.ctrl.to(torch.float32), expected)
    torch.testing.assert_close(env.action_manager.get_term("joint_pos").processed_action, expected)


def test_without_default_offset_and_with_clipping():
    env = make_env(toy_cfg(actions=_actions(scale=2.0, use_default_offset=False, clip_to_joint_range=True)))
    env.reset()
    torch.testing.assert_close(env.backend.ctrl, torch.zeros_like(env.backend.ctrl))
    env.step(torch.tensor([[1.0, 1.0], [-1.0, -1.0], [0.2, 0.2], [0.0, 0.0]]))
    # joint ranges: hinge_a [-1, 1], hinge_b [-1.5, 1.5]
    expected = torch.tensor([[1.0, 1.5], [-1.0, -1.5], [0.4, 0.4], [0.0, 0.0]])
    torch.testing.assert_close(env.backend.ctrl.to(torch.float32), expected)


def test_joint_selection_by_pattern_leaves_other_actuators_alone():
    env = make_env(toy_cfg(actions=_actions(joint_names=["hinge_b"], scale=1.0)))
    assert env.num_actions == 1
    env.reset()
    env.backend.ctrl[:, 0] = 7.0
    env.step(torch.full((env.num_envs, 1), 0.5))
    assert env.backend.ctrl[:, 0].tolist() == [7.0] * env.num_envs
    assert env.backend.ctrl[:, 1].tolist() == [0.5] * env.num_envs


def test_previous_action_shifts_and_resets_per_row():
    env = make_env()
    env.reset()
    first, second = torch.full((env.num_envs, 2), 0.1), torch.full((env.num_envs, 2), 0.2)
    env.step(first)
    env.step(second)
    manager = env.action_manager
    torch.testing.assert_close(manager.action, second)
    torch.testing.assert_close(manager.prev_action, first)
    mask = torch.tensor([True, False, False, True])
    manager.reset(mask)
    assert manager.action[:, 0].tolist() == pytest.approx([0.0, 0.2, 0.2, 0.0])
    assert manager.prev_action[:, 0].tolist() == pytest.approx([0.0, 0.1, 0.1, 0.0])


def test_bad_action_params_fail_early():
    with pytest.raises(ValueError, match="unknown params"):
        make_env(toy_cfg(actions=_actions(scales=1.0)))
    with pytest.raises(ValueError, match="matches no actuated joint"):
        make_env(toy_cfg(actions=_actions(joint_names=["knee"])))
    with pytest.raises(ValueError, match="does not cover"):
        make_env(toy_cfg(actions=_actions(scale={"hinge_a": 1.0})))
    with pytest.raises(ValueError, match="at least one action term"):
        make_env(toy_cfg(actions={}))


def test_action_meta_describes_joints_gains_and_timing():
    env = make_env()
    meta = env.action_meta()
    assert meta["joint_names"] == ["hinge_a", "hinge_b"]
    assert meta["default_joint_pos"] == pytest.approx([0.3, 0.0])
    assert meta["action_scale"] == [0.5, 0.5]
    assert meta["kp"] == [20.0, 10.0] and meta["kd"] == [1.0, 0.5]
    assert meta["effort_limit"] == [3.0, 2.0]
    assert meta["step_dt"] == pytest.approx(0.01) and meta["num_actions"] == 2
    assert "JointPositionAction" in str(env.action_manager)
    assert meta["terms"]["joint_pos"]["action_offset"] == pytest.approx([0.3, 0.0])
    absolute = make_env(toy_cfg(actions=_actions(use_default_offset=False))).action_meta()
    assert absolute["terms"]["joint_pos"]["action_offset"] == [0.0, 0.0]
    assert absolute["default_joint_pos"] == pytest.approx([0.3, 0.0])  # still the pose observations use


FOUR_HINGES_XML = """
<mujoco>
  <compiler angle="radian"/>
  <default><joint armature="0.01"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body name="base" pos="0 0 0.5">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.05" mass="1"/>
      <body name="a" pos="0.1 0 0"><joint name="hinge_a" axis="0 1 0"/><geom size="0.02" mass="0.1"/></body>
      <body name="b" pos="-0.1 0 0"><joint name="hinge_b" axis="1 0 0"/><geom size="0.02" mass="0.1"/></body>
      <body name="c" pos="0 0.1 0"><joint name="hinge_c" axis="0 1 0"/><geom size="0.02" mass="0.1"/></body>
      <body name="d" pos="0 -0.1 0"><joint name="hinge_d" axis="1 0 0"/><geom size="0.02" mass="0.1"/></body>
    </body>
  </worldbody>
  <actuator>
    <position joint="hinge_a" kp="5" kv="0.1"/>
    <position joint="hinge_b" kp="6" kv="0.2"/>
    <position joint="hinge_c" kp="7" kv="0.3" forcerange="-0.5 0.5" forcelimited="true"/>
  </actuator>
</mujoco>
"""


def test_scattered_joints_and_unactuated_joint():
    scene = SceneCfg(
        model_factory=lambda: mujoco.MjModel.from_xml_string(FOUR_HINGES_XML),
        default_joint_pos={"hinge_c": 0.2, "hinge_d": -0.1},
    )
    cfg = toy_cfg(scene=scene, actions=_actions(joint_names=["hinge_a", "hinge_c"], scale=1.0), events={})
    env = make_env(cfg)
    assert env.robot.joint_names == ["hinge_a", "hinge_b", "hinge_c", "hinge_d"]
    env.reset()
    env.backend.ctrl[:, 1] = 9.0
    action = torch.tensor([[0.1, 0.2], [0.3, -0.4], [-0.5, 0.6], [0.0, 0.0]])
    env.step(action)
    ctrl = env.backend.ctrl.to(torch.float32)
    torch.testing.assert_close(ctrl[:, 0], action[:, 0])
    torch.testing.assert_close(ctrl[:, 2], 0.2 + action[:, 1])
    assert ctrl[:, 1].tolist() == [9.0] * env.num_envs
    # applied torque: zero on the unactuated joint, MuJoCo's actuator force elsewhere
    model = mujoco.MjModel.from_xml_string(FOUR_HINGES_XML)
    data = mujoco.MjData(model)
    torque = env.robot.applied_torque
    for i in range(env.num_envs):
        data.qpos[:] = env.backend.qpos[i].numpy()
        data.qvel[:] = env.backend.qvel[i].numpy()
        data.ctrl[:] = env.backend.ctrl[i].numpy()
        mujoco.mj_forward(model, data)
        torch.testing.assert_close(
            torque[i], torch.tensor(data.qfrc_actuator[6:10], dtype=torch.float32), atol=1e-5, rtol=1e-5
        )
    assert torch.all(torque[:, 3] == 0)
    assert env.robot.joint_effort_limits.tolist() == [float("inf"), float("inf"), 0.5, float("inf")]
