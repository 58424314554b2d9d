"""The packed reset transaction: masked rows take the payload, the others keep every bit, derived state follows."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
from simcore_scenes import BACKENDS, SMALL_XML, cpu_config, reference_data

import simcore
from simcore._src.reset import STATE_CHANNELS

ALL_CHANNELS = (*STATE_CHANNELS, *simcore.SimConfig(1).randomized_fields)
NUM_ENVS = 4


def make(name: str, model: mujoco.MjModel) -> tuple[simcore.SimBackend, simcore.ReadPlan]:
    backend = simcore.make_backend(name, model, cpu_config(num_envs=NUM_ENVS, decimation=2))
    plan = backend.read_plan(
        bodies=("box", "arm", "forearm"), sensors=("tip_pos", "box_gyro", "box_acc"), contact_bodies=("box",)
    )
    # a settled box on the floor and a swinging arm: contact forces and acceleration sensors are non-zero
    spec = backend.reset_spec(("qpos",))
    payload = spec.new_payload()
    payload["qpos"][:, 2] = 0.1
    backend.reset(torch.ones(NUM_ENVS, dtype=torch.bool), payload, spec)
    backend.ctrl[:, 0] = 0.7
    for _ in range(3):
        backend.step()
    assert plan.contact_found.all()
    return backend, plan


def derived_constants(backend: simcore.SimBackend) -> dict[str, torch.Tensor]:
    """Per-world constants MuJoCo derives from mass and inertia, ``(num_envs, ...)``."""
    names = ("body_subtreemass", "body_invweight0", "dof_invweight0")
    if backend.name == "mjwarp":
        return {n: wp.to_torch(getattr(backend._m, n)).clone() for n in names}
    return {n: torch.from_numpy(np.stack([getattr(m, n) for m in backend._world_models])) for n in names}


def snapshot(backend: simcore.SimBackend, plan: simcore.ReadPlan) -> dict[str, torch.Tensor]:
    """Everything a row owns: state, per-world fields, derived state, plan outputs and derived constants."""
    out = {f"state.{c}": getattr(backend, c).clone() for c in STATE_CHANNELS}
    out.update({f"field.{k}": v.clone() for k, v in backend.model_fields.items()})
    out.update({f"derived.{k}": v.clone() for k, v in backend._derived._asdict().items()})
    for name in (
        "body_pos_w",
        "body_quat_w",
        "body_lin_vel_w",
        "body_ang_vel_w",
        "contact_force",
        "contact_found",
    ):
        out[f"plan.{name}"] = getattr(plan, name).clone()
    for name in plan.sensor_names:
        out[f"plan.sensor.{name}"] = plan.sensor(name).clone()
    out.update({f"const.{k}": v for k, v in derived_constants(backend).items()})
    return out


def assert_plan_matches_a_fresh_forward(
    backend: simcore.SimBackend, plan: simcore.ReadPlan, model: mujoco.MjModel, world: int, tol: float
) -> mujoco.MjData:
    """Bodies and ``tip_pos`` read for ``world`` equal a CPU MuJoCo forward pass of its state; returns that data."""
    ref = reference_data(backend, world)
    for b, body in enumerate(plan.body_names):
        bid = model.body(body).id
        np.testing.assert_allclose(plan.body_pos_w[world, b].double().numpy(), ref.xpos[bid], atol=tol)
        np.testing.assert_allclose(plan.body_quat_w[world, b].double().numpy(), ref.xquat[bid], atol=tol)
    np.testing.assert_allclose(
        plan.sensor("tip_pos")[world].double().numpy(), ref.sensor("tip_pos").data, atol=tol
    )
    return ref


def random_payload(
    backend: simcore.SimBackend, spec: simcore.ResetSpec, seed: int
) -> dict[str, torch.Tensor]:
    """A payload in which every element of every channel differs from the live values."""
    gen = torch.Generator().manual_seed(seed)
    payload = spec.new_payload()
    for name, buf in payload.items():
        noise = torch.rand(buf.shape, generator=gen, dtype=torch.float64).to(buf.dtype)
        if name in backend.model_fields:
            buf.mul_(1.5 + noise).add_(0.01)  # scaled physical parameters, all positive and changed
        else:
            buf.add_(noise * 0.2 + 0.05)
    quat = payload["qpos"][:, 3:7]
    quat.div_(quat.norm(dim=1, keepdim=True))
    payload["qpos"][:, 2] = 0.6  # box in the air
    payload["mocap_quat"].div_(payload["mocap_quat"].norm(dim=-1, keepdim=True))
    return payload


def assert_rows(before: dict, after: dict, rows: torch.Tensor) -> None:
    """Rows ``rows`` are bit-identical in every snapshot entry."""
    for key in before:
        assert torch.equal(before[key][rows], after[key][rows]), key


@pytest.mark.parametrize("name", BACKENDS)
def test_all_false_mask_changes_nothing(small_model, name):
    backend, plan = make(name, small_model)
    spec = backend.reset_spec(ALL_CHANNELS)
    payload = random_payload(backend, spec, seed=0)
    before = snapshot(backend, plan)
    backend.reset(torch.zeros(NUM_ENVS, dtype=torch.bool), payload, spec)
    assert_rows(before, snapshot(backend, plan), torch.ones(NUM_ENVS, dtype=torch.bool))


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("mask_kind", ["all_true", "random"])
def test_selected_rows_take_payload_and_others_keep_every_bit(small_model, name, mask_kind):
    backend, plan = make(name, small_model)
    spec = backend.reset_spec(ALL_CHANNELS)
    assert spec.recompute_constants
    payload = random_payload(backend, spec, seed=1)
    if mask_kind == "all_true":
        mask = torch.ones(NUM_ENVS, dtype=torch.bool)
    else:
        mask = torch.rand(NUM_ENVS, generator=torch.Generator().manual_seed(3)) < 0.5
        mask[0], mask[1] = True, False  # both kinds present whatever the draw
    before = snapshot(backend, plan)
    backend.reset(mask, payload, spec)
    after = snapshot(backend, plan)
    assert_rows(before, after, ~mask)
    for channel in ALL_CHANNELS:
        assert torch.equal(
            getattr(backend, channel, None) if channel in STATE_CHANNELS else backend.model_fields[channel],
            torch.where(
                mask.view(-1, *[1] * (payload[channel].dim() - 1)),
                payload[channel],
                before[("state." if channel in STATE_CHANNELS else "field.") + channel],
            ),
        ), channel
    # step products are unknown until the next step: zero in reset rows
    assert not plan.contact_found[mask].any()
    assert torch.all(plan.sensor("box_acc")[mask] == 0)
    # derived state of reset rows equals a fresh forward pass of the payload state (CPU MuJoCo reference)
    tol = 1e-10 if name == "mujoco" else 5e-5
    box = small_model.body("box").id
    for world in torch.arange(NUM_ENVS)[mask].tolist():
        ref = assert_plan_matches_a_fresh_forward(backend, plan, small_model, world, tol)
        np.testing.assert_allclose(
            plan.sensor("box_gyro")[world].double().numpy(), ref.sensor("box_gyro").data, atol=10 * tol
        )
        # derived mass constants follow the new per-world masses
        subtree = after["const.body_subtreemass"][world].double().numpy()
        np.testing.assert_allclose(subtree, ref.model.body_subtreemass, rtol=1e-6)
        np.testing.assert_allclose(
            subtree[box], backend.model_fields["body_mass"][world, box].double(), rtol=1e-6
        )
        assert subtree[box] != before["const.body_subtreemass"][world, box]


@pytest.mark.parametrize("name", BACKENDS)
def test_heavier_box_presses_harder_only_in_reset_rows(small_model, name):
    backend, plan = make(name, small_model)
    spec = backend.reset_spec(("body_mass",))
    payload = spec.new_payload()
    box = small_model.body("box").id
    payload["body_mass"][:, box] *= 2.0
    mask = torch.tensor([True, False, True, False])
    backend.reset(mask, payload, spec)
    for _ in range(20):
        backend.step()
    weight = small_model.body_mass[box] * 9.81
    expected = torch.where(mask, 2 * weight, weight).double()
    torch.testing.assert_close(plan.contact_force[:, 0, 2].double(), expected, rtol=2e-3, atol=0)


@pytest.mark.parametrize("name", BACKENDS)
def test_spec_errors_are_raised_at_spec_time(small_model, name):
    backend = simcore.make_backend(name, small_model, cpu_config(num_envs=2))
    with pytest.raises(
        ValueError, match=r"unknown reset channels \['qfrc'\] for backend .*valid: \['time', 'qpos'"
    ):
        backend.reset_spec(("qpos", "qfrc"))
    with pytest.raises(ValueError, match=r"\['geom_solref'\] are not per-world on this backend"):
        backend.reset_spec(("geom_solref",))
    with pytest.raises(ValueError, match="duplicate reset channels"):
        backend.reset_spec(("qpos", "qpos"))
    with pytest.raises(ValueError, match="sequence of names"):
        backend.reset_spec("qpos")
    spec = backend.reset_spec(("qpos", "ctrl"))
    assert spec.channels == ("qpos", "ctrl") and not spec.recompute_constants
    payload = spec.new_payload()
    assert (
        torch.equal(payload["qpos"], backend.qpos) and payload["qpos"].data_ptr() != backend.qpos.data_ptr()
    )
    mask = torch.ones(2, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"payload lacks channels \['ctrl'\]"):
        backend.reset(mask, {"qpos": payload["qpos"]}, spec)
    with pytest.raises(ValueError, match="mask must be a"):
        backend.reset(mask.float(), payload, spec)
    with pytest.raises(ValueError, match=r"mask must be \(2,\)"):
        backend.reset(torch.ones(3, dtype=torch.bool), payload, spec)
    with pytest.raises(ValueError, match=r"payload\['ctrl'\] must be"):
        backend.reset(mask, {**payload, "ctrl": payload["ctrl"][:, :1]}, spec)
    with pytest.raises(ValueError, match=r"payload has channels \['qvel'\] the spec does not write"):
        backend.reset(mask, {**payload, "qvel": backend.qvel.clone()}, spec)  # would be ignored
    empty = backend.reset_spec(())
    with pytest.raises(ValueError, match=r"mask must be \(2,\)"):  # checked without a channel to compare to
        backend.reset(torch.ones(1, dtype=torch.bool), {}, empty)
    other = simcore.make_backend(name, small_model, cpu_config(num_envs=2))
    with pytest.raises(ValueError, match="another backend"):
        other.reset(mask, payload, spec)


@pytest.mark.parametrize("name", BACKENDS)
def test_state_tensors_are_written_in_place_not_replaced(small_model, name):
    backend = simcore.make_backend(name, small_model, cpu_config(num_envs=2))
    ctrl = backend.ctrl
    with pytest.raises(
        AttributeError, match=r"backend.ctrl .* cannot be replaced .* backend.ctrl\[:\] = value"
    ):
        backend.ctrl = torch.full_like(ctrl, 0.5)
    assert backend.ctrl is ctrl
    backend.ctrl[:] = 0.5  # the documented way: the physics sees it
    backend.step()
    assert torch.all(backend.ctrl == 0.5) and float(backend.qvel[:, 6].abs().max()) > 0.0


def _count_refreshes(backend: simcore.SimBackend) -> list[int]:
    """Patch the backend's derived-state refresh to count its runs; returns the one-element counter."""
    calls = [0]
    name = "_kinematics_kernels" if backend.name == "mjwarp" else "_refresh_derived"
    original = getattr(backend, name)

    def counted() -> None:
        calls[0] += 1
        original()

    setattr(backend, name, counted)
    return calls


