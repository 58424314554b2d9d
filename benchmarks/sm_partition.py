"""DIAGNOSTIC: does confining a heavy GEMM stream to part of the GPU speed up a chain of small kernels beside it?

    python benchmarks/sm_partition.py [--heavy-sms 0,116,100,84] [--rounds 5] [--out result.json]

The overlapped runner puts two workloads on one GPU at once: the collector, a long chain of small physics
kernels on a high-priority stream, and the learner, large matrix products on another stream. When the
learner's blocks fill every multiprocessor, each small kernel of the collector waits for blocks to retire
before it starts. This script measures that mechanism with torch alone (no physics, no learner code), so the
question "would a learner held to fewer multiprocessors (a CUDA green context) let the collector run closer
to its own speed?" gets an answer before any runner change:

- ``light``: a CUDA graph of many small kernels (elementwise updates and row sums on a (2048, 256) float
  tensor, one per world as the physics launches them), replayed on a high-priority stream;
- ``heavy``: a CUDA graph of bf16 matrix products and ReLUs at the SAC learner's batch (8192 rows, widths
  512 and 1024), replayed on a normal-priority stream, or on a stream of a green context holding N
  multiprocessors (``--heavy-sms``; 0 means no green context, the whole GPU);
- with ``--capture-on-whole-gpu`` the heavy graph is captured on an ordinary stream and only replayed on
  the green context's stream (does a graph follow the stream it is launched into?);
- each round times light alone, heavy alone and both launched together (CUDA events on each stream).

Reports per setting the medians of light and heavy alone and together, and the light chain's slowdown
together / alone. A green context that this torch or driver cannot create is reported as unavailable, with the
error. Needs CUDA; without it the script says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Callable
from typing import Any

import torch


def parse_sm_counts(text: str) -> list[int]:
    """``"0,116,100"`` -> [0, 116, 100]; 0 is the whole GPU. Raises ValueError naming a bad entry."""
    counts = []
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit():
            raise ValueError(
                f"--heavy-sms: {item!r} is not a whole number of multiprocessors (0 = whole GPU)"
            )
        counts.append(int(item))
    return counts


def green_stream(num_sms: int) -> tuple[torch.cuda.Stream, Any]:
    """A stream whose kernels run on ``num_sms`` multiprocessors (a CUDA green context), and the context
    (kept alive by the caller while the stream is used). A torch without ``GreenContext.Stream`` raises."""
    from torch.cuda.green_contexts import GreenContext

    context = GreenContext.create(num_sms=num_sms, device_id=torch.cuda.current_device())
    return context.Stream(), context


def capture(fn: Callable[[], None], stream: torch.cuda.Stream) -> torch.cuda.CUDAGraph:
    """``fn`` warmed up on ``stream``, then captured there as one CUDA graph."""
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn()
    stream.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        fn()
    return graph


def timed_replays(items: list[tuple[torch.cuda.CUDAGraph, torch.cuda.Stream]]) -> list[float]:
    """Replay each graph on its stream, all launched together; ms from launch to end, per graph."""
    torch.cuda.synchronize()
    spans = []
    for graph, stream in items:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            start.record(stream)
            graph.replay()
            end.record(stream)
        spans.append((start, end))
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in spans]


def workloads(light_kernels: int, heavy_layers: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """The light chain and the heavy products, over tensors the two closures keep alive."""
    device = torch.device("cuda")
    g = torch.Generator(device=device).manual_seed(0)
    state = torch.randn(2048, 256, device=device, generator=g)
    row_sums = torch.zeros(2048, 1, device=device)
    x = torch.randn(8192, 512, device=device, generator=g, dtype=torch.bfloat16)
    w1 = torch.randn(512, 1024, device=device, generator=g, dtype=torch.bfloat16) * 0.03
    w2 = torch.randn(1024, 512, device=device, generator=g, dtype=torch.bfloat16) * 0.03

    def light() -> None:
        for i in range(light_kernels // 2):
            state.mul_(0.999).add_(row_sums if i % 2 else 0.001)
            torch.sum(state, dim=1, keepdim=True, out=row_sums)
            row_sums.mul_(1e-6)

    def heavy() -> None:
        h = x
        for _ in range(heavy_layers):
            h = torch.relu(h @ w1) @ w2
        x.copy_(h * 0.5 + x * 0.5)

    return light, heavy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--heavy-sms", default="0,116,100,84", help="multiprocessors for the heavy stream")
    parser.add_argument("--light-kernels", type=int, default=2000, help="small kernels in the light chain")
    parser.add_argument(
        "--heavy-layers", type=int, default=600, help="matrix-product pairs in the heavy graph"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--capture-on-whole-gpu",
        action="store_true",
        help="capture the heavy graph on an ordinary stream and only replay it on the green context's stream "
        "(as a runner whose learner graph is captured before the streams exist would)",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    try:
        counts = parse_sm_counts(args.heavy_sms)
    except ValueError as exc:
        print(exc, file=sys.stderr)
        return 2
    result: dict[str, Any] = {
        "diagnostic": True,
        "heavy_sms": counts,
        "capture_on_whole_gpu": args.capture_on_whole_gpu,
        "settings": {},
    }
    if not torch.cuda.is_available():
        print("sm_partition: needs a CUDA GPU; nothing measured")
        result["skipped"] = "no CUDA device"
    else:
        props = torch.cuda.get_device_properties(0)
        result |= {
            "gpu": props.name,
            "multiprocessors": props.multi_processor_count,
            "torch": torch.__version__,
        }
        light_fn, heavy_fn = workloads(args.light_kernels, args.heavy_layers)
        _, high = torch.cuda.Stream.priority_range()  # (least, greatest): the greatest is the smaller number
        light_stream = torch.cuda.Stream(priority=high)
        light_graph = capture(light_fn, light_stream)
        for count in counts:
            setting = f"heavy_on_{count}_sms" if count else "heavy_on_the_whole_gpu"
            try:
                heavy_stream, context = green_stream(count) if count else (torch.cuda.Stream(), None)
                heavy_graph = capture(
                    heavy_fn, torch.cuda.Stream() if args.capture_on_whole_gpu else heavy_stream
                )
            except Exception as exc:  # the API or the driver refused: say so and go on
                result["settings"][setting] = {"unavailable": f"{type(exc).__name__}: {exc}"[:300]}
                print(f"{setting}: unavailable ({type(exc).__name__}: {exc})", flush=True)
                continue
            rows: dict[str, list[float]] = {
                "light_alone": [],
                "heavy_alone": [],
                "light_together": [],
                "heavy_together": [],
            }
            for _ in range(args.rounds):
                rows["light_alone"] += timed_replays([(light_graph, light_stream)])
                rows["heavy_alone"] += timed_replays([(heavy_graph, heavy_stream)])
                heavy_ms, light_ms = timed_replays([(heavy_graph, heavy_stream), (light_graph, light_stream)])
                rows["light_together"].append(light_ms)
                rows["heavy_together"].append(heavy_ms)
            medians = {k: statistics.median(v) for k, v in rows.items()}
            medians["light_slowdown"] = medians["light_together"] / medians["light_alone"]
            result["settings"][setting] = {
                "ms": rows,
                "medians": medians,
                "green_context": context is not None,
            }
            print(
                f"{setting}: light {medians['light_alone']:.2f} alone, {medians['light_together']:.2f} together "
                f"({medians['light_slowdown']:.2f}x); heavy {medians['heavy_alone']:.2f} alone, "
                f"{medians['heavy_together']:.2f} together (ms)",
                flush=True,
            )
            del heavy_graph, context
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
