"""``state_tensors()``: the live tensors that carry a world from one step to the next (both backends)."""

import pytest
import torch
from simcore_scenes import cpu_config

import simcore
from simcore._src.mujoco_backend import MujocoBackend

BACKENDS = ["mujoco", "mjwarp"]


def _make(model, fields=(), sim="mjwarp"):
    return simcore.make_backend(sim, model, cpu_config(num_envs=3, randomized_fields=fields))


@pytest.mark.parametrize("sim", BACKENDS)
def test_restoring_the_state_tensors_replays_the_same_steps(small_model, sim):
    backend = _make(small_model, fields=("body_mass", "geom_friction"), sim=sim)
    backend.qvel.normal_(generator=torch.Generator().manual_seed(0))
    backend.model_fields["body_mass"].mul_(1.5)
    backend.step()
    saved = {name: t.clone() for name, t in backend.state_tensors().items()}
    for _ in range(3):
        backend.step()
    first = {name: t.clone() for name, t in backend.state_tensors().items()}
    for name, tensor in backend.state_tensors().items():
        tensor.copy_(saved[name])
    for _ in range(3):
        backend.step()
    for name, tensor in backend.state_tensors().items():
        assert torch.equal(tensor, first[name]), name  # both are deterministic on the CPU
    assert not torch.equal(first["qpos"], saved["qpos"])  # the steps did move the worlds


@pytest.mark.parametrize("sim", BACKENDS)
def test_restored_masses_bring_their_derived_constants(small_model, sim):
    """A world whose mass was randomized and reset resumes with that mass's inverse weights, not stale ones."""
    backend = _make(small_model, fields=("body_mass",), sim=sim)
    saved = {name: t.clone() for name, t in backend.state_tensors().items()}
    mask = torch.ones(backend.num_envs, dtype=torch.bool)
    spec = backend.reset_spec(["body_mass"])
    backend.reset(mask, {"body_mass": backend.model_fields["body_mass"] * 3.0}, spec)
    changed = backend.state_tensors()["model.body_invweight0"].clone()
    assert not torch.equal(changed, saved["model.body_invweight0"])  # the reset recomputed the constants
    for _ in range(2):
        backend.step()
    after_reset = {name: t.clone() for name, t in backend.state_tensors().items()}
    for name, tensor in backend.state_tensors().items():
        tensor.copy_(saved[name])
    backend.reset(mask, {"body_mass": backend.model_fields["body_mass"] * 3.0}, spec)
    for _ in range(2):
        backend.step()
    for name, tensor in backend.state_tensors().items():
        assert torch.equal(tensor, after_reset[name]), name


@pytest.mark.parametrize("sim", BACKENDS)
def test_state_tensors_are_views_of_the_live_state(small_model, sim):
    backend = _make(small_model, sim=sim)
    state = backend.state_tensors()
    assert {"time", "qpos", "qvel", "ctrl", "qacc_warmstart", "derived.xpos"} <= set(state)
    assert state["qpos"].data_ptr() == backend.qpos.data_ptr()
    assert all(t.shape[0] == backend.num_envs for t in state.values())


class _WithoutStateTensors(MujocoBackend):
    """A backend class that does not declare STATE_TENSORS (capabilities are per class, never inherited)."""

    capabilities = MujocoBackend.capabilities - {simcore.Capability.STATE_TENSORS}


def test_a_backend_without_the_capability_says_so(small_model):
    backend = _WithoutStateTensors(small_model, cpu_config(num_envs=2))
    with pytest.raises(NotImplementedError, match="STATE_TENSORS"):
        backend.state_tensors()
