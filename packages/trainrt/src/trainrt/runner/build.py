"""Building a run's parts from a ``TrainConfig``: device, env, agent, replay buffer, export metadata.

``train``, ``play``, ``export`` and ``bench`` all construct through these functions, so a run directory's
``config.json`` rebuilds exactly what trained.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import mujoco
import torch

import simcore
from trainrt.algos import make_agent
from trainrt.compiled import compile_refusal
from trainrt.config import TrainConfig
from trainrt.envs import EnvCfg, ManagerBasedRlEnv
from trainrt.hotpath import cold_path
from trainrt.replay import DeviceReplayBuffer
from trainrt.runner.compile_cache import point_compile_caches
from trainrt.runner.failures import ExpectedRunFailure
from trainrt.runner.summary import json_safe
from trainrt.tasks import make_task_cfg


@cold_path
def resolve_device(cfg: TrainConfig) -> str:
    """The torch device of the run: ``sim.device`` if set; CUDA for mjwarp when present; else CPU.

    ``mjwarp`` without CUDA runs on Warp's CPU device; ``mujoco`` is the CPU host bridge.
    """
    if cfg.sim.device is not None:
        return cfg.sim.device
    if cfg.sim.backend == "mjwarp" and torch.cuda.is_available():
        return "cuda"
    return "cpu"


@cold_path
def make_env_cfg(cfg: TrainConfig) -> EnvCfg:
    """The task's env config (with the ``task`` section's changes), the ``sim`` section's buffer sizes and its
    solver iteration limits (set on every model the scene's factory builds)."""
    env_cfg = make_task_cfg(cfg.task)
    scene_changes: dict[str, Any] = {
        k: v for k, v in (("nconmax", cfg.sim.nconmax), ("njmax", cfg.sim.njmax)) if v is not None
    }
    options = {
        k: v
        for k, v in (("iterations", cfg.sim.solver_iterations), ("ls_iterations", cfg.sim.ls_iterations))
        if v is not None
    }
    if options:
        scene_changes["model_factory"] = _with_options(env_cfg.scene.model_factory, options)
    if scene_changes:
        env_cfg = dataclasses.replace(env_cfg, scene=dataclasses.replace(env_cfg.scene, **scene_changes))
    return env_cfg


def _with_options(
    factory: Callable[[], mujoco.MjModel], options: dict[str, int]
) -> Callable[[], mujoco.MjModel]:
    """A model factory that builds ``factory``'s model and sets the given ``opt`` fields on it."""

    def build(**kwargs: Any) -> mujoco.MjModel:
        model = factory(**kwargs)  # e.g. a terrain scene's heightfields= or terrain_meshes=
        for name, value in options.items():
            setattr(model.opt, name, value)
        return model

    return build


@cold_path
def build_env(cfg: TrainConfig, *, num_envs: int | None = None, seed: int | None = None) -> ManagerBasedRlEnv:
    """The training env of ``cfg`` (``num_envs``/``seed`` override the config, e.g. for play).

    With ``$TRAINRT_CACHE_DIR`` set, the compilers' caches are below it first (``point_compile_caches``), so
    ``play``, ``eval`` and ``bench`` reuse what a run compiled. On CUDA its per-step term math is compiled when
    ``training.compile_collector`` asks for it, here, while the backend compiles its kernels in the background
    (the first reset waits for them). Prints the motion clip each motion command
    tracks (a tracking run says which clip it learns).
    """
    quiet_backend_log(cfg.sim.backend)
    point_compile_caches(cfg.sim.backend)  # $TRAINRT_CACHE_DIR, before the backend compiles anything
    device = resolve_device(cfg)
    refusal = compile_refusal(cfg.training.compile_collector, torch.device(device))
    env = ManagerBasedRlEnv(
        make_env_cfg(cfg),
        sim=cfg.sim.backend,
        num_envs=num_envs if num_envs is not None else cfg.algo.num_envs,
        device=device,
        seed=cfg.training.seed if seed is None else seed,
        compile_in_background=refusal is None,
    )
    if refusal is None:
        env.compile_term_math()
        env.compile_term_math_now()  # torch compiles while the backend's kernels compile beside
    else:
        env.uncompile_term_math(refusal)
    for name in env.cfg.commands:
        motion_file = getattr(env.command_manager.get_term(name), "motion_file", None)
        if motion_file is not None:
            print(f"{cfg.task.name}: command {name!r} tracks the motion clip {motion_file}", flush=True)
    return env


BACKEND_LOG_ENV = "TRAINRT_BACKEND_LOG"
"""Set to ``info`` (or ``debug``) to see the simulation backend's own log; for MuJoCo Warp, a line per kernel
module it loads or compiles."""


@cold_path
def quiet_backend_log(backend: str) -> None:
    """Show the backend library's warnings and errors only (``simcore.set_backend_log_level``): at its default
    level Warp prints a timing line for every kernel module it loads (hundreds before a MuJoCo Warp run's first
    step), burying the run's own output. ``TRAINRT_BACKEND_LOG=info`` or ``debug`` keeps that level."""
    level = os.environ.get(BACKEND_LOG_ENV, "warning").strip().lower()
    try:
        simcore.set_backend_log_level(backend, level)
    except ValueError as err:
        raise ExpectedRunFailure(f"{BACKEND_LOG_ENV}={level!r}: {err}") from None


@cold_path
def build_agent(
    cfg: TrainConfig,
    obs_dims: dict[str, int],
    num_actions: int,
    device: torch.device | str,
    *,
    learns: bool = True,
) -> Any:
    """The agent of ``cfg.algo`` for the given observation group sizes and action count (``learns=False``: one
    that only acts, for evaluation, play and export)."""
    return make_agent(
        cfg.algo.name,
        cfg.algo.params,
        obs_dims,
        num_actions,
        torch.device(device),
        seed=cfg.training.seed,
        learns=learns,
    )


class ReplayDoesNotFit(ExpectedRunFailure):
    """The replay buffer the config asks for is larger than the device memory free for it."""


@cold_path
def free_device_bytes(device: torch.device | str) -> int | None:
    """Bytes a new allocation can take on ``device``: on CUDA its free memory plus torch's unused cache, on the
    CPU the host's available memory (`host_available_bytes`); None where that is unknown."""
    device = torch.device(device)
    if device.type == "cpu":
        return host_available_bytes()
    if device.type != "cuda" or not torch.cuda.is_available():
        return None
    free, _ = torch.cuda.mem_get_info(device)
    return int(free + torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device))


