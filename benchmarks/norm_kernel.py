"""DIAGNOSTIC: SAC's hidden-layer tail, the fused kernel against inductor's own kernels, per layer and per network.

    python benchmarks/norm_kernel.py [--rows 8192] [--geometries 8192x256x4096x1,8192x512x4096x2] [--repeats 10]
        [--out result.json]

Each number is the GPU time of all kernels one call launches (the torch profiler's kernel durations, summed
over ``--repeats`` calls after 3 warm-up calls, divided by the calls), with bf16 activations under autocast as
in the learner:

1. every layer tail of the walk's SAC networks alone (the twin critic: 2 members of width 768, 384, 192; the
   actor: 1 member of 512, 256, 128), forward, and forward plus backward: torch.compile of the torch tail,
   ending in the bf16 cast the next product applies, against the kernel under each launch geometry
   (``TILExPROGRAMSxBACKWARDTILExSTAGES``: `fused_norm._TILE_ELEMENTS`, `fused_norm._TARGET_PROGRAMS`,
   `fused_norm._BACKWARD_TILE_ELEMENTS` and `fused_norm._BACKWARD_STAGES`; the last two may be left out);
2. the twin critic as a network (`StackedLayerNormMlp` at the walk's sizes), compiled, forward plus backward,
   with the kernel under each geometry and without it (the network's ``fused_norm_kernel`` off, as
   ``SacConfig.fused_norm_kernel=false`` sets it): the kernel's effect where inductor also fuses the layers' neighbours, which an opaque op prevents.

Without CUDA it is a smoke test: the layers run in Triton's interpreter (set ``TRITON_INTERPRET=1``), the
reference runs eagerly, the times are CPU wall times, and the network is skipped. The learner-level
measurement is ``benchmarks/learner_variants.py --variants padded,compiled_norm``; the acceptance number stays
``tail_env_steps_per_sec`` of a training run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from trainrt.algos import fused_norm, networks

EPS = 1e-5
CRITIC_WIDTHS = (768, 384, 192)
ACTOR_WIDTHS = (512, 256, 128)
CRITIC_INPUT = 135  # the walk's 106 critic observations and 29 actions
NUM_ATOMS = 101
WARMUP_CALLS = 3


Geometry = tuple[int, int, int, int]
"""(forward tile elements, backward programs, backward tile elements, backward pipeline stages)."""


def parse_geometries(text: str) -> list[Geometry]:
    """``"8192x256x4096x2,4096x512"`` -> [(8192, 256, 4096, 2), (4096, 512, 4096, 1)]:
    TILExPROGRAMS[xBACKWARDTILE[xSTAGES]], the last two defaulting to the shipped values; ValueError naming the
    bad entry."""
    geometries = []
    for entry in (e for e in text.split(",") if e):
        parts = entry.split("x")
        if not (2 <= len(parts) <= 4 and all(p.isdigit() and int(p) > 0 for p in parts)):
            raise ValueError(
                f"geometry {entry!r} is not TILExPROGRAMS[xBACKWARDTILE[xSTAGES]] with positive integers "
                "(e.g. --geometries 8192x256x4096x1)"
            )
        values = [int(p) for p in parts]
        shipped = (fused_norm._BACKWARD_TILE_ELEMENTS, fused_norm._BACKWARD_STAGES)
        tile, programs, backward_tile, stages = values + list(shipped[len(values) - 2 :])
        geometries.append((tile, programs, backward_tile, stages))
    if not geometries:
        raise ValueError("give at least one geometry (e.g. --geometries 8192x256x4096x1)")
    return geometries


def label(geometry: Geometry) -> str:
    return "x".join(str(v) for v in geometry)


_CONSTANTS = ("_TILE_ELEMENTS", "_TARGET_PROGRAMS", "_BACKWARD_TILE_ELEMENTS", "_BACKWARD_STAGES")


@contextlib.contextmanager
def launch_geometry(values: Geometry) -> Iterator[None]:
    """The kernel's launch constants for the duration of the block."""
    saved = tuple(getattr(fused_norm, name) for name in _CONSTANTS)
    for name, value in zip(_CONSTANTS, values, strict=True):
        setattr(fused_norm, name, value)
    try:
        yield
    finally:
        for name, value in zip(_CONSTANTS, saved, strict=True):
            setattr(fused_norm, name, value)


