"""Load a robot's MJCF, step it on the best available backend and print env steps per second: MuJoCo Warp with
CUDA, CPU MuJoCo without (several times faster there than MuJoCo Warp on Warp's CPU device).

Usage: ``python -m simcore.demo --mjcf PATH [num_envs] [control_steps]`` (``make demo`` passes the G1's, from
``python -m trainrt.robots path g1``). The model gets PD servos from its armature and holds its first
keyframe, or ``qpos0`` without one: a throughput demo, not a balance controller.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence

import torch

import simcore


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; returns a process exit code."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--mjcf", required=True, help="the robot's MJCF file (free root, one motor per joint)"
    )
    parser.add_argument("num_envs", nargs="?", type=int, default=None)
    parser.add_argument("control_steps", nargs="?", type=int, default=None)
    args = parser.parse_args(argv)
    on_gpu = torch.cuda.is_available()
    num_envs = args.num_envs or (2048 if on_gpu else 8)
    steps = args.control_steps or (200 if on_gpu else 20)
    model = simcore.load_model(args.mjcf, pd_from_armature=True)
    backend_name = "mjwarp" if on_gpu else "mujoco"
    backend = simcore.make_backend(backend_name, model, simcore.SimConfig(num_envs=num_envs, decimation=4))
    held = model.key_qpos[0] if model.nkey else model.qpos0
    default = torch.as_tensor(held, dtype=backend.qpos.dtype, device=backend.device)
    mask = torch.ones(num_envs, dtype=torch.bool, device=backend.device)
    spec = backend.reset_spec(("qpos", "qvel", "ctrl"))
    payload = spec.new_payload()
    payload["qpos"].copy_(default.expand_as(payload["qpos"]))
    payload["qvel"].zero_()
    payload["ctrl"].copy_(default[7:].expand_as(payload["ctrl"]))
    backend.reset(mask, payload, spec)
    work = simcore.CapturedWork(backend.step, backend=backend, name="physics")
    work.capture()
    work.replay()
    if on_gpu:
        torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(steps):
        work.replay()
    if on_gpu:
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    diag = work.diagnostics()
    print(f"backend={backend.name} device={backend.device} num_envs={num_envs} control_steps={steps}")
    print(f"graph_enabled={diag['graph_enabled']} eager_fallback_reason={diag['eager_fallback_reason']!r}")
    print(f"env steps/s: {num_envs * steps / elapsed:,.0f} ({elapsed / steps * 1e3:.2f} ms per control step)")
    print(
        f"mean root height after {steps * backend.control_dt:.1f} s: {backend.qpos[:, 2].mean().item():.3f} m"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
