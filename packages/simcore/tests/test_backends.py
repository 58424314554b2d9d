"""Both backends honour the protocol: carrier shapes/dtypes/devices, read plans, contacts, diagnostics."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
from simcore_scenes import BACKENDS, cpu_config, reference_data

import simcore

DTYPES = {"mujoco": torch.float64, "mjwarp": torch.float32}
TOLERANCE = {"mujoco": 1e-10, "mjwarp": 2e-5}  # float64 vs float32 arithmetic


def stir(backend: simcore.SimBackend, seed: int = 0) -> None:
    """Give every world a different, moving state through the reset transaction."""
    gen = torch.Generator().manual_seed(seed)
    n = backend.num_envs
    spec = backend.reset_spec(("qpos", "qvel", "ctrl"))
    payload = spec.new_payload()
    qpos = payload["qpos"].cpu().double()
    qpos[:, 2] = 0.5  # box above the floor: no contacts
    qpos[:, 7:] = torch.rand(n, 2, generator=gen, dtype=torch.float64) - 0.5
    payload["qpos"].copy_(qpos)
    payload["qvel"].copy_(torch.randn(n, backend.qvel.shape[1], generator=gen, dtype=torch.float64))
    payload["ctrl"].copy_(torch.rand(n, 2, generator=gen, dtype=torch.float64))
    backend.reset(torch.ones(n, dtype=torch.bool, device=backend.device), payload, spec)


@pytest.fixture(params=BACKENDS)
def backend(request, small_model):
    return simcore.make_backend(request.param, small_model, cpu_config(num_envs=3, decimation=2))


def test_carriers_have_fixed_shapes_dtypes_and_devices(backend, small_model):
    m, n = small_model, 3
    dtype = DTYPES[backend.name]
    expected = {
        "qpos": (n, m.nq),
        "qvel": (n, m.nv),
        "ctrl": (n, m.nu),
        "act": (n, m.na),
        "time": (n,),
        "qacc_warmstart": (n, m.nv),
        "mocap_pos": (n, m.nmocap, 3),
        "mocap_quat": (n, m.nmocap, 4),
    }
    assert m.na == 1 and m.nmocap == 1
    for name, shape in expected.items():
        tensor = getattr(backend, name)
        assert tuple(tensor.shape) == shape, name
        assert tensor.dtype == dtype, name
        assert tensor.device == torch.device("cpu"), name
    fields = backend.model_fields
    assert set(fields) == set(simcore.SimConfig(1).randomized_fields)
    assert tuple(fields["geom_friction"].shape) == (n, m.ngeom, 3)
    assert tuple(fields["body_mass"].shape) == (n, m.nbody)
    assert tuple(fields["body_ipos"].shape) == (n, m.nbody, 3)
    assert tuple(fields["actuator_gainprm"].shape) == (n, m.nu, 10)
    assert tuple(fields["actuator_biasprm"].shape) == (n, m.nu, 10)
    for name, field in fields.items():
        assert field.dtype == dtype and field.device == torch.device("cpu"), name
        np.testing.assert_allclose(field[1].double().numpy(), getattr(m, name), rtol=1e-6, err_msg=name)
    assert backend.physics_dt == pytest.approx(0.005)
    assert backend.control_dt == pytest.approx(0.01)
    assert backend.mj_model.nq == m.nq


def test_read_plan_shapes_and_unknown_names(backend, small_model):
    plan = backend.read_plan(
        bodies=("box", "forearm", "arm"), sensors=("tip_pos", "box_gyro"), contact_bodies=("box",)
    )
    n, dtype = 3, DTYPES[backend.name]
    for name, shape in {
        "body_pos_w": (n, 3, 3),
        "body_quat_w": (n, 3, 4),
        "body_lin_vel_w": (n, 3, 3),
        "body_ang_vel_w": (n, 3, 3),
        "contact_force": (n, 1, 3),
    }.items():
        assert tuple(getattr(plan, name).shape) == shape and getattr(plan, name).dtype == dtype, name
    assert plan.contact_found.shape == (n, 1) and plan.contact_found.dtype == torch.bool
    assert tuple(plan.sensor("tip_pos").shape) == (n, 3)
    assert plan.body_index("forearm") == 1 and plan.body_names == ("box", "forearm", "arm")
    with pytest.raises(ValueError, match=r"unknown body names \['hand'\]; valid: \['world', 'box'"):
        backend.read_plan(bodies=("box", "hand"))
    with pytest.raises(ValueError, match=r"unknown sensor names \['lidar'\]; valid: \['tip_pos'"):
        backend.read_plan(sensors=("lidar",))
    with pytest.raises(ValueError, match=r"unknown body names \['foot'\]"):
        backend.read_plan(contact_bodies=("foot",))
    with pytest.raises(ValueError, match="not in this plan"):
        plan.sensor("box_acc")


def test_plan_matches_cpu_mujoco_kinematics_and_object_velocity(backend, small_model):
    plan = backend.read_plan(bodies=("box", "arm", "forearm"), sensors=("tip_pos", "box_gyro", "hinge1_pos"))
    stir(backend, seed=1)
    backend.step()
    tol = TOLERANCE[backend.name]
    for world in range(backend.num_envs):
        ref = reference_data(backend, world)
        for b, name in enumerate(plan.body_names):
            body = small_model.body(name).id
            velocity = np.zeros(6)
            # XBODY: the body frame origin (mjOBJ_BODY would be the inertial frame, i.e. the body com)
            mujoco.mj_objectVelocity(small_model, ref, mujoco.mjtObj.mjOBJ_XBODY, body, velocity, 0)
            np.testing.assert_allclose(plan.body_pos_w[world, b].double().numpy(), ref.xpos[body], atol=tol)
            np.testing.assert_allclose(plan.body_quat_w[world, b].double().numpy(), ref.xquat[body], atol=tol)
            np.testing.assert_allclose(
                plan.body_ang_vel_w[world, b].double().numpy(), velocity[:3], atol=10 * tol
            )
            np.testing.assert_allclose(
                plan.body_lin_vel_w[world, b].double().numpy(), velocity[3:], atol=10 * tol
            )
        np.testing.assert_allclose(
            plan.sensor("tip_pos")[world].double().numpy(),
            ref.site_xpos[small_model.site("tip").id],
            atol=tol,
        )
        np.testing.assert_allclose(
            plan.sensor("box_gyro")[world].double().numpy(), ref.sensor("box_gyro").data, atol=10 * tol
        )
        np.testing.assert_allclose(plan.sensor("hinge1_pos")[world].double().numpy(), ref.qpos[7:8], atol=tol)
    # the arm's linear velocity is a lever effect: it must not be the com velocity
    assert plan.body_lin_vel_w[:, 2].abs().max() > 1e-3


def test_step_uses_ctrl_and_advances_time(backend):
    before = backend.qpos.clone()
    backend.ctrl.fill_(0.8)
    backend.step()
    torch.testing.assert_close(backend.time, torch.full_like(backend.time, backend.control_dt))
    assert (backend.qpos[:, 7] - before[:, 7]).abs().min() > 0  # the servo pulls the arm
    assert torch.all(backend.act[:, 0] > 0)  # the filtered actuator integrates its ctrl


def test_box_resting_on_floor_reports_its_weight(backend, small_model):
    plan = backend.read_plan(bodies=("box",), contact_bodies=("box", "forearm"))
    spec = backend.reset_spec(("qpos",))
    payload = spec.new_payload()
    payload["qpos"][:, 2] = 0.1  # box face on the floor
    backend.reset(torch.ones(3, dtype=torch.bool), payload, spec)
    assert not plan.contact_found.any()  # contact forces come from a step; none since the reset
    for _ in range(30):
        backend.step()
    weight = small_model.body("box").mass[0] * 9.81
    force = plan.contact_force[:, 0].double()
    np.testing.assert_allclose(force[:, 2].numpy(), weight, rtol=1e-3)
    np.testing.assert_allclose(force[:, :2].numpy(), 0.0, atol=1e-4)
    assert plan.contact_found[:, 0].all() and not plan.contact_found[:, 1].any()
    assert torch.all(plan.contact_force[:, 1] == 0)
    # cross-check one world against MuJoCo's own per-contact forces, summed in the world frame
    ref = reference_data(backend, 0)
    total = np.zeros(3)
    for i in range(ref.ncon):
        local = np.zeros(6)
        mujoco.mj_contactForce(small_model, ref, i, local)
        contact = ref.contact[i]
        world_force = contact.frame.reshape(3, 3).T @ local[:3]
        box = small_model.body("box").id
        sign = 1.0 if small_model.geom_bodyid[contact.geom2] == box else -1.0
        total += sign * world_force
    np.testing.assert_allclose(force[0].numpy(), total, rtol=2e-3, atol=1e-3)


def test_diagnostics_report_sizes_and_overflow(small_model, recwarn):
    for name in BACKENDS:
        backend = simcore.make_backend(name, small_model, cpu_config(num_envs=2, nconmax=1, njmax=64))
        spec = backend.reset_spec(("qpos",))
        payload = spec.new_payload()
        payload["qpos"][:, 2] = 0.1
        backend.reset(torch.ones(2, dtype=torch.bool), payload, spec)
        backend.step()  # a box on a plane makes 4 contacts: more than nconmax=1
        with pytest.warns(RuntimeWarning, match="buffer overflow"):
            diag = backend.diagnostics()
        assert diag.backend == name and diag.device == "cpu" and diag.num_envs == 2
        assert (diag.nconmax, diag.njmax) == (1, 64)
        assert diag.overflow["contacts"] == 2 and diag.overflow_detected, diag.overflow
        assert diag.overflow["constraints"] == 0
        as_dict = diag.as_dict()
        for key in (
            "graph_enabled",
            "graph_version",
            "steps_per_replay",
            "graph_captures",
            "graph_replays",
            "eager_fallback_reason",
            "conditional_nodes_used",
            "overflow_detected",
            "solver_limits",
        ):
            assert key in as_dict


def test_diagnostics_without_overflow(backend):
    backend.step()
    diag = backend.diagnostics()
    assert not diag.overflow_detected and diag.overflow["contacts"] == 0
    assert diag.nconmax >= 48 and diag.njmax >= 4 * diag.nconmax


def test_set_option_changes_physics_and_bumps_structure_version(backend):
    version = backend.structure_version
    backend.set_option("timestep", 0.002)
    assert backend.structure_version == version + 1
    assert backend.physics_dt == pytest.approx(0.002) and backend.mj_model.opt.timestep == pytest.approx(
        0.002
    )
    backend.step()
    torch.testing.assert_close(backend.time, torch.full_like(backend.time, 0.004))
    backend.set_option("gravity", (0.0, 0.0, 0.0))
    spec = backend.reset_spec(("qpos", "qvel"))
    payload = spec.new_payload()
    payload["qpos"][:, 2] = 1.0
    payload["qvel"].zero_()
    backend.reset(torch.ones(3, dtype=torch.bool), payload, spec)
    backend.step()
    torch.testing.assert_close(backend.qpos[:, 2], torch.ones_like(backend.qpos[:, 2]))  # weightless: no fall
    with pytest.raises(ValueError, match="unknown option 'warp_speed'"):
        backend.set_option("warp_speed", 9)
    version = backend.structure_version
    for option, value, message in (
        ("gravity", (0.0, -9.81), r"takes 3 numbers \(now \[0.0, 0.0, 0.0\]\)"),
        ("gravity", (0.0, 0.0, float("nan")), "must be finite"),
        ("timestep", -1.0, "takes a positive number"),
        ("timestep", "fast", "takes a number"),
        ("iterations", 2.5, "takes an integer"),
    ):
        with pytest.raises(ValueError, match=message):
            backend.set_option(option, value)
    # refused before anything changed: host model and simulator agree, graphs stay valid
    assert backend.structure_version == version and backend.mj_model.opt.timestep == pytest.approx(0.002)
    assert backend.mj_model.opt.gravity.tolist() == [0.0, 0.0, 0.0]
    backend.set_option("gravity", -2.0)  # a scalar broadcasts, on both backends
    backend.set_option("disableflags", mujoco.mjtDisableBit.mjDSBL_CONTACT)  # MuJoCo's flag enum
    backend.set_option("disableflags", 0)
    assert backend.mj_model.opt.gravity.tolist() == [-2.0, -2.0, -2.0]
    backend.reset(torch.ones(3, dtype=torch.bool), payload, spec)
    backend.step()
    assert float(backend.qvel[0, 2]) == pytest.approx(
        -2.0 * backend.control_dt, rel=1e-3
    )  # the box falls at -2


def test_mjwarp_carriers_alias_warp_arrays(small_model):
    backend = simcore.make_backend("mjwarp", small_model, cpu_config(num_envs=2))
    d, m = backend._d, backend._m
    pairs = {
        "qpos": d.qpos,
        "qvel": d.qvel,
        "ctrl": d.ctrl,
        "act": d.act,
        "time": d.time,
        "qacc_warmstart": d.qacc_warmstart,
        "mocap_pos": d.mocap_pos,
        "mocap_quat": d.mocap_quat,
    }
    for name, array in pairs.items():
        assert getattr(backend, name).data_ptr() == array.ptr, name
    for name, tensor in backend.model_fields.items():
        assert tensor.data_ptr() == getattr(m, name).ptr, name
        assert getattr(m, name).shape[0] == 2, name  # batched per world at construction
    plan = backend.read_plan(sensors=("tip_pos",))
    assert plan.sensor("tip_pos").data_ptr() == d.sensordata.ptr + 0  # tip_pos is the first sensor
    backend.ctrl[1, 0] = 0.25  # a torch write is the simulator's ctrl
    np.testing.assert_allclose(d.ctrl.numpy()[1, 0], 0.25)
    ptr = backend.qpos.data_ptr()
    backend.step()
    assert backend.qpos.data_ptr() == ptr  # stepping never replaces the arrays


def test_mjwarp_device_defaults_to_cuda_when_available(small_model):
    backend = simcore.make_backend("mjwarp", small_model, simcore.SimConfig(num_envs=1))
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert backend.device.type == expected and backend.qpos.device.type == expected
    assert torch.device(wp.device_to_torch(backend._wp_device)) == backend.device


@pytest.mark.gpu
def test_mujoco_host_bridge_serves_cuda_carriers(small_model):
    """With a CUDA device the mujoco backend keeps carriers on the GPU and crosses to the host each step."""
    on_gpu = simcore.make_backend("mujoco", small_model, simcore.SimConfig(2, decimation=2, device="cuda"))
    on_cpu = simcore.make_backend("mujoco", small_model, cpu_config(num_envs=2, decimation=2))
    plan_gpu = on_gpu.read_plan(bodies=("forearm",))
    plan_cpu = on_cpu.read_plan(bodies=("forearm",))
    for backend in (on_gpu, on_cpu):
        backend.ctrl.fill_(0.6)
        for _ in range(5):
            backend.step()
    assert on_gpu.qpos.device.type == "cuda" and plan_gpu.body_pos_w.device.type == "cuda"
    assert torch.equal(on_gpu.qpos.cpu(), on_cpu.qpos)  # the same float64 arithmetic on the host
    assert torch.equal(plan_gpu.body_lin_vel_w.cpu(), plan_cpu.body_lin_vel_w)


@pytest.mark.parametrize("name", BACKENDS)
def test_a_blown_up_world_is_reported_non_finite_every_time_not_silently_reset(name):
    # CPU MuJoCo resets an unstable world to qpos0 with only a warning; both backends must instead hand the
    # blow-up to the caller as a non-finite state, and leave the other worlds alone.
    from simcore_scenes import SMALL_XML

    model = mujoco.MjModel.from_xml_string(SMALL_XML)
    backend = simcore.make_backend(name, model, cpu_config(num_envs=3))
    backend.step()
    backend.ctrl.fill_(0.3)
    spec = backend.reset_spec(("qpos", "qvel"))
    good = spec.new_payload()
    for blow_up in range(2):  # the same world, twice: each blow-up is reported
        backend.qvel[1] = float("nan")
        time = backend.time.clone()
        backend.step()
        finite = torch.isfinite(backend.qvel).all(dim=1) & torch.isfinite(backend.qpos).all(dim=1)
        assert finite.tolist() == [True, False, True], blow_up
        # time and controls go on as in the other worlds (MuJoCo's own reset would have zeroed them)
        assert torch.allclose(backend.time, time + backend.control_dt), blow_up
        assert torch.all(backend.ctrl == 0.3), blow_up
        backend.reset(torch.tensor([False, True, False]), good, spec)
        backend.step()
        assert bool(torch.isfinite(backend.qpos).all() and torch.isfinite(backend.qvel).all()), blow_up


def test_diagnostics_count_solver_iterations(backend):
    stir(backend)
    backend.set_option("disableflags", int(mujoco.mjtDisableBit.mjDSBL_CONSTRAINT))
    backend.step()  # no constraint row: the solver does not iterate
    free = backend.diagnostics().solver_iterations
    assert free["max"] <= 1.0, free  # MuJoCo Warp counts its one pass; MuJoCo counts none
    backend.set_option("disableflags", 0)
    spec = backend.reset_spec(("qpos",))
    payload = spec.new_payload()
    payload["qpos"][:, 2] = 0.09  # the box sinks into the floor: contact rows the solver must resolve
    payload["qpos"][:, 3] = 1.0
    backend.reset(torch.ones(3, dtype=torch.bool), payload, spec)
    backend.step()
    iterations = backend.diagnostics().solver_iterations
    assert 2.0 <= iterations["mean"] <= iterations["max"] <= backend.mj_model.opt.iterations, iterations