@pytest.mark.parametrize("name", BACKENDS)
def test_no_op_reset_skips_the_refresh_and_a_later_reset_still_refreshes(small_model, name):
    backend, plan = make(name, small_model)
    spec = backend.reset_spec(STATE_CHANNELS)
    assert not spec.recompute_constants
    payload = random_payload(backend, spec, seed=4)
    calls = _count_refreshes(backend)
    before = snapshot(backend, plan)
    for _ in range(2):
        backend.reset(torch.zeros(NUM_ENVS, dtype=torch.bool), payload, spec)
    assert calls[0] == 0  # nothing was selected, so nothing was recomputed
    assert_rows(before, snapshot(backend, plan), torch.ones(NUM_ENVS, dtype=torch.bool))

    mask = torch.tensor([False, True, False, True])
    backend.reset(mask, payload, spec)
    assert calls[0] == 1
    after = snapshot(backend, plan)
    assert_rows(before, after, ~mask)
    tol = 1e-10 if name == "mujoco" else 5e-5
    for world in (1, 3):
        assert torch.equal(backend.qpos[world], payload["qpos"][world])
        assert_plan_matches_a_fresh_forward(backend, plan, small_model, world, tol)
    # the skipped refreshes left nothing stale: stepping on matches a backend that always refreshed
    twin, twin_plan = make(name, small_model)
    twin.reset(mask, payload, twin.reset_spec(STATE_CHANNELS))
    for _ in range(2):
        backend.step()
        twin.step()
    assert torch.equal(plan.body_pos_w, twin_plan.body_pos_w)
    assert torch.equal(backend.qvel, twin.qvel)


