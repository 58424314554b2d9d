"""``trainrt bench``: DIAGNOSTIC timings that attribute where time goes. Not the acceptance number.

- ``physics``: the backend's ``step()`` alone (decimation substeps, PD targets held at the default pose),
  eager launches vs one ``simcore.CapturedWork`` graph replay per control step.
- ``collector``: the collector step (policy -> env step -> replay write) as the runner replays it.
- ``learner``: learner updates (replay sample + gradient step): eager, one graph per update, and fused
  (compiled network math, all updates of an iteration in one graph, as the runner replays them), with
  ms per update and achieved TFLOP/s.

The number that counts is ``tail_env_steps_per_sec`` in a training run's ``run_summary.json``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import mujoco
import torch

import simcore
from trainrt.algos.bench import learner_benchmark
from trainrt.config import TrainConfig
from trainrt.hotpath import cold_path
from trainrt.runner.build import build_agent, build_env, build_replay, make_env_cfg, resolve_device
from trainrt.runner.collector import Collector
from trainrt.runner.compile_cache import point_compile_caches
from trainrt.terrain.scene import TerrainScene, scene_model

DIAGNOSTIC_LABEL = (
    "DIAGNOSTIC (attributes time; the acceptance number is tail_env_steps_per_sec of a training run)"
)


@cold_path
def physics_backend(
    cfg: TrainConfig,
    *,
    model: mujoco.MjModel | None = None,
    require: tuple[simcore.Capability, ...] = (),
    **config_changes: Any,
) -> simcore.SimBackend:
    """The bare backend of ``cfg``'s task scene (``sim`` and ``num_envs`` of ``cfg``): the scene's model (with
    its terrain, every world at the grid's centre), or ``model`` in its place, with the scene's decimation and
    contact buffer sizes; PD targets at the scene's default pose. ``config_changes`` replace
    ``simcore.SimConfig`` fields (``benchmarks/physics_variants.py``)."""
    env_cfg = make_env_cfg(cfg)
    if model is None:  # the task's scene: its terrain drawn from the run seed, its terrain meshes
        scene = env_cfg.scene
        terrain = None if scene.terrain is None else TerrainScene(scene.terrain, cfg.training.seed)
        model, _ = scene_model(scene, terrain)
    config = simcore.SimConfig(
        num_envs=cfg.algo.num_envs,
        decimation=env_cfg.decimation,
        device=resolve_device(cfg),
        nconmax=env_cfg.scene.nconmax,
        njmax=env_cfg.scene.njmax,
    )
    point_compile_caches(cfg.sim.backend)  # $TRAINRT_CACHE_DIR, before the backend compiles anything
    backend = simcore.make_backend(
        cfg.sim.backend, model, dataclasses.replace(config, **config_changes), require=require
    )
    actuated = [model.joint(int(model.actuator_trnid[i, 0])).name for i in range(model.nu)]
    default_pose = [env_cfg.scene.default_joint_pos.get(name, 0.0) for name in actuated]
    if backend.ctrl.shape[1] == len(default_pose):
        backend.ctrl.copy_(torch.tensor(default_pose, dtype=backend.ctrl.dtype, device=backend.device))
    return backend


@cold_path
def bench_physics(cfg: TrainConfig, steps: int, *, model: mujoco.MjModel | None = None) -> dict[str, Any]:
    """Control steps/s of the bare backend: eager vs graph-replayed (``sim`` and ``num_envs`` of ``cfg``).

    ``model`` replaces the task scene's model (e.g. ``benchmarks/self_collision_cost.py`` steps the G1
    without its self-collision pairs); the scene's decimation and contact buffer sizes stay.
    """
    backend = physics_backend(cfg, model=model)
    device = torch.device(backend.device)
    eager_sec = simcore.wall_seconds(backend.step, steps, device)
    work = simcore.CapturedWork(
        backend.step, backend=backend, name="bench_physics", enabled=cfg.training.cuda_graph
    )
    work.capture()
    graph_sec = simcore.wall_seconds(work.replay, steps, device)
    n = cfg.algo.num_envs
    return {
        "bench": "physics",
        "label": DIAGNOSTIC_LABEL,
        "backend": cfg.sim.backend,
        "device": str(device),
        "num_envs": n,
        "control_steps": steps,
        "eager_ms_per_step": 1e3 * eager_sec / steps,
        "eager_env_steps_per_sec": n * steps / eager_sec,
        "graph_ms_per_step": 1e3 * graph_sec / steps,
        "graph_env_steps_per_sec": n * steps / graph_sec,
        "graph": work.diagnostics(),
    }


@cold_path
def bench_collector_and_learner(
    cfg: TrainConfig, steps: int, *, learner: bool = True
) -> list[dict[str, Any]]:
    """Collector env steps/s and (optionally) learner ms/update, with the runner's own parts and graphs."""
    env = build_env(cfg)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    replay = build_replay(cfg, env)
    device = torch.device(env.device)
    k = cfg.training.collector_steps_per_replay
    collector = Collector(
        env,
        agent,
        replay,
        env.reset(),
        steps_per_replay=k,
        use_graph=cfg.training.cuda_graph,
        compile_math=cfg.training.compile_collector,
    )
    collector.prefill(cfg.algo.params.learning_starts)
    collector.capture()
    collector.collect(k)  # first replay outside the timing
    replays = max(1, steps // k)
    collect_sec = simcore.wall_seconds(lambda: collector.collect(k), replays, device)
    n = cfg.algo.num_envs
    results = [
        {
            "bench": "collector",
            "label": DIAGNOSTIC_LABEL,
            "algo": cfg.algo.name,
            "task": cfg.task.name,
            "backend": cfg.sim.backend,
            "device": str(device),
            "num_envs": n,
            "steps_per_replay": k,
            "control_steps": replays * k,
            "ms_per_control_step": 1e3 * collect_sec / (replays * k),
            "env_steps_per_sec": n * replays * k / collect_sec,
            "graph": collector.diagnostics(),
        }
    ]
    if learner:
        params = cfg.algo.params
        replay.freeze_view()
        sample_fn = lambda g: replay.sample(params.batch_size, g, from_view=True)  # noqa: E731
        modes = ("eager", "graph", "fused") if device.type == "cuda" else ("eager",)
        timing = learner_benchmark(
            agent,
            sample_fn,
            updates_per_iteration=params.updates_per_iteration,
            modes=modes,
            compile_sample=replay.compile_sample if device.type == "cuda" else None,
        )
        results.append(
            {
                "bench": "learner",
                "label": DIAGNOSTIC_LABEL,
                "algo": cfg.algo.name,
                "task": cfg.task.name,
                "batch_size": params.batch_size,
                **timing,
                "graph": agent.update_diagnostics(),
            }
        )
    return results


@cold_path
def run_benchmarks(
    cfg: TrainConfig, target: str, *, steps: int = 50, log: Callable[[str], Any] = print
) -> list[dict[str, Any]]:
    """Run the ``target`` benchmarks (physics, collector, learner or all) and log one block each."""
    valid = ("physics", "collector", "learner", "all")
    if target not in valid:
        raise ValueError(f"unknown bench target {target!r}; valid: {', '.join(valid)}")
    log(DIAGNOSTIC_LABEL)
    results: list[dict[str, Any]] = []
    if target in ("physics", "all"):
        results.append(bench_physics(cfg, steps))
    if target in ("collector", "learner", "all"):
        both = bench_collector_and_learner(cfg, steps, learner=target != "collector")
        results.extend(r for r in both if target == "all" or r["bench"] == target)
    for result in results:
        log(_format_result(result))
    return results


def _format_result(result: dict[str, Any]) -> str:
    """A few aligned lines for one benchmark result (numbers only; the graph dict is summarized)."""
    graph = result.get("graph", {})
    enabled = graph.get("graph_enabled", graph.get("update_graph_enabled"))
    reason = graph.get("eager_fallback_reason") or graph.get("update_fallback_reason")
    lines = [f"[diagnostic] {result['bench']}"]
    for key, value in result.items():
        if key in ("bench", "label", "graph") or isinstance(value, dict):
            continue
        text = f"{value:,.3f}" if isinstance(value, float) else str(value)
        lines.append(f"  {key:>26}: {text}")
    lines.append(f"  {'graph':>26}: {'enabled' if enabled else f'eager ({reason})'}")
    return "\n".join(lines)
