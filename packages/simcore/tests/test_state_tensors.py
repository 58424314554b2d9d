"""``state_tensors()``: the live tensors that carry a world from one step to the next (MuJoCo Warp)."""

import pytest
import torch
from simcore_scenes import cpu_config

import simcore


def _make(model, fields=()):
    return simcore.make_backend("mjwarp", model, cpu_config(num_envs=3, randomized_fields=fields))


def test_restoring_the_state_tensors_replays_the_same_steps(small_model):
    backend = _make(small_model, fields=("body_mass", "geom_friction"))
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
        assert torch.equal(tensor, first[name]), name  # Warp's CPU device is deterministic
    assert not torch.equal(first["qpos"], saved["qpos"])  # the steps did move the worlds


def test_state_tensors_are_views_of_the_live_state(small_model):
    backend = _make(small_model)
    state = backend.state_tensors()
    assert {"time", "qpos", "qvel", "ctrl", "qacc_warmstart", "derived.xpos"} <= set(state)
    assert state["qpos"].data_ptr() == backend.qpos.data_ptr()
    assert all(t.shape[0] == backend.num_envs for t in state.values())


def test_a_backend_without_the_capability_says_so(small_model):
    backend = simcore.make_backend("mujoco", small_model, cpu_config(num_envs=2))
    with pytest.raises(NotImplementedError, match="STATE_TENSORS"):
        backend.state_tensors()
