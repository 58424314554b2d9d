"""Learner-only benchmark (diagnostic): milliseconds per update, eager vs CUDA-graph replay.

It attributes learner time; it is not the end-to-end throughput number (`tail_env_steps_per_sec`).
"""

import time
from typing import Any

import torch

from trainrt.algos import ALGORITHMS, AlgoName, make_agent
from trainrt.hotpath import cold_path
from trainrt.replay import DeviceReplayBuffer


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _ms_per_call(fn, calls: int, device: torch.device) -> float:
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    _synchronize(device)
    return (time.perf_counter() - start) / calls * 1e3


@cold_path
def learner_benchmark(
    algo: AlgoName,
    batch_size: int,
    obs_dims: dict[str, int],
    num_actions: int,
    device: torch.device | str,
    *,
    num_envs: int = 2048,
    rows_per_env: int = 16,
    iterations: int = 50,
    warmup: int = 5,
    cfg_overrides: dict[str, Any] | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Time one `sample + update` eagerly and replayed from the learner graph.

    The replay buffer holds `rows_per_env` random rows for `num_envs` envs (n-step as configured).
    Returns a dict with `eager_ms`, `graph_ms` (None when the graph is unavailable),
    `graph_enabled`, `fallback_reason` and the configuration that was timed.
    """
    device = torch.device(device)
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown algo {algo!r}; valid: {sorted(ALGORITHMS)}")
    cfg = ALGORITHMS[algo][1](**((cfg_overrides or {}) | {"batch_size": batch_size}))
    agent = make_agent(algo, cfg, obs_dims, num_actions, device, seed=seed)
    buffer = DeviceReplayBuffer(num_envs, rows_per_env, obs_dims, num_actions, device, cfg.n_step, cfg.gamma)
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    for _ in range(rows_per_env):
        obs = {k: torch.randn(num_envs, d, device=device, generator=g) for k, d in obs_dims.items()}
        next_obs = {k: torch.randn(num_envs, d, device=device, generator=g) for k, d in obs_dims.items()}
        done = torch.rand(num_envs, device=device, generator=g) < 0.02
        buffer.add(
            obs,
            agent.act(obs),
            torch.randn(num_envs, device=device, generator=g),
            next_obs,
            done,
            torch.zeros_like(done),
            torch.ones_like(done),
        )

    def eager_update() -> None:
        """One eager sample + update."""
        agent.update(buffer.sample(batch_size, agent.update_rng))

    for _ in range(warmup):
        eager_update()
    eager_ms = _ms_per_call(eager_update, iterations, device)
    agent.capture_update(lambda generator: buffer.sample(batch_size, generator))
    graph_ms = None
    if agent.update_graph_enabled:
        for _ in range(warmup):
            agent.replay_update()
        graph_ms = _ms_per_call(agent.replay_update, iterations, device)
    return {
        "algo": algo,
        "batch_size": batch_size,
        "obs_dims": dict(obs_dims),
        "num_actions": num_actions,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "eager_ms": eager_ms,
        "graph_ms": graph_ms,
        "graph_speedup": eager_ms / graph_ms if graph_ms else None,
        "graph_enabled": agent.update_graph_enabled,
        "fallback_reason": agent.update_fallback_reason,
        "actor_update_period": cfg.actor_update_period,
        "diagnostic": True,
    }