def time_per_call_us(call: Callable[[], Any], repeats: int, device: torch.device) -> float:
    """Microseconds per call: GPU kernel time on CUDA (profiler), CPU wall time otherwise."""
    for _ in range(WARMUP_CALLS):
        call()
    if device.type != "cuda":
        started = time.perf_counter()
        for _ in range(repeats):
            call()
        return 1e6 * (time.perf_counter() - started) / repeats
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            call()
        torch.cuda.synchronize(device)
    kernel_us = sum(e.device_time for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    return kernel_us / repeats


def torch_tail(
    h: torch.Tensor, linear_bias: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor
) -> torch.Tensor:
    """The layer tail as torch operations, cast back to the activations' dtype as the next product does."""
    normalized = F.layer_norm(h + linear_bias.to(h.dtype), (h.shape[-1],), eps=EPS)
    return F.silu(normalized * weight + bias).to(h.dtype)


def autocast(device: torch.device) -> contextlib.AbstractContextManager[Any]:
    """bf16 autocast on CUDA (as the learner), nothing on the CPU."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    return torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False)


def layer_times(
    members: int, width: int, rows: int, geometries: list[Geometry], repeats: int, device: torch.device
) -> dict[str, list[float]]:
    """{arm: [forward us, forward + backward us]} for one layer tail; arms: ``compiled`` (``eager`` off CUDA)
    and ``kernel TILExPROGRAMSxBACKWARDTILExSTAGES``."""
    g = torch.Generator(device="cpu").manual_seed(0)
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    h = torch.randn(members, rows, width, generator=g).to(device, dtype).requires_grad_()
    params = [torch.randn(members, 1, width, generator=g).to(device).requires_grad_() for _ in range(3)]
    upstream = torch.randn(members, rows, width, generator=g).to(device, dtype)
    inputs = (h, *params)

    def arm(tail: Callable[..., torch.Tensor]) -> list[float]:
        def forward() -> torch.Tensor:
            with autocast(device):
                return tail(*inputs)

        def forward_backward() -> Any:
            return torch.autograd.grad(forward(), inputs, upstream)

        return [
            time_per_call_us(forward, repeats, device),
            time_per_call_us(forward_backward, repeats, device),
        ]

    on_cuda = device.type == "cuda"
    reference = torch.compile(torch_tail, dynamic=False) if on_cuda else torch_tail
    times = {"compiled" if on_cuda else "eager": arm(reference)}
    for values in geometries:
        with launch_geometry(values):
            times[f"kernel {label(values)}"] = arm(lambda *a: fused_norm.layer_norm_silu(*a, EPS))
    return times


def network_times(
    rows: int, geometries: list[Geometry], repeats: int, device: torch.device
) -> dict[str, float]:
    """{arm: forward + backward us} of the compiled twin critic: ``without kernel`` and ``kernel TILExPROGRAMSxBACKWARDTILExSTAGES``."""
    torch.manual_seed(0)
    critic = networks.StackedLayerNormMlp(2, CRITIC_INPUT, list(CRITIC_WIDTHS), NUM_ATOMS).to(device)
    x = torch.randn(rows, CRITIC_INPUT, device=device)

    def loss(inputs: torch.Tensor) -> torch.Tensor:
        with autocast(device):
            return critic(inputs).float().square().mean()

    def arm() -> float:
        compiled = torch.compile(loss, dynamic=False)

        def step() -> None:
            compiled(x).backward()
            critic.zero_grad(set_to_none=True)

        return time_per_call_us(step, repeats, device)

    critic.fused_norm_kernel = False
    times = {"without kernel": arm()}
    critic.fused_norm_kernel = True
    for values in geometries:
        with launch_geometry(values):
            times[f"kernel {label(values)}"] = arm()
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=8192, help="rows per member (the learner's batch)")
    parser.add_argument(
        "--geometries",
        default="8192x256x4096x1,8192x512x4096x2",
        help="kernel launch constants, TILExPROGRAMS[xBACKWARDTILE[xSTAGES]]",
    )
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.rows < 1 or args.repeats < 1:
        parser.error("--rows and --repeats must be at least 1")
    try:
        geometries = parse_geometries(args.geometries)
    except ValueError as err:
        parser.error(str(err))
    if fused_norm.triton is None:
        print("this torch has no Triton: there is no kernel to measure", file=sys.stderr)
        return 2
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type != "cuda" and os.environ.get("TRITON_INTERPRET") != "1":
        print(
            "no CUDA device: set TRITON_INTERPRET=1 to run the kernel in Triton's interpreter",
            file=sys.stderr,
        )
        return 2
    layers = {}
    for name, members, widths in (("critic", 2, CRITIC_WIDTHS), ("actor", 1, ACTOR_WIDTHS)):
        for width in widths:
            key = f"{name} {members}x{args.rows}x{width}"
            layers[key] = layer_times(members, width, args.rows, geometries, args.repeats, device)
            print(
                f"{key}: " + ", ".join(f"{arm} {f:.1f} / {fb:.1f} us" for arm, (f, fb) in layers[key].items())
            )
    network = network_times(args.rows, geometries, args.repeats, device) if device.type == "cuda" else None
    if network is not None:
        print(
            "twin critic, forward + backward: "
            + ", ".join(f"{arm} {us:.1f} us" for arm, us in network.items())
        )
    result = {
        "diagnostic": True,
        "device": str(device),
        "gpu": torch.cuda.get_device_name(device) if device.type == "cuda" else None,
        "torch": torch.__version__,
        "triton": fused_norm.triton.__version__,
        "rows": args.rows,
        "repeats": args.repeats,
        "geometries": [label(g) for g in geometries],
        "time": "gpu kernel us per call" if device.type == "cuda" else "cpu wall us per call",
        "layers_forward_and_forward_backward_us": layers,
        "critic_network_forward_backward_us": network,
    }
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
