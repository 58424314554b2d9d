"""The fused hidden-layer tail (bias, LayerNorm, scale and shift, SiLU) against float64 torch math.

The Triton kernels run on the CPU in Triton's interpreter, which reads ``TRITON_INTERPRET`` when Triton is
imported: those checks run this file as a script in a child process with it set. On CUDA the GPU tests run
the compiled kernels at the learner's own sizes.
"""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

from trainrt.algos import fused_norm
from trainrt.algos.fused_norm import backward_split, kernel_supported, layer_norm_silu
from trainrt.algos.networks import StackedLayerNormMlp

EPS = 1e-5


def _reference(h, linear_bias, weight, bias):
    """The layer tail as torch operations (float64 inputs give the reference values)."""
    return F.silu(F.layer_norm(h + linear_bias, (h.shape[-1],), eps=EPS) * weight + bias)


def _operands(members, rows, width, dtype, device="cpu", seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(members, rows, width, generator=g).to(device=device, dtype=dtype).requires_grad_()
    params = [
        (0.3 * torch.randn(members, 1, width, generator=g)).to(device).requires_grad_(),  # linear bias
        (1.0 + 0.2 * torch.randn(members, 1, width, generator=g)).to(device).requires_grad_(),  # scale
        (0.2 * torch.randn(members, 1, width, generator=g)).to(device).requires_grad_(),  # shift
    ]
    upstream = torch.randn(members, rows, width, generator=g).to(device=device, dtype=dtype)
    return h, params, upstream


def _float64_reference(h, params, upstream):
    inputs = [t.detach().double().requires_grad_() for t in (h, *params)]
    out = _reference(*inputs)
    return out, torch.autograd.grad(out, inputs, upstream.double())


def _check_against_float64(members, rows, width, dtype, device="cpu"):
    """The kernel's output and its four gradients against float64 torch math, at dtype-sized tolerances."""
    h, params, upstream = _operands(members, rows, width, dtype, device)
    out = layer_norm_silu(h, *params, EPS)
    assert out.dtype == dtype and out.shape == h.shape
    grads = torch.autograd.grad(out, (h, *params), upstream)
    ref_out, ref_grads = _float64_reference(h, params, upstream)
    # bf16 stores y and dh with 8 mantissa bits; float32 keeps the float64 values to rounding.
    tol = {"rtol": 2e-2, "atol": 2e-2} if dtype != torch.float32 else {"rtol": 1e-5, "atol": 2e-5}
    torch.testing.assert_close(out.double().cpu(), ref_out.cpu(), **tol)
    for name, grad, ref in zip(("h", "linear_bias", "weight", "bias"), grads, ref_grads, strict=True):
        assert grad.shape == ref.shape and grad.dtype == (dtype if name == "h" else torch.float32), name
        # parameter gradients sum over all rows: scale the tolerance with the row count
        scale = 1.0 if name == "h" else rows**0.5
        torch.testing.assert_close(
            grad.double().cpu(), ref.cpu(), rtol=tol["rtol"], atol=tol["atol"] * scale, msg=name
        )
    again = torch.autograd.grad(layer_norm_silu(h, *params, EPS), (h, *params), upstream)
    for grad, repeat in zip(grads, again, strict=True):  # per-program partial sums, no atomics
        assert torch.equal(grad, repeat)
    # Frozen parameters (the critic during the actor's step): the kernel skips their sums, and the input
    # gradient is the same values (a differently compiled kernel: equal to rounding, not always in bits).
    frozen = [p.detach() for p in params]
    (frozen_grad,) = torch.autograd.grad(layer_norm_silu(h, *frozen, EPS), (h,), upstream)
    torch.testing.assert_close(frozen_grad.double().cpu(), ref_grads[0].cpu(), **tol)
    torch.testing.assert_close(frozen_grad, grads[0], rtol=tol["rtol"], atol=tol["atol"])


SHAPES = [
    (2, 48, 24, torch.float32),  # twin members, a width that is no power of two
    (1, 33, 16, torch.float32),  # a single member, an odd row count (the last tile partly masked)
    (1, 9000, 64, torch.float32),  # 71 backward programs: two passes of the partial-sum tile
    (2, 40, 192, torch.float32),  # the walk critic's narrowest hidden width
    (2, 64, 96, torch.bfloat16),  # bf16 activations, as under autocast
]


def _interpreter_checks() -> None:
    """Run in a child process with TRITON_INTERPRET=1 (see the module docstring)."""
    for shape in SHAPES:
        _check_against_float64(*shape)
    # Without a linear bias the kernel adds zeros: the same bits as an explicit zero bias.
    h, (_, weight, bias), _ = _operands(2, 24, 40, torch.float32, seed=5)
    zero = torch.zeros(2, 1, 40)
    assert torch.equal(
        layer_norm_silu(h, None, weight, bias, EPS), layer_norm_silu(h, zero, weight, bias, EPS)
    )
    # Inside torch.compile the kernel is one opaque op: the same values and gradients as eager, with the
    # parameters trained and frozen.
    h, params, upstream = _operands(2, 32, 48, torch.float32, seed=3)

    def tail(*args):
        return layer_norm_silu(*args, EPS)

    compiled_tail = torch.compile(tail, fullgraph=True)
    eager = tail(h, *params)
    compiled = compiled_tail(h, *params)
    assert torch.equal(eager, compiled)
    eager_grads = torch.autograd.grad(eager, (h, *params), upstream)
    compiled_grads = torch.autograd.grad(compiled, (h, *params), upstream)
    for a, b in zip(eager_grads, compiled_grads, strict=True):
        assert torch.equal(a, b)
    frozen = [p.detach() for p in params]
    (eager_frozen,) = torch.autograd.grad(tail(h, *frozen), (h,), upstream)
    (compiled_frozen,) = torch.autograd.grad(compiled_tail(h, *frozen), (h,), upstream)
    assert torch.equal(eager_frozen, compiled_frozen)
    print("interpreter checks passed")


@pytest.mark.slow
@pytest.mark.skipif(fused_norm.triton is None, reason="needs Triton")
def test_kernels_match_float64_torch_math_in_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1")
    result = subprocess.run(
        [sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "interpreter checks passed" in result.stdout


@pytest.mark.parametrize(
    ("rows_per_member", "members", "block_r", "expected"),
    [
        (8192, 2, 4, (128, 64)),  # the critic's widest layer (768, 4 rows a tile): 128 programs of 128 rows
        (8192, 1, 8, (64, 128)),  # the actor's widest layer (512): 128 programs of 64 rows
        (48, 2, 8, (8, 6)),  # few rows: one tile per program
        (33, 1, 32, (32, 2)),  # an odd count: the last program holds one row
        (1000, 2, 16, (16, 63)),  # 63 tiles per member, the last one partly masked
    ],
)
def test_backward_programs_split_whole_tiles_of_one_member(rows_per_member, members, block_r, expected):
    rows_per_program, programs = backward_split(rows_per_member, members, block_r)
    assert (rows_per_program, programs) == expected
    assert rows_per_program % block_r == 0  # whole tiles
    assert (programs - 1) * rows_per_program < rows_per_member <= programs * rows_per_program  # all, once


def test_only_cuda_networks_with_float32_parameters_take_the_kernel():
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    assert kernel_supported(cuda, torch.float32) == (fused_norm.triton is not None)
    assert not kernel_supported(cpu, torch.float32)  # CPU runs and the ONNX export
    assert not kernel_supported(cuda, torch.float64)  # float64 reference copies


def test_the_cpu_path_is_the_unfused_layer_math_bit_for_bit():
    """Off CUDA each hidden layer is still Linear -> LayerNorm -> SiLU, the same ops in the same order."""
    torch.manual_seed(0)
    net = StackedLayerNormMlp(2, 7, [16, 8], 3)
    x = torch.randn(5, 7)
    expected = x
    for linear, norm in zip(net.linears, net.norms):
        expected = torch.nn.functional.silu(norm(linear(expected)))
    assert torch.equal(net(x), net.output(expected))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize(
    ("members", "rows", "width", "dtype"),
    [(2, 8192, 768, torch.bfloat16), (2, 8192, 192, torch.float32), (1, 8192, 512, torch.bfloat16), *SHAPES],
)
def test_cuda_kernels_match_float64_torch_math(members, rows, width, dtype):
    _check_against_float64(members, rows, width, dtype, device="cuda")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_network_takes_the_kernel_and_matches_the_unfused_network(monkeypatch):
    """Under bf16 autocast the fused twin critic agrees with the torch-op one (both against bf16 rounding)."""
    torch.manual_seed(0)
    net = StackedLayerNormMlp(2, 135, [768, 384, 192], 101).cuda()
    x = torch.randn(4096, 135, device="cuda")
    calls = []
    real_op = getattr(torch.ops.trainrt, fused_norm.OP_NAME)
    monkeypatch.setattr(torch.ops.trainrt, fused_norm.OP_NAME, lambda *a: calls.append(1) or real_op(*a))
    with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
        fused = net(x).float()
        assert len(calls) == 3  # one per hidden layer
        net.fused_norm_kernel = False
        unfused = net(x).float()
    assert len(calls) == 3
    torch.testing.assert_close(fused, unfused, rtol=0.05, atol=0.05)
    assert (fused - unfused).abs().mean() < 5e-3


if __name__ == "__main__":
    _interpreter_checks()