CONTACT_SENSOR_XML = SMALL_XML.replace(
    "</sensor>", '  <contact name="box_touch" body1="box" data="found"/>\n  </sensor>'
)
"""The small scene plus a contact sensor: MuJoCo Warp allocates scratch arrays to evaluate it."""


def _allocations(fn) -> list[str]:
    """Names of the Warp allocation functions ``fn()`` calls with a non-zero size."""
    allocations = []
    names = ("empty", "zeros", "full", "clone", "empty_like", "zeros_like", "full_like", "array")
    originals = {n: getattr(wp, n) for n in names}

    def counting(fn_name):
        def alloc(*args, **kwargs):
            array = originals[fn_name](*args, **kwargs)
            if getattr(array, "capacity", 0) > 0:  # zero-size arrays allocate nothing
                allocations.append(fn_name)
            return array

        return alloc

    try:
        for n in names:
            setattr(wp, n, counting(n))
        fn()
    finally:
        for n, original in originals.items():
            setattr(wp, n, original)
    return allocations


@pytest.mark.parametrize("scene", ["small", "g1", "contact_sensor"])
def test_mjwarp_conditional_refresh_body_allocates_nothing(request, scene):
    """The refresh becomes a conditional graph node's body, which cannot hold memory-allocation nodes."""
    if scene == "contact_sensor":
        model = mujoco.MjModel.from_xml_string(CONTACT_SENSOR_XML)
    else:
        model = request.getfixturevalue(f"{scene}_model")
    backend = simcore.make_backend("mjwarp", model, cpu_config(num_envs=2))
    assert _allocations(backend._kinematics_kernels) == []
    sensors_allocate = _allocations(backend._sensor_kernels) != []
    assert backend._sensor_refresh_allocation_free == (not sensors_allocate)
    assert sensors_allocate == (scene == "contact_sensor")


