"""A short deterministic evaluation rollout: each env's first episode from a fresh reset, with the mean action.

Used at the end of ``trainrt train`` (unless ``training.final_eval=false``) on the training env, and by
``trainrt play <run_dir>`` on a new env rebuilt from the run's ``config.json`` and last checkpoint.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from trainrt.config.run_config import load_resolved_config, rollout_config
from trainrt.hotpath import cold_path
from trainrt.runner.build import build_agent, build_env
from trainrt.runner.checkpoint import (
    POLICY_CHECKPOINT_KEYS,
    check_action_mapping,
    check_motion_clips,
    load_run_checkpoint,
    load_run_weights,
)

_DONE_CHECK_EVERY = 50  # control steps between the (synchronizing) checks for "all episodes ended"


@cold_path
@torch.no_grad()
def evaluate_policy(env: Any, agent: Any, num_steps: int) -> dict[str, float | int]:
    """Roll out ``agent.act(obs, deterministic=True)`` for up to ``num_steps`` control steps after a reset.

    Every env contributes its first episode, cut at ``num_steps`` if still running.

    Returns:
        ``mean_return`` (sum of rewards), ``mean_episode_length`` (control steps), ``terminated_fraction``
        (episodes that ended in a failure), ``num_envs``, ``num_steps`` (steps actually taken: the rollout
        stops once every env's episode has ended) and ``requested_steps``.
    """
    if num_steps < 1:
        raise ValueError(f"num_steps must be >= 1, got {num_steps}")
    obs = env.reset()
    n, device = env.num_envs, torch.device(env.device)
    episode_return = torch.zeros(n, device=device, dtype=torch.float64)
    episode_length = torch.zeros(n, device=device, dtype=torch.float64)
    running = torch.ones(n, device=device, dtype=torch.bool)
    failed = torch.zeros(n, device=device, dtype=torch.bool)
    steps_taken = 0
    for step in range(num_steps):
        result = env.step(agent.act(obs, deterministic=True))
        obs = result.obs
        steps_taken += 1
        episode_return += torch.where(running, result.reward.double(), 0.0)
        episode_length += running.double()
        failed |= running & result.terminated
        running &= ~(result.terminated | result.truncated)
        if (step + 1) % _DONE_CHECK_EVERY == 0 and not bool(running.any()):
            break
    values = torch.stack([episode_return.mean(), episode_length.mean(), failed.double().mean()]).cpu()
    return {
        "mean_return": float(values[0]),
        "mean_episode_length": float(values[1]),
        "terminated_fraction": float(values[2]),
        "num_envs": n,
        "num_steps": steps_taken,
        # the rollout stops early (checked every _DONE_CHECK_EVERY steps) once every env's episode has ended
        "requested_steps": num_steps,
    }


@cold_path
def play_run(
    run_dir: str | os.PathLike,
    *,
    num_envs: int = 16,
    num_steps: int | None = None,
    sim: str | None = None,
    checkpoint: str | os.PathLike | None = None,
    motion_file: str | None = None,
) -> dict[str, Any]:
    """Rebuild a run's env and agent, load its last (or the given) checkpoint, and evaluate it.

    Args:
        run_dir: a directory written by ``trainrt train`` (holds ``config.json`` and ``checkpoints/``).
        num_envs: parallel envs of the evaluation.
        num_steps: rollout length in control steps (default: ``training.play_steps``).
        sim: backend to evaluate on (default: the run's ``sim.backend``).
        checkpoint: an iteration number or a checkpoint file of the run instead of its latest.
        motion_file: the run's motion clip at another place (default: where the run's config says).
    """
    env, agent, facts = load_run_policy(
        run_dir, num_envs=num_envs, sim=sim, checkpoint=checkpoint, motion_file=motion_file
    )
    cfg = load_resolved_config(run_dir, motion_file=motion_file)
    result = evaluate_policy(env, agent, num_steps or cfg.training.play_steps)
    return {**facts, "sim": sim or cfg.sim.backend, **result}


@cold_path
def load_run_policy(
    run_dir: str | os.PathLike,
    *,
    num_envs: int,
    sim: str | None = None,
    checkpoint: str | os.PathLike | None = None,
    motion_file: str | None = None,
) -> tuple[Any, Any, dict[str, Any]]:
    """A run's env (``num_envs``, its config, optionally another backend or its clip at another place) and
    agent with the checkpoint's weights, and the checkpoint facts (``path``, ``iteration``)."""
    cfg = rollout_config(run_dir, sim=sim, motion_file=motion_file)
    env = build_env(cfg, num_envs=num_envs)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device, learns=False)
    state = load_run_checkpoint(run_dir, checkpoint, map_location=env.device, require=POLICY_CHECKPOINT_KEYS)
    check_action_mapping(state, env)
    check_motion_clips(state, env)
    load_run_weights(state, agent, cfg, dict(env.obs_dims), action="cannot play")
    return env, agent, {"checkpoint": str(state["path"]), "iteration": int(state["iteration"])}
