"""mujoco (CPU, float64) and mjwarp (Warp CPU device, float32) agree over short horizons from identical states.

Tolerances come from measurements (max |difference| over worlds and coordinates, 3 worlds):
- G1, PD-held default pose with 0.05 rad random targets: qpos 4.5e-8 / qvel 1.1e-6 after 1 physics step,
  qpos 2.1e-6 / qvel 8.9e-5 after 10. Contacts amplify float32 rounding beyond that, so horizons stay short.
- Small scene with every supported per-world field varied per world: qpos 1.3e-8 / qvel 2.3e-6 after 1 step,
  qpos 7.4e-8 / qvel 1.4e-6 after 10.
The bounds below leave a margin of 20x or more.
"""

from __future__ import annotations

import mujoco
import pytest
import torch
from g1_model import g1_default_qpos
from simcore_scenes import cpu_config

import simcore
from simcore._src.config import DEFAULT_RANDOMIZED_FIELDS, PER_WORLD_MODEL_FIELDS

NUM_ENVS = 3


def start_both(
    model: mujoco.MjModel, payload_fn, randomized_fields: tuple[str, ...] = DEFAULT_RANDOMIZED_FIELDS
) -> dict[str, simcore.SimBackend]:
    """Both backends with decimation 1, every world reset to the same float32-representable state."""
    backends = {}
    values = payload_fn(model)  # drawn once, shared by both backends
    config = cpu_config(num_envs=NUM_ENVS, decimation=1, randomized_fields=randomized_fields)
    for name in ("mujoco", "mjwarp"):
        backend = simcore.make_backend(name, model, config)
        channels = ("time", "qpos", "qvel", "act", "ctrl", "qacc_warmstart", *backend.model_fields)
        spec = backend.reset_spec(channels)
        payload = spec.new_payload()
        for channel, value in values.items():
            payload[channel].copy_(value.float())  # float32-exact values, so both start from identical state
        payload["qvel"].zero_()
        payload["act"].zero_()
        payload["time"].zero_()
        payload["qacc_warmstart"].zero_()
        backend.reset(torch.ones(NUM_ENVS, dtype=torch.bool), payload, spec)
        backends[name] = backend
    return backends


def max_differences(backends: dict[str, simcore.SimBackend]) -> tuple[float, float]:
    cpu, warp = backends["mujoco"], backends["mjwarp"]
    qpos = (cpu.qpos - warp.qpos.double()).abs().max().item()
    qvel = (cpu.qvel - warp.qvel.double()).abs().max().item()
    return qpos, qvel


def advance(backends: dict[str, simcore.SimBackend], steps: int) -> None:
    for backend in backends.values():
        for _ in range(steps):
            backend.step()


def test_g1_parity_over_short_horizons(g1_model):
    gen = torch.Generator().manual_seed(0)
    qpos0 = torch.tensor(g1_default_qpos(g1_model))

    def payload(model):
        targets = qpos0[7:] + 0.05 * torch.randn(NUM_ENVS, model.nu, generator=gen, dtype=torch.float64)
        return {"qpos": qpos0.expand(NUM_ENVS, -1), "ctrl": targets}

    backends = start_both(g1_model, payload)
    advance(backends, 1)
    qpos, qvel = max_differences(backends)
    assert qpos < 1e-6 and qvel < 2e-5, (qpos, qvel)
    advance(backends, 9)
    qpos, qvel = max_differences(backends)
    assert qpos < 5e-5 and qvel < 2e-3, (qpos, qvel)
    # the robot moved: a parity of standing still would prove nothing
    assert (backends["mujoco"].qpos - qpos0).abs().max() > 1e-3


def test_small_scene_parity_with_every_per_world_model_field(small_model):
    gen = torch.Generator().manual_seed(1)
    scale = torch.tensor([0.6, 1.0, 1.7], dtype=torch.float64)  # one factor per world

    def payload(model):
        qpos = torch.tensor(model.qpos0).repeat(NUM_ENVS, 1)
        qpos[:, 2] = 0.1  # box resting on the floor
        qpos[:, 7] = 0.3
        values = {
            "qpos": qpos,
            "ctrl": 0.5 + 0.1 * torch.rand(NUM_ENVS, model.nu, generator=gen, dtype=torch.float64),
        }
        for name in PER_WORLD_MODEL_FIELDS:
            field = torch.tensor(getattr(model, name)).repeat(NUM_ENVS, *[1] * getattr(model, name).ndim)
            values[name] = field * scale.view(-1, *[1] * (field.dim() - 1))
        values["body_ipos"] = torch.tensor(model.body_ipos).repeat(NUM_ENVS, 1, 1)
        values["body_ipos"][:, model.body("forearm").id, 0] += 0.05 * scale  # a com offset, not a scale
        return values

    backends = start_both(small_model, payload, randomized_fields=PER_WORLD_MODEL_FIELDS)
    for name in PER_WORLD_MODEL_FIELDS:
        assert torch.equal(
            backends["mjwarp"].model_fields[name].double(),
            backends["mujoco"].model_fields[name].float().double(),
        )
    advance(backends, 1)
    qpos, qvel = max_differences(backends)
    assert qpos < 1e-6 and qvel < 1e-4, (qpos, qvel)
    advance(backends, 9)
    qpos, qvel = max_differences(backends)
    assert qpos < 1e-5 and qvel < 1e-3, (qpos, qvel)
    # per-world fields act per world: the differently geared and damped arms have moved apart
    arm = backends["mjwarp"].qpos[:, 7]
    assert (arm[0] - arm[2]).abs() > 1e-3


@pytest.mark.gpu
def test_g1_parity_on_cuda(g1_model):
    """The same short-horizon agreement with mjwarp on CUDA (run with ``-m gpu`` on a GPU machine)."""
    gen = torch.Generator().manual_seed(2)
    qpos0 = torch.tensor(g1_default_qpos(g1_model))
    targets = qpos0[7:] + 0.05 * torch.randn(NUM_ENVS, g1_model.nu, generator=gen, dtype=torch.float64)
    cpu = simcore.make_backend("mujoco", g1_model, cpu_config(num_envs=NUM_ENVS, decimation=1))
    gpu = simcore.make_backend("mjwarp", g1_model, simcore.SimConfig(NUM_ENVS, decimation=1, device="cuda"))
    for backend in (cpu, gpu):
        spec = backend.reset_spec(("qpos", "qvel", "ctrl", "qacc_warmstart"))
        payload = spec.new_payload()
        payload["qpos"].copy_(qpos0.float().expand(NUM_ENVS, -1))
        payload["ctrl"].copy_(targets.float())
        payload["qvel"].zero_()
        payload["qacc_warmstart"].zero_()
        backend.reset(torch.ones(NUM_ENVS, dtype=torch.bool, device=backend.device), payload, spec)
    for _ in range(10):
        cpu.step()
        gpu.step()
    qpos = (cpu.qpos - gpu.qpos.double().cpu()).abs().max().item()
    qvel = (cpu.qvel - gpu.qvel.double().cpu()).abs().max().item()
    assert qpos < 5e-5 and qvel < 2e-3, (qpos, qvel)
