"""DIAGNOSTIC: what unaligned matrix shapes cost the learner's batched GEMMs (CUDA, bf16).

    python benchmarks/gemm_alignment.py [--out result.json]

The twin critics' first layer multiplies (obs ‖ action) rows whose width is rarely a multiple of 8
(g1_walk_flat: 106 + 29 = 135; g1_motion_tracking: 286 + 29 = 315) and their output layer has 101 atoms. A
bf16 operand whose leading dimension is not a multiple of 8 elements (16 bytes) keeps cuBLAS off its fastest
tensor-core kernels. This times each learner GEMM of the canonical SAC walk critic (batch 8192, widths 768,
384, 192, 101, two members) as it is and zero-padded to a multiple of 8, forward and both backward products,
with CUDA events over many repetitions. Padding with zeros does not change the products' values.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import torch


def _ms(fn: Any, repetitions: int = 200) -> float:
    for _ in range(10):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repetitions):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / repetitions


def _pad8(n: int) -> int:
    return (n + 7) // 8 * 8


def gemm_case(members: int, rows: int, k: int, n: int, *, expanded: bool) -> dict[str, Any]:
    """Forward x@w, weight gradient x^T@g and input gradient g@w^T, unpadded vs padded (ms each)."""
    result: dict[str, Any] = {"members": members, "rows": rows, "k": k, "n": n, "expanded_input": expanded}
    for label, kk, nn in (("as_is", k, n), ("padded", _pad8(k), _pad8(n))):
        dt = torch.bfloat16
        x = torch.randn(rows, kk, device="cuda", dtype=dt)
        xs = (
            x.unsqueeze(0).expand(members, rows, kk)
            if expanded
            else torch.randn(members, rows, kk, device="cuda", dtype=dt)
        )
        w = torch.randn(members, kk, nn, device="cuda", dtype=dt)
        g = torch.randn(members, rows, nn, device="cuda", dtype=dt)
        result[f"{label}_forward_ms"] = _ms(lambda xs=xs, w=w: torch.bmm(xs, w))
        result[f"{label}_weight_grad_ms"] = _ms(lambda xs=xs, g=g: torch.bmm(xs.transpose(1, 2), g))
        result[f"{label}_input_grad_ms"] = _ms(lambda g=g, w=w: torch.bmm(g, w.transpose(1, 2)))
    total = {
        lab: sum(result[f"{lab}_{p}_ms"] for p in ("forward", "weight_grad", "input_grad"))
        for lab in ("as_is", "padded")
    }
    result["as_is_total_ms"], result["padded_total_ms"] = total["as_is"], total["padded"]
    result["padding_speedup"] = total["as_is"] / total["padded"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("gemm_alignment needs a CUDA device", file=sys.stderr)
        return 2
    cases = [
        ("walk critic first layer (135 -> 768)", gemm_case(2, 8192, 135, 768, expanded=True)),
        ("tracking critic first layer (315 -> 768)", gemm_case(2, 8192, 315, 768, expanded=True)),
        ("critic output layer (192 -> 101 atoms)", gemm_case(2, 8192, 192, 101, expanded=False)),
        ("critic hidden layer (768 -> 384), aligned", gemm_case(2, 8192, 768, 384, expanded=False)),
        ("walk actor first layer (98 -> 512)", gemm_case(1, 8192, 98, 512, expanded=False)),
        ("walk actor output (128 -> 58)", gemm_case(1, 8192, 128, 58, expanded=False)),
    ]
    out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "diagnostic": True, "cases": {}}
    for name, case in cases:
        out["cases"][name] = case
        print(
            f"{name:>44}: as is {case['as_is_total_ms'] * 1e3:7.1f} us, padded {case['padded_total_ms'] * 1e3:7.1f} us,"
            f" x{case['padding_speedup']:.2f}"
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(out, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
