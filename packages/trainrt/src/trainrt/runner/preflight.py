"""The pre-flight memory estimate: what a run (or a ``play``/``eval`` rollout) needs, before it allocates it.

``estimate_memory`` adds up, from the config and a few sizes read off a one-row CPU build of the env
(``probe_env_facts``), the device bytes of each consumer:

``replay``
    the replay buffer at ``algo.params.buffer_size_per_env`` rows per env, exact (``DeviceReplayBuffer``'s own
    tensors, extrapolated from small shells, so sizes beyond int64 still add up).
``networks``
    the actor's and the critics' parameters at the configured widths, ``PARAMETER_STATE_BYTES`` each while
    training (weight, gradient, two AdamW moments, a target or bf16 copy), ``INFERENCE_PARAMETER_BYTES``
    for a rollout.
``update batch``
    one update's activations: ``algo.params.batch_size`` x the networks' hidden and output units x
    ``ACTIVATION_BYTES_PER_UNIT``, plus the sampled transitions.
``env state``
    per env: the physics world (``sim_world_bytes``: MuJoCo Warp's per-world buffers from the model's sizes and
    ``sim.nconmax``/``sim.njmax``; CPU MuJoCo's ``MjData``) and the env's own tensors, observations and the
    actor's acting pass (``ENV_BYTES_PER_OBS_UNIT``).
``motion clips``
    the tracked clips on the device (read off the probe, which loads them; ``trainrt.motion.files`` refuses a
    file whose arrays would not fit before decompressing it).
``runtime``
    on CUDA, what a run holds whatever its sizes (``CUDA_RUNTIME_BYTES``).

The factors are calibrated on an H100 (each constant says against what). There the estimate came to 1.05x
(SAC walking) and 1.007x (FlashSAC tracking) of the device memory the canonical presets' runs held, and to
1.9x and 1.5x at 8192 envs with batches of 32768 and 16384: close where the replay dominates, upper-leaning
elsewhere. That is enough to refuse a setting that cannot fit (a billion envs, a batch of 10^12, a width of
100000) before the run directory is written, naming the setting to lower. ``check_memory_fits`` compares the
estimate with the device's free memory (CUDA) or the host's available memory (CPU) and raises
``MemoryDoesNotFit``, a usage error.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
from collections.abc import Sequence
from typing import Any

import mujoco
import torch

from trainrt.config import TrainConfig
from trainrt.config.run_config import rollout_config
from trainrt.hotpath import cold_path
from trainrt.replay import DeviceReplayBuffer
from trainrt.runner.build import build_env, free_device_bytes, resolve_device

FLOAT_BYTES = 4

PARAMETER_STATE_BYTES = 5 * FLOAT_BYTES
"""Device bytes per network parameter while training: the float32 weight, its gradient, AdamW's two moments,
and a target critic's copy or FlashSAC's bf16 copies."""

INFERENCE_PARAMETER_BYTES = 2 * FLOAT_BYTES
"""Device bytes per network parameter of a rollout (``play``, ``eval``): the agent holds the weights and a
target critic copy, no gradients or optimizer moments."""

ACTIVATION_BYTES_PER_UNIT = 8 * FLOAT_BYTES
"""Device bytes per hidden or output unit and sampled transition of one update (the activations its passes keep
for the backward, and the backward's gradients): about 11 (SAC) and 18 (FlashSAC) on an H100 under bf16
autocast with the compiled update (8192-env runs' device memory less their replay and env state); twice the
larger leaves room for float32 (CPU) and eager updates."""

ENV_BYTES_PER_OBS_UNIT = 32 * FLOAT_BYTES
"""Device bytes per observation unit and env of the env's own tensors besides the physics (observation buffers
and histories, term outputs, the step's temporaries). With ``sim_world_bytes`` and the acting pass it estimates
180 (walking) and 211 (tracking) KB per G1 env, where an H100 measured 163 and 171 for the world and the env
together (512 against 4608 envs, eager steps)."""

CUDA_RUNTIME_BYTES = 512 * 2**20
"""Device bytes a CUDA run holds whatever its sizes: the kernels torch.compile, Triton and Warp load, cuBLAS
workspaces, the caching allocators' slack. Set so the canonical presets' estimates (which it tips from 0.99x to
1.007x for tracking) stay above what their runs held."""

MUJOCO_ARENA_FACTOR = 6
"""CPU MuJoCo keeps one ``MjData`` per env; its stack (``narena``, 15 MB for the G1) is touched only as far as
a step's contacts and constraint rows reach: about six times MuJoCo Warp's per-world buffers (0.94 MB per G1 env
measured as resident memory, against 0.15 MB)."""

REPLAY_SAMPLE_COPIES = 3
"""Copies of a sampled transition an update holds: the gathered rows, their normalized observations, the
n-step targets."""


class MemoryDoesNotFit(ValueError):
    """The config needs more device memory than is free; the message names the biggest consumers and the fix."""


@dataclasses.dataclass(frozen=True)
class EnvFacts:
    """Sizes the estimate reads off a one-row CPU build of the env (cheap: no per-env memory).

    Attributes:
        obs_dims: observation group sizes, e.g. {"policy": 98, "critic": 106}.
        num_actions: A.
        model: the env's MuJoCo model (its sizes size a world).
        nconmax: contacts per world, as the config resolves it (``sim.nconmax`` or the model's default).
        njmax: constraint rows per world, likewise.
        motion_bytes: the env's motion clips on the device (0 without one).
    """

    obs_dims: dict[str, int]
    num_actions: int
    model: mujoco.MjModel
    nconmax: int
    njmax: int
    motion_bytes: int


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Device bytes a run needs, by consumer (see the module docstring for what each one counts)."""

    replay: int
    networks: int
    update_batch: int
    env_state: int
    motion_clips: int
    runtime: int

    @property
    def total(self) -> int:
        """The sum of the consumers."""
        return sum(self.consumers().values())

    def consumers(self) -> dict[str, int]:
        """``{consumer name: bytes}``, largest first."""
        named = {
            field.name.replace("_", " "): getattr(self, field.name) for field in dataclasses.fields(self)
        }
        return dict(sorted(named.items(), key=lambda item: -item[1]))


@cold_path
def sim_world_bytes(model: mujoco.MjModel, nconmax: int, njmax: int, backend: str) -> int:
    """Device bytes of one world of ``model`` on ``backend`` ("mjwarp" or "mujoco"), from the model's sizes.

    MuJoCo Warp's per-world buffers, in float32 words: constraint rows (``njmax`` x (nv + 20): the Jacobian row
    and about 20 per-row values), contacts (``nconmax`` x 42), the mass-matrix factors (3 nv^2 + 3 nM) and the
    per-body, per-dof and per-geom kinematics (100, 32 and 12 words). Within 2% of ``mujoco_warp.put_data`` for
    the G1 models. CPU MuJoCo adds its ``MjData`` buffer and arena (``MUJOCO_ARENA_FACTOR``).
    """
    nv = model.nv
    words = njmax * (nv + 20) + 42 * nconmax
    words += 3 * nv * nv + 3 * model.nM + 100 * model.nbody + 32 * nv + 12 * model.ngeom
    words += 4 * model.nq + 12 * model.nsite + model.nsensordata + 8 * model.nu
    world = FLOAT_BYTES * words
    if backend == "mujoco":
        return model.nbuffer + MUJOCO_ARENA_FACTOR * world
    return world


@cold_path
def probe_env_facts(cfg: TrainConfig) -> EnvFacts | None:
    """The sizes of ``cfg``'s env, from a one-row CPU MuJoCo build; None when it cannot be built (the builder
    that follows names the problem, with the setting to change)."""
    sim = cfg.sim.model_copy(update={"backend": "mujoco", "device": "cpu"})
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the real env says what it builds
            probe = build_env(cfg.model_copy(update={"sim": sim}), num_envs=1)
    except (ValueError, FileNotFoundError):
        return None
    try:
        backend = probe.backend
        return EnvFacts(
            obs_dims=dict(probe.obs_dims),
            num_actions=int(probe.num_actions),
            model=backend.mj_model,
            nconmax=backend.nconmax,
            njmax=backend.njmax,
            motion_bytes=_motion_clip_bytes(probe),
        )
    finally:
        probe.close()


def _motion_clip_bytes(env: Any) -> int:
    """Bytes of the tensors of every motion clip the env's command terms follow."""
    manager = env.command_manager
    total = 0
    for name in getattr(manager, "active_terms", []):
        clip = getattr(manager.get_term(name), "clip", None)
        for field in dataclasses.fields(clip) if dataclasses.is_dataclass(clip) else ():
            value = getattr(clip, field.name)
            if hasattr(value, "element_size"):
                total += value.numel() * value.element_size()
    return total


@cold_path
def estimate_memory(
    cfg: TrainConfig, facts: EnvFacts, *, num_envs: int, training: bool = True
) -> MemoryEstimate:
    """Device bytes ``cfg`` needs with ``num_envs`` envs: a training run, or a rollout (``training=False``:
    no replay, no update). Python integers throughout, so any size adds up without overflowing."""
    params = cfg.algo.params
    runtime = CUDA_RUNTIME_BYTES if resolve_device(cfg).startswith("cuda") else 0
    networks = network_layers(cfg, facts.obs_dims, facts.num_actions)
    parameters = sum(network_parameters(members, layers) for members, layers in networks.values())
    units = sum(network_units(members, layers) for members, layers in networks.values())
    acting_units = network_units(*networks["actor"]) + networks["actor"][1][0][0]  # its input too
    nconmax = facts.nconmax if cfg.sim.nconmax is None else cfg.sim.nconmax
    njmax = facts.njmax if cfg.sim.njmax is None else cfg.sim.njmax
    world = sim_world_bytes(facts.model, nconmax, njmax, cfg.sim.backend)
    per_env = world + FLOAT_BYTES * acting_units + ENV_BYTES_PER_OBS_UNIT * sum(facts.obs_dims.values())
    if not training:
        return MemoryEstimate(
            replay=0,
            networks=INFERENCE_PARAMETER_BYTES * parameters,
            update_batch=0,
            env_state=num_envs * per_env,
            motion_clips=facts.motion_bytes,
            runtime=runtime,
        )
    transition_units = 2 * sum(facts.obs_dims.values()) + facts.num_actions + 8
    return MemoryEstimate(
        replay=replay_bytes(num_envs, params.buffer_size_per_env, facts.obs_dims, facts.num_actions),
        networks=PARAMETER_STATE_BYTES * parameters,
        update_batch=params.batch_size
        * (ACTIVATION_BYTES_PER_UNIT * units + REPLAY_SAMPLE_COPIES * FLOAT_BYTES * transition_units),
        env_state=num_envs * per_env,
        motion_clips=facts.motion_bytes,
        runtime=runtime,
    )


@cold_path
def replay_bytes(num_envs: int, capacity_per_env: int, obs_dims: dict[str, int], num_actions: int) -> int:
    """``DeviceReplayBuffer.planned_bytes`` for any sizes: it is bilinear in envs and rows per env, so four
    small shells give it exactly, without a shape that overflows int64 (``n_step`` sizes no tensor)."""

    def shell(envs: int, rows: int) -> int:
        return DeviceReplayBuffer.planned_bytes(envs, rows, obs_dims, num_actions)

    f11, f21, f12, f22 = shell(1, 1), shell(2, 1), shell(1, 2), shell(2, 2)
    n, c = num_envs - 1, capacity_per_env - 1
    return f11 + n * (f21 - f11) + c * (f12 - f11) + n * c * (f22 - f21 - f12 + f11)


Layers = list[tuple[int, int, int]]
"""A network's layers as ``(inputs, outputs, how many such layers)``, input layer first, output layer last."""


@cold_path
def network_layers(
    cfg: TrainConfig, obs_dims: dict[str, int], num_actions: int
) -> dict[str, tuple[int, Layers]]:
    """``{"actor": (members, layers), "critic": (members, layers)}`` of ``cfg``'s agent, as ``trainrt.algos``
    builds them: SAC's funnels of widths w, w/2, w/4; FlashSAC's embedding and inverted-residual blocks of width
    w x expansion (counted, not listed, so any number of blocks adds up). The critic's two members are stacked."""
    params = cfg.algo.params
    actor_in = obs_dims.get(params.actor_obs_group, 0)
    critic_in = obs_dims.get(params.critic_obs_group, 0) + num_actions
    if cfg.algo.name == "flashsac":

        def layers(d_in: int, width: int, blocks: int, d_out: int) -> Layers:
            wide = width * params.block_expansion
            return [(d_in, width, 1), (width, wide, blocks), (wide, width, blocks), (width, d_out, 1)]

        actor = layers(actor_in, params.actor_hidden_dim, params.actor_num_blocks, 2 * num_actions)
        critic = layers(critic_in, params.critic_hidden_dim, params.critic_num_blocks, params.num_atoms)
    else:

        def layers(d_in: int, width: int, d_out: int) -> Layers:
            return [
                (d_in, width, 1),
                (width, width // 2, 1),
                (width // 2, width // 4, 1),
                (width // 4, d_out, 1),
            ]

        actor = layers(actor_in, params.actor_hidden_dim, 2 * num_actions)
        critic = layers(critic_in, params.critic_hidden_dim, params.num_atoms)
    return {"actor": (1, actor), "critic": (2, critic)}


def network_parameters(members: int, layers: Layers) -> int:
    """Parameters of ``members`` stacked networks: each layer's weights, and per output unit a bias and a
    norm's scale and shift (the output layer: a bias)."""
    hidden = sum(count * (d_in * d_out + 3 * d_out) for d_in, d_out, count in layers[:-1])
    d_in, d_out, count = layers[-1]
    return members * (hidden + count * (d_in * d_out + d_out))


def network_units(members: int, layers: Layers) -> int:
    """Output units of every layer of ``members`` stacked networks: the activations of one sample."""
    return members * sum(count * d_out for _, d_out, count in layers)


@cold_path
def check_memory_fits(
    cfg: TrainConfig,
    *,
    num_envs: int | None = None,
    training: bool = True,
    env_setting: tuple[str, str] | None = None,
) -> MemoryEstimate | None:
    """``MemoryDoesNotFit`` (a ``ValueError``) when ``cfg`` needs more than the device has free; else the
    estimate (None where free memory or the env's sizes are unknown).

    Args:
        cfg: the config (its device: ``trainrt.runner.build.resolve_device``).
        num_envs: envs of the run or rollout (default ``algo.num_envs``).
        training: a training run (replay, update) rather than a rollout.
        env_setting: the setting behind ``num_envs`` and how it was given, for the message (default
            ``("algo.num_envs", "algo.num_envs=<num_envs>")``; ``play`` and ``eval`` name ``--num-envs``).
    """
    num_envs = cfg.algo.num_envs if num_envs is None else num_envs
    device = resolve_device(cfg)
    free = free_device_bytes(device)
    if free is None:
        return None
    facts = probe_env_facts(cfg)
    if facts is None:
        return None
    estimate = estimate_memory(cfg, facts, num_envs=num_envs, training=training)
    if estimate.total > free:
        env_setting = env_setting or ("algo.num_envs", f"algo.num_envs={num_envs}")
        settings = _settings_to_lower(cfg, facts, free, num_envs, training, env_setting)
        raise MemoryDoesNotFit(_does_not_fit(estimate, settings, free, device))
    return estimate


@cold_path
def memory_record(
    estimate: MemoryEstimate | None, device: torch.device | str | None
) -> dict[str, Any] | None:
    """The run summary's ``memory``: the pre-flight ``estimate`` by consumer beside what is in use on the
    device now (CUDA only: the whole device's used bytes and torch's peak reservation); None without an
    estimate."""
    if estimate is None:
        return None
    record: dict[str, Any] = {
        "estimate_bytes": {name.replace(" ", "_"): size for name, size in estimate.consumers().items()},
        "estimate_total_bytes": estimate.total,
        "device_used_bytes": None,
        "torch_peak_reserved_bytes": None,
    }
    if device is not None and torch.device(device).type == "cuda" and torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info(device)
        record["device_used_bytes"] = int(total - free)
        record["torch_peak_reserved_bytes"] = int(torch.cuda.max_memory_reserved(device))
    return record


@cold_path
def check_rollout_memory(
    run_dir: str | os.PathLike,
    *,
    num_envs: int,
    sim: str | None = None,
    motion_file: str | None = None,
    evaluation: bool = False,
    scenarios: Sequence[str] | None = None,
) -> MemoryEstimate | None:
    """``check_memory_fits`` for a rollout of a run's policy (``play``, ``eval``): ``num_envs`` envs (times
    the selected ``scenarios`` of the task's evaluation with ``evaluation``, where ``eval`` runs a block of
    envs per scenario), on ``sim``."""
    cfg = rollout_config(run_dir, sim=sim, motion_file=motion_file)
    blocks = 1
    if evaluation:
        from trainrt.tasks.registry import task_spec

        spec = task_spec(cfg.task.name).evaluation_spec()
        # an evaluation without a scenario option refuses the names later (evaluate_run) with its own message
        blocks = len(spec.select(scenarios if spec.scenario_option else None))
    given = f"--num-envs {num_envs}" + (f" (x {blocks} evaluation scenarios)" if blocks > 1 else "")
    return check_memory_fits(
        cfg, num_envs=num_envs * blocks, training=False, env_setting=("--num-envs", given)
    )


_LEAST = {
    "algo.params.buffer_size_per_env": 1,
    "algo.params.batch_size": 1,
    "algo.params.critic_hidden_dim": 4,
    "algo.params.actor_hidden_dim": 4,
    "algo.params.critic_num_blocks": 0,
    "algo.params.actor_num_blocks": 0,
    "algo.params.block_expansion": 1,
    "algo.params.num_atoms": 2,
    "sim.nconmax": 1,
    "sim.njmax": 1,
}
"""The settings the estimate of a training run grows with (besides the env count), and the least each may take."""


def _settings_to_lower(
    cfg: TrainConfig,
    facts: EnvFacts,
    free: int,
    num_envs: int,
    training: bool,
    env_setting: tuple[str, str],
) -> list[tuple[str, str]]:
    """``(key, as given)`` of each setting that, lowered alone to its least, lets the estimate fit (the one
    that saves the most when none does), the biggest saving first; a rollout can lower only its env count."""
    lowered = {env_setting: estimate_memory(cfg, facts, num_envs=1, training=training).total}
    for key, least in _LEAST.items() if training else ():
        value = _setting(cfg, key)
        if value is not None and value > least:
            at_least = _with_setting(cfg, key, least)
            lowered[(key, f"{key}={value}")] = estimate_memory(at_least, facts, num_envs=num_envs).total
    ranked = sorted(lowered, key=lowered.__getitem__)
    return [setting for setting in ranked if lowered[setting] <= free] or ranked[:1]


def _setting(cfg: TrainConfig, key: str) -> Any:
    """The value of the dotted ``key`` in ``cfg`` (None where this config has no such setting)."""
    node: Any = cfg
    for part in key.split("."):
        node = getattr(node, part, None)
    return node


def _with_setting(cfg: TrainConfig, key: str, value: Any) -> TrainConfig:
    """``cfg`` with the dotted ``key`` set to ``value``, unvalidated: a what-if for the estimate alone."""
    *path, name = key.split(".")
    sections = [cfg]
    for part in path:
        sections.append(getattr(sections[-1], part))
    node = sections[-1].model_copy(update={name: value})
    for parent, part in zip(reversed(sections[:-1]), reversed(path)):
        node = parent.model_copy(update={part: node})
    return node


def _does_not_fit(estimate: MemoryEstimate, settings: list[tuple[str, str]], free: int, device: str) -> str:
    """One line: the settings to lower as given, the total and its parts, what is free, the fix."""
    consumers = estimate.consumers()
    parts = ", ".join(f"{name} {format_bytes(size)}" for name, size in consumers.items() if size)
    has = "the host has" if device == "cpu" else f"{device} has"
    free_word = "available" if device == "cpu" else "free"
    return (
        f"{' and '.join(given for _, given in settings)} need{'s' if len(settings) == 1 else ''} "
        f"~{format_bytes(estimate.total)}, most for the {next(iter(consumers))} ({parts}); {has} "
        f"{format_bytes(free)} {free_word}: lower {' or '.join(key for key, _ in settings)}"
    )


_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB")


def format_bytes(size: int) -> str:
    """``size`` in binary units to three significant digits ("4.1 TiB"); any integer, however large."""
    power = 0
    while power < len(_UNITS) - 1 and size >= 1024 ** (power + 1):
        power += 1
    if power == 0:
        return f"{size} B"
    in_unit_below = size // 1024 ** (power - 1)  # exact, so no float of an unbounded integer
    if in_unit_below.bit_length() > 1000:
        return f"2^{size.bit_length() - 1} B"
    value = in_unit_below / 1024
    return f"{value:.0f} {_UNITS[power]}" if 999.5 <= value < 1024 else f"{value:.3g} {_UNITS[power]}"
