"""Model loading: headless variant, floor, PD servo conversion, G1 standing, asset errors."""

import math
import shutil

import mujoco
import numpy as np
import pytest
import torch
from g1_model import (
    G1_JOINT_NAMES,
    g1_default_qpos,
    g1_mjcf_path,
    g1_pd_gains,
    g1_standing_root_height,
    load_g1,
)

import simcore
from simcore._src.model import apply_pd_servos, pd_gains_from_armature


@pytest.fixture(scope="module")
def g1_mjcf():
    try:
        return g1_mjcf_path()
    except FileNotFoundError as err:
        pytest.skip(str(err))


def test_headless_g1_loads_without_mesh_files(g1_mjcf, tmp_path):
    # Copy only the MJCF: its meshdir points at a folder that does not exist next to the copy.
    lone = tmp_path / "g1_29dof.xml"
    shutil.copy(g1_mjcf, lone)
    model = load_g1(mjcf_path=lone)
    assert model.nmesh == 0
    assert model.nu == 29 and model.nq == 36 and model.nv == 35
    floor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    assert floor >= 0 and model.geom_type[floor] == mujoco.mjtGeom.mjGEOM_PLANE
    # Mass comes from explicit inertials, so dropping density-0 visual geoms changes nothing.
    full = simcore.load_model(g1_mjcf, headless=False)
    np.testing.assert_allclose(model.body_mass, full.body_mass)
    with pytest.raises(ValueError, match="could not compile"):
        simcore.load_model(lone, headless=False)


def test_pd_gains_follow_armature_formula(g1_mjcf):
    model = load_g1(mjcf_path=g1_mjcf)
    gains = g1_pd_gains(model)
    omega = 2 * math.pi * 10.0
    knee = G1_JOINT_NAMES.index("left_knee_joint")
    armature = model.dof_armature[model.jnt_dofadr[model.joint("left_knee_joint").id]]
    assert gains.kp[knee] == pytest.approx(armature * omega**2)
    assert gains.kd[knee] == pytest.approx(2 * 2.0 * armature * omega)
    assert gains.effort_limit[knee] == pytest.approx(139.0)
    # The servo law: force = kp (ctrl - q) - kd qdot, clipped to the effort limit.
    np.testing.assert_allclose(model.actuator_gainprm[:, 0], gains.kp)
    np.testing.assert_allclose(model.actuator_biasprm[:, 1], -gains.kp)
    np.testing.assert_allclose(model.actuator_biasprm[:, 2], -gains.kd)
    np.testing.assert_allclose(model.actuator_forcerange[:, 1], gains.effort_limit)


def test_servo_force_matches_pd_law(g1_mjcf):
    model = load_g1(mjcf_path=g1_mjcf)
    data = mujoco.MjData(model)
    data.qpos[:] = g1_default_qpos(model)
    rng = np.random.default_rng(0)
    data.qvel[6:] = rng.normal(0, 0.5, model.nu)
    data.ctrl[:] = data.qpos[7:] + rng.normal(0, 0.05, model.nu)
    mujoco.mj_forward(model, data)
    gains = g1_pd_gains(model)
    expected = gains.kp * (data.ctrl - data.qpos[7:]) - gains.kd * data.qvel[6:]
    expected = np.clip(expected, -gains.effort_limit, gains.effort_limit)
    np.testing.assert_allclose(data.actuator_force, expected, rtol=1e-9, atol=1e-9)


def test_g1_holds_default_pose_for_two_seconds(g1_mjcf):
    # BeyondMimic's 10 Hz gains give ankle stiffness (2 x 28.5 Nm/rad) below the toppling stiffness m g h
    # (~217 Nm/rad), so a passive stand needs the same armature formula at a higher natural frequency.
    model = load_g1(mjcf_path=g1_mjcf)
    apply_pd_servos(model, pd_gains_from_armature(model, natural_frequency_hz=25.0))
    data = mujoco.MjData(model)
    data.qpos[:] = g1_default_qpos(model)
    data.ctrl[:] = data.qpos[7:]
    mujoco.mj_forward(model, data)
    for _ in range(int(2.0 / model.opt.timestep)):
        mujoco.mj_step(model, data)
    assert data.qpos[2] > g1_standing_root_height(model) - 0.05
    up = np.zeros(9)
    mujoco.mju_quat2Mat(up, data.qpos[3:7])
    assert up[8] > math.cos(math.radians(10))  # pelvis z axis within 10 degrees of vertical
    assert np.max(np.abs(data.qpos[7:] - data.ctrl)) < 0.1


def test_load_model_rejects_bad_arguments(g1_mjcf, tmp_path):
    with pytest.raises(FileNotFoundError, match="MJCF file not found"):
        simcore.load_model(tmp_path / "missing.xml")
    with pytest.raises(ValueError, match="timestep"):
        simcore.load_model(g1_mjcf, timestep=0.0)
    with pytest.raises(ValueError, match="either pd or pd_from_armature"):
        simcore.load_model(g1_mjcf, pd=g1_pd_gains(load_g1()), pd_from_armature=True)


def test_the_demo_steps_the_g1_on_cpu_mujoco_without_cuda(g1_mjcf, capsys):
    from simcore import demo

    if torch.cuda.is_available():
        pytest.skip("with CUDA the demo runs MuJoCo Warp at 2048 envs (the GPU suite's bench covers it)")
    assert demo.main(["--mjcf", str(g1_mjcf), "2", "3"]) == 0
    out = capsys.readouterr().out
    assert "backend=mujoco device=cpu num_envs=2 control_steps=3" in out
    assert "eager_fallback_reason='cpu device'" in out
