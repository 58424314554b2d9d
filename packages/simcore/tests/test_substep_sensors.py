"""Sensors on a step's last substep only (``SimConfig.sensors_every_substep=False``, the default) leave every
world's state bit for bit as computing them on every substep does; the earlier substeps really skip the sensor
work; and the solver's unrolled loop (``graph_conditional=False``) steps to the same state as the default."""

from __future__ import annotations

import mujoco
import pytest
import torch
from g1_model import load_g1
from simcore_scenes import BACKENDS, cpu_config

import simcore

_STATE = ("time", "qpos", "qvel", "act", "ctrl", "qacc_warmstart")


def _walk(backend: simcore.SimBackend, steps: int = 8, seed: int = 0) -> dict[str, torch.Tensor]:
    """Step ``backend`` under random-walk controls from a fixed seed; return its state and derived state."""
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        noise = 0.3 * torch.randn(backend.ctrl.shape, generator=gen, dtype=torch.float64)
        backend.ctrl.copy_(backend.ctrl + noise.to(backend.ctrl.dtype))
        backend.step()
    state = {name: getattr(backend, name).clone() for name in _STATE}
    state |= {f"derived.{k}": v.clone() for k, v in backend._derived._asdict().items()}
    return state


def _assert_same_bits(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    differ = [name for name in a if not torch.equal(a[name], b[name])]
    assert not differ, f"state differs in {differ}"


@pytest.mark.parametrize("name", BACKENDS)
def test_small_scene_steps_the_same_bits_with_sensors_on_the_last_substep(name, small_model):
    runs = {
        every: _walk(
            simcore.make_backend(name, small_model, cpu_config(decimation=3, sensors_every_substep=every))
        )
        for every in (True, False)
    }
    _assert_same_bits(runs[True], runs[False])
    assert runs[False]["derived.sensordata"].abs().sum() > 0  # the sensors were computed


@pytest.mark.slow
@pytest.mark.parametrize("name", BACKENDS)
def test_g1_with_contact_sensor_steps_the_same_bits(name, g1_model):
    # The self-collision model adds a contact sensor; the accelerometer needs the acceleration pass.
    model = load_g1(self_collision_pairs=[("left_knee_link", "right_knee_link")])
    types = {mujoco.mjtSensor(t) for t in model.sensor_type}
    assert {mujoco.mjtSensor.mjSENS_ACCELEROMETER, mujoco.mjtSensor.mjSENS_CONTACT} <= types
    runs = {
        every: _walk(simcore.make_backend(name, model, cpu_config(num_envs=2, sensors_every_substep=every)))
        for every in (True, False)
    }
    _assert_same_bits(runs[True], runs[False])


def test_mjwarp_skips_the_acceleration_pass_on_early_substeps(small_model, monkeypatch):
    # The accelerometer makes every sensor-computing substep run rne_postconstraint: count them.
    from mujoco_warp._src import smooth

    calls = []
    original = smooth.rne_postconstraint
    monkeypatch.setattr(smooth, "rne_postconstraint", lambda m, d: (calls.append(1), original(m, d)))
    counts = {}
    for every in (True, False):
        backend = simcore.make_backend(
            "mjwarp", small_model, cpu_config(decimation=4, sensors_every_substep=every)
        )
        calls.clear()
        backend.step()
        counts[every] = len(calls)
    assert counts == {True: 4, False: 1}


def test_mjwarp_early_substeps_follow_a_changed_option(small_model):
    backend = simcore.make_backend("mjwarp", small_model, cpu_config(decimation=2))
    backend.step()
    backend.set_option("iterations", 1)
    reference = simcore.make_backend(
        "mjwarp", small_model, cpu_config(decimation=2, sensors_every_substep=True)
    )
    reference.step()
    reference.set_option("iterations", 1)
    _assert_same_bits(_walk(backend, steps=3), _walk(reference, steps=3))


def test_unrolled_solver_loop_steps_to_the_same_state(g1_model):
    runs = {
        conditional: _walk(
            simcore.make_backend("mjwarp", g1_model, cpu_config(num_envs=2, graph_conditional=conditional)),
            steps=4,
        )
        for conditional in (True, False)
    }
    _assert_same_bits(runs[True], runs[False])


@pytest.mark.parametrize("field", ["sensors_every_substep", "graph_conditional"])
def test_flags_must_be_bools(field):
    with pytest.raises(ValueError, match=f"{field} must be a bool"):
        simcore.SimConfig(num_envs=1, **{field: 1})