def test_mjwarp_no_op_reset_with_allocating_sensors_skips_kinematics_and_keeps_every_bit():
    model = mujoco.MjModel.from_xml_string(CONTACT_SENSOR_XML)
    backend = simcore.make_backend("mjwarp", model, cpu_config(num_envs=NUM_ENVS, decimation=2))
    plan = backend.read_plan(bodies=("box", "forearm"), sensors=("tip_pos", "box_touch"))
    spec = backend.reset_spec(("qpos", "qvel"))
    payload = spec.new_payload()
    payload["qpos"][:, 7] = 0.8
    backend.step()
    kinematics, sensors = _count_refreshes(backend), [0]
    original = backend._sensor_kernels

    def counted_sensors() -> None:
        sensors[0] += 1
        original()

    backend._sensor_kernels = counted_sensors
    before = {k: v.clone() for k, v in backend._derived._asdict().items()}
    backend.reset(torch.zeros(NUM_ENVS, dtype=torch.bool), payload, spec)
    assert kinematics[0] == 0 and sensors[0] == 1  # the allocating sensors run outside the branch
    for key, value in backend._derived._asdict().items():
        assert torch.equal(value, before[key]), key
    mask = torch.tensor([True, False, False, True])
    backend.reset(mask, payload, spec)
    assert kinematics[0] == 1
    for world in (0, 3):
        ref = reference_data(backend, world)
        np.testing.assert_allclose(
            plan.body_pos_w[world, 1].double().numpy(), ref.xpos[model.body("forearm").id], atol=5e-5
        )
    assert torch.equal(
        plan.body_pos_w[~mask], before["xpos"][~mask][:, [model.body("box").id, model.body("forearm").id]]
    )


@pytest.mark.gpu
@pytest.mark.parametrize("xml", [SMALL_XML, CONTACT_SENSOR_XML], ids=["small", "contact_sensor"])
def test_captured_reset_with_no_selected_row_keeps_every_bit_and_later_resets_refresh(xml):
    n = 64
    small_model = mujoco.MjModel.from_xml_string(xml)
    backend = simcore.make_backend("mjwarp", small_model, simcore.SimConfig(n, decimation=2, device="cuda"))
    plan = backend.read_plan(bodies=("box", "forearm"), sensors=("tip_pos",))
    spec = backend.reset_spec(("qpos", "qvel"))
    payload = spec.new_payload()
    payload["qpos"][:, 2] = 0.5
    payload["qpos"][:, 7] = 0.8  # the arm's first hinge: moves the forearm in reset rows
    mask = torch.zeros(n, dtype=torch.bool, device="cuda")
    work = simcore.CapturedWork(
        lambda: backend.reset(mask, payload, spec), backend=backend, name="reset", require_graph=True
    )
    work.capture()
    assert work.graph_enabled
    before = (backend.qpos.clone(), plan.body_pos_w.clone(), plan.sensor("tip_pos").clone())
    work.replay()
    after = (backend.qpos, plan.body_pos_w, plan.sensor("tip_pos"))
    for old, new in zip(before, after):
        assert torch.equal(old, new)
    mask.copy_(torch.arange(n, device="cuda") % 4 == 1)
    work.replay()
    torch.cuda.synchronize()
    rows = mask.cpu()
    qpos, body_pos = backend.qpos.cpu(), plan.body_pos_w.cpu()
    assert torch.equal(qpos[rows], payload["qpos"].cpu()[rows])
    assert torch.equal(body_pos[~rows], before[1].cpu()[~rows])
    for world in torch.arange(n)[rows].tolist():
        ref = reference_data(backend, world)
        for b, body in enumerate(plan.body_names):
            np.testing.assert_allclose(
                body_pos[world, b].double().numpy(), ref.xpos[small_model.body(body).id], atol=5e-5
            )
