"""RobotView against MuJoCo's own math: root frames, gravity, heading, joints, bodies, actuator torque."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch
from managers_toy_scene import TOY_XML, make_env, toy_model

import simcore
from trainrt.envs import RobotView


def _quat(axis, angle):
    q = np.zeros(4)
    mujoco.mju_axisAngle2Quat(q, np.asarray(axis, dtype=np.float64), angle)
    return q


def _set_state(env, qpos, qvel, ctrl=None):
    payload = env.reset_payload
    payload["qpos"].copy_(torch.as_tensor(qpos, dtype=payload["qpos"].dtype))
    payload["qvel"].copy_(torch.as_tensor(qvel, dtype=payload["qvel"].dtype))
    if ctrl is not None:
        payload["ctrl"].copy_(torch.as_tensor(ctrl, dtype=payload["ctrl"].dtype))
    mask = torch.ones(env.num_envs, dtype=torch.bool)
    env.backend.reset(mask, payload, env.reset_spec)


def _states(n):
    rng = np.random.default_rng(0)
    qpos = np.zeros((n, 9))
    qvel = rng.uniform(-1, 1, size=(n, 8))
    for i in range(n):
        tilt = _quat([1.0, 0.3, 0.0], 0.4 * i)
        yaw = _quat([0.0, 0.0, 1.0], -2.5 + 1.3 * i)
        q = np.zeros(4)
        mujoco.mju_mulQuat(q, yaw, tilt)
        qpos[i, :3] = (0.1 * i, -0.2, 0.6)
        qpos[i, 3:7] = q
        qpos[i, 7:9] = (0.2 * i - 0.3, 0.1)
    return qpos, qvel


def _rotate(q, v, inverse=False):
    out = np.zeros(3)
    if inverse:
        qi = np.zeros(4)
        mujoco.mju_negQuat(qi, q)
        q = qi
    mujoco.mju_rotVecQuat(out, np.asarray(v, dtype=np.float64), q)
    return out


def test_root_quantities_match_mujoco_rotations():
    env = make_env()
    qpos, qvel = _states(env.num_envs)
    _set_state(env, qpos, qvel)
    robot = env.robot
    for i in range(env.num_envs):
        q = qpos[i, 3:7]
        np.testing.assert_allclose(robot.root_pos_w[i].numpy(), qpos[i, :3], atol=1e-6)
        np.testing.assert_allclose(robot.root_quat_w[i].numpy(), q, atol=1e-6)
        np.testing.assert_allclose(robot.root_lin_vel_w[i].numpy(), qvel[i, :3], atol=1e-6)
        np.testing.assert_allclose(
            robot.root_lin_vel_b[i].numpy(), _rotate(q, qvel[i, :3], inverse=True), atol=1e-5
        )
        np.testing.assert_allclose(robot.root_ang_vel_b[i].numpy(), qvel[i, 3:6], atol=1e-6)
        np.testing.assert_allclose(robot.root_ang_vel_w[i].numpy(), _rotate(q, qvel[i, 3:6]), atol=1e-5)
        np.testing.assert_allclose(
            robot.projected_gravity_b[i].numpy(), _rotate(q, [0, 0, -1], inverse=True), atol=1e-5
        )
        forward = _rotate(q, [1, 0, 0])
        assert robot.heading_w[i].item() == pytest.approx(math.atan2(forward[1], forward[0]), abs=1e-5)
    assert robot.root_pos_w.dtype == torch.float32


def test_joints_bodies_and_limits():
    env = make_env()
    qpos, qvel = _states(env.num_envs)
    _set_state(env, qpos, qvel)
    robot = env.robot
    assert robot.joint_names == ["hinge_a", "hinge_b"]
    np.testing.assert_allclose(robot.joint_pos.numpy(), qpos[:, 7:9], atol=1e-6)
    np.testing.assert_allclose(robot.joint_vel.numpy(), qvel[:, 6:8], atol=1e-6)
    assert robot.default_joint_pos.tolist() == [pytest.approx([0.3, 0.0])] * env.num_envs
    assert robot.joint_pos_limits.tolist() == [[-1.0, 1.0], [-1.5, 1.5]]
    assert robot.joint_effort_limits.tolist() == [3.0, 2.0]
    assert robot.body_names == ["base", "arm_a"]
    assert robot.body_ids(["arm_a"]) == [1] and robot.body_ids("arm_.*") == [1]
    with pytest.raises(ValueError, match="read plan"):
        robot.body_ids(["arm_b"])
    data = mujoco.MjData(toy_model())
    for i in range(env.num_envs):
        data.qpos[:], data.qvel[:] = qpos[i], qvel[i]
        mujoco.mj_forward(data.model, data)
        arm = data.model.body("arm_a").id
        np.testing.assert_allclose(robot.body_pos_w[i, 1].numpy(), data.xpos[arm], atol=1e-5)
        np.testing.assert_allclose(robot.body_quat_w[i, 1].numpy(), data.xquat[arm], atol=1e-5)


def test_applied_torque_matches_mujoco_actuator_forces():
    env = make_env()
    qpos, qvel = _states(env.num_envs)
    ctrl = np.array([[0.5, -0.2], [3.0, 0.0], [-3.0, 4.0], [0.0, 0.0]])  # rows 1 and 2 saturate
    _set_state(env, qpos, qvel, ctrl)
    model = toy_model()
    data = mujoco.MjData(model)
    expected = np.zeros((env.num_envs, 2))
    for i in range(env.num_envs):
        data.qpos[:], data.qvel[:], data.ctrl[:] = qpos[i], qvel[i], ctrl[i]
        mujoco.mj_forward(model, data)
        expected[i] = data.qfrc_actuator[6:8]
    np.testing.assert_allclose(env.robot.applied_torque.numpy(), expected, atol=1e-5)
    assert np.abs(expected).max() == pytest.approx(3.0)  # the force limit was exercised


def test_model_without_free_joint_has_no_root_state():
    fixed = TOY_XML.replace('<freejoint name="root"/>', "")
    backend = simcore.make_backend(
        "mujoco", mujoco.MjModel.from_xml_string(fixed), simcore.SimConfig(num_envs=2, device="cpu")
    )
    robot = RobotView(backend, backend.read_plan(bodies=("base",)), default_joint_pos={"hinge_.*": 0.1})
    assert robot.joint_pos.shape == (2, 2)
    assert robot.default_joint_pos.tolist() == [pytest.approx([0.1, 0.1])] * 2
    with pytest.raises(NotImplementedError, match="free joint"):
        _ = robot.root_pos_w
    with pytest.raises(ValueError, match="matches no joint"):
        RobotView(backend, backend.read_plan(), default_joint_pos={"knee": 0.1})
