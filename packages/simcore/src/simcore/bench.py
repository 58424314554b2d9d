"""Physics-only benchmark (diagnostic, not the end-to-end number): a robot's control steps, eager vs graph replay.

Usage: ``python -m simcore.bench --mjcf PATH --num-envs 1024,2048,4096,8192 --ks 1,4,16`` prints one JSON list
(``trainrt bench physics`` times a task's scene in its standing pose).
"""

from __future__ import annotations

import argparse
import json
import platform
from collections.abc import Callable, Sequence
from typing import Any

import mujoco
import numpy as np
import torch

from simcore._src.backend import SimBackend
from simcore._src.config import DEFAULT_RANDOMIZED_FIELDS, SimConfig
from simcore._src.factory import make_backend, set_backend_log_level
from simcore._src.graph import CapturedWork
from simcore._src.model import load_model
from simcore._src.timing import wall_seconds


def _seconds_per_call(fn: Callable[[], None], calls: int, device: torch.device) -> float:
    return wall_seconds(fn, calls, device) / calls


def _stand(backend: SimBackend, qpos0: torch.Tensor) -> None:
    """Every world at the pose ``qpos0`` (nq,), servos holding it."""
    spec = backend.reset_spec(("time", "qpos", "qvel", "ctrl", "qacc_warmstart"))
    payload = spec.new_payload()
    payload["time"].zero_()
    payload["qpos"].copy_(qpos0.expand_as(payload["qpos"]))
    payload["qvel"].zero_()
    payload["ctrl"].copy_(qpos0[7:].expand_as(payload["ctrl"]))
    payload["qacc_warmstart"].zero_()
    backend.reset(torch.ones(backend.num_envs, dtype=torch.bool, device=backend.device), payload, spec)


def _row(sim: SimBackend, mode: str, k: int, seconds: float, extra: dict[str, Any]) -> dict[str, Any]:
    """One result row: configuration, timing, throughput and the backend's overflow counters."""
    diag = sim.diagnostics()
    return {
        "num_envs": sim.num_envs,
        "backend": sim.name,
        "device": str(sim.device),
        "decimation": sim.decimation,
        "physics_dt": sim.physics_dt,
        "nconmax": sim.nconmax,
        "njmax": sim.njmax,
        "mode": mode,
        "steps_per_replay": k,
        "ms_per_control_step": seconds * 1e3,
        "env_steps_per_sec": sim.num_envs / seconds,
        "overflow": diag.overflow,
        "contacts": diag.contacts,
        "max_constraints": diag.max_constraints,
        **extra,
    }


def environment() -> dict[str, Any]:
    """Versions and device names to store next to the numbers."""
    import mujoco_warp
    import warp

    return {
        "torch": torch.__version__,
        "warp": warp.__version__,
        "mujoco": mujoco.__version__,
        "mujoco_warp": mujoco_warp.__version__,
        "python": platform.python_version(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }


def physics_benchmark(
    num_envs_list: Sequence[int] = (1024, 2048, 4096, 8192),
    ks: Sequence[int] = (1, 4, 16),
    *,
    backend: str = "mjwarp",
    device: str | None = None,
    decimation: int = 4,
    nconmax: int | None = None,
    njmax: int | None = None,
    randomized_fields: Sequence[str] = DEFAULT_RANDOMIZED_FIELDS,
    control_steps: int = 64,
    warmup_control_steps: int = 4,
    model: mujoco.MjModel,
    standing_qpos: np.ndarray | None = None,
) -> list[dict[str, Any]]:
    """Time ``model``'s control steps (``decimation`` physics substeps + derived refresh) per num_envs.

    One row per (num_envs, mode): ``eager`` (one ``step()`` per call) and ``graph`` for each K in ``ks``
    (one CapturedWork replay advances K control steps; its time is divided by K). A ``graph`` row whose
    capture fell back to eager execution carries ``eager_fallback_reason``. Every block starts from the
    pose ``standing_qpos`` (nq,) (default: the model's first keyframe, else ``qpos0``), servos holding it;
    overflow counters are reported so a silently truncated contact set is visible.
    """
    qpos_host = (
        standing_qpos if standing_qpos is not None else (model.key_qpos[0] if model.nkey else model.qpos0)
    )
    rows: list[dict[str, Any]] = []
    for num_envs in num_envs_list:
        config = SimConfig(
            num_envs,
            decimation=decimation,
            device=device,
            nconmax=nconmax,
            njmax=njmax,
            randomized_fields=tuple(randomized_fields),
        )
        sim = make_backend(backend, model, config)
        qpos0 = torch.tensor(qpos_host, dtype=sim.qpos.dtype, device=sim.device)
        _stand(sim, qpos0)
        for _ in range(warmup_control_steps):
            sim.step()
        _stand(sim, qpos0)
        rows.append(_row(sim, "eager", 1, _seconds_per_call(sim.step, control_steps, sim.device), {}))
        for k in ks:
            _stand(sim, qpos0)
            work = CapturedWork(
                sim.step, backend=sim, name=f"physics_k{k}", steps_per_replay=k, warmup_steps=1
            )
            work.capture()
            _stand(sim, qpos0)
            replays = max(1, control_steps // k)
            seconds = _seconds_per_call(work.replay, replays, sim.device) / k
            graph = {
                "graph_enabled": work.graph_enabled,
                "eager_fallback_reason": work.eager_fallback_reason,
                "conditional_nodes_used": work.conditional_nodes_used,
            }
            rows.append(_row(sim, "graph", k, seconds, graph))
        del sim
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point: print the benchmark rows and the environment as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mjcf", required=True, help="the robot's MJCF (PD servos from its armature)")
    parser.add_argument("--num-envs", default="1024,2048,4096,8192", help="comma-separated world counts")
    parser.add_argument("--ks", default="1,4,16", help="comma-separated control steps per graph replay")
    parser.add_argument("--backend", default="mjwarp", choices=("mujoco", "mjwarp"))
    parser.add_argument("--device", default=None)
    parser.add_argument("--decimation", type=int, default=4)
    parser.add_argument("--nconmax", type=int, default=None)
    parser.add_argument("--njmax", type=int, default=None)
    parser.add_argument("--steps", type=int, default=64, help="control steps timed per row")
    args = parser.parse_args(argv)
    # Warp's banner and module-load lines would otherwise interleave with the JSON on stdout
    set_backend_log_level("mjwarp", "warning")
    rows = physics_benchmark(
        [int(x) for x in args.num_envs.split(",")],
        [int(x) for x in args.ks.split(",")],
        backend=args.backend,
        device=args.device,
        decimation=args.decimation,
        nconmax=args.nconmax,
        njmax=args.njmax,
        control_steps=args.steps,
        model=load_model(args.mjcf, pd_from_armature=True),
    )
    print(json.dumps({"environment": environment(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