@cold_path
def host_available_bytes() -> int | None:
    """The host memory new allocations can take without swapping (Linux ``MemAvailable``); None elsewhere."""
    try:
        with open("/proc/meminfo", encoding="ascii") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file counts kB
    except (OSError, ValueError, IndexError):
        return None
    return None


def _replay_does_not_fit(cfg: TrainConfig, env: Any, needed: int, free: int | None) -> ReplayDoesNotFit:
    """The error naming the replay's size, what is free, and the two settings that shrink it."""
    params = cfg.algo.params
    gib = 2**30
    available = f"{free / gib:.2f} GiB are free" if free is not None else "the allocation failed"
    return ReplayDoesNotFit(
        f"the replay buffer does not fit on {env.device}: {env.num_envs} envs x "
        f"{params.buffer_size_per_env} steps per env need {needed / gib:.2f} GiB and {available}. "
        f"Lower algo.params.buffer_size_per_env (now {params.buffer_size_per_env}) or algo.num_envs "
        f"(now {env.num_envs}); the replay's size is proportional to both. "
        + (
            "Or free the GPU's memory (another process may hold it: nvidia-smi lists them)."
            if env.device.type == "cuda"
            else "Or free host memory."
        )
    )


@cold_path
def build_replay(cfg: TrainConfig, env: Any) -> DeviceReplayBuffer:
    """The device replay buffer sized by the algorithm's hyperparameters, on the env device.

    Raises ``ReplayDoesNotFit`` (naming ``algo.params.buffer_size_per_env`` and ``algo.num_envs``) when the
    buffer is larger than the device's free memory (the host's available memory on the CPU), checked before
    allocating and again if the allocation itself runs out. A run has checked its whole estimate, the replay
    included, before it wrote anything (``trainrt.runner.preflight``); this check catches memory taken since,
    and covers callers without that pre-flight check (``bench``).
    """
    params = cfg.algo.params
    sizes = dict(
        num_envs=env.num_envs,
        capacity_per_env=params.buffer_size_per_env,
        obs_dims=env.obs_dims,
        num_actions=env.num_actions,
        n_step=params.n_step,
    )
    needed = DeviceReplayBuffer.planned_bytes(**sizes)
    free = free_device_bytes(env.device)
    if free is not None and needed > free:
        raise _replay_does_not_fit(cfg, env, needed, free)
    try:
        return DeviceReplayBuffer(**sizes, device=env.device, gamma=params.gamma)
    except torch.OutOfMemoryError as err:
        raise _replay_does_not_fit(cfg, env, needed, None) from err  # free memory said it fits: it did not


@cold_path
def env_metadata(env: Any) -> dict[str, Any]:
    """What export and deployment need without an env: sizes, action layout, observation term names."""
    observation_terms = {group: list(group_cfg.terms) for group, group_cfg in env.cfg.observations.items()}
    return {
        "obs_dims": dict(env.obs_dims),
        "num_actions": int(env.num_actions),
        "action_meta": json_safe(env.action_meta()),
        "observation_terms": observation_terms,
        "step_dt": float(env.step_dt),
        "max_episode_length": int(env.max_episode_length),
        "motion_clips": motion_clip_digests(env),
    }


@cold_path
def motion_clip_digests(env: Any) -> dict[str, dict[str, str]]:
    """``{command term: {"path", "sha256"}}`` for each command term of ``env`` that follows a motion clip file."""
    manager = env.command_manager
    clips = {}
    for name in getattr(manager, "active_terms", []):
        path = getattr(manager.get_term(name), "motion_file", None)
        if path is not None:
            clips[name] = {"path": str(path), "sha256": hashlib.sha256(Path(path).read_bytes()).hexdigest()}
    return clips


@cold_path
def env_cfg_summary(env_cfg: EnvCfg) -> dict[str, Any]:
    """Term names (and reward weights) per manager of an env config, for the run manifest."""
    return {
        "decimation": env_cfg.decimation,
        "episode_length_s": env_cfg.episode_length_s,
        "actions": list(env_cfg.actions),
        "observations": {group: list(group_cfg.terms) for group, group_cfg in env_cfg.observations.items()},
        "rewards": {name: term.weight for name, term in env_cfg.rewards.items()},
        "terminations": list(env_cfg.terminations),
        "events": {name: term.mode for name, term in env_cfg.events.items()},
        "commands": list(env_cfg.commands),
        "curriculum": list(env_cfg.curriculum),
        "metrics": list(env_cfg.metrics),
    }
