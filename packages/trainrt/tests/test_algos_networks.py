"""The aligned batched GEMM of the member-stacked layers: zero padding changes shapes and kernels, never values."""

import pytest
import torch

from trainrt.algos import networks
from trainrt.algos.networks import StackedLayerNormMlp, aligned_bmm

MEMBERS, ROWS, K, N = 2, 33, 135, 101  # the walk critic's unaligned input and atom widths


def _operands(shared: bool, device: str = "cpu", dtype: torch.dtype = torch.float32):
    g = torch.Generator(device=device).manual_seed(0)
    shape = (ROWS, K) if shared else (MEMBERS, ROWS, K)
    x = torch.randn(shape, generator=g, device=device, dtype=dtype, requires_grad=True)
    w = torch.randn(MEMBERS, K, N, generator=g, device=device, dtype=dtype, requires_grad=True)
    return x, w


def _reference(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x64 = x.detach().double()
    if x64.dim() == 2:
        x64 = x64.expand(MEMBERS, *x64.shape)
    return torch.bmm(x64, w.detach().double())


@pytest.mark.parametrize("shared", [True, False], ids=["shared-input", "per-member-input"])
def test_padded_product_and_gradients_match_the_unpadded_ones(shared):
    x, w = _operands(shared)
    padded = aligned_bmm(x, w, pad=True)
    assert padded.shape == (MEMBERS, ROWS, N)
    torch.testing.assert_close(padded.double(), _reference(x, w), rtol=1e-5, atol=1e-4)
    upstream = torch.randn(MEMBERS, ROWS, N, generator=torch.Generator().manual_seed(1))
    grad_x, grad_w = torch.autograd.grad(padded, (x, w), upstream)
    x2, w2 = _operands(shared)
    plain = aligned_bmm(x2, w2, pad=False)
    torch.testing.assert_close(padded, plain, rtol=1e-5, atol=1e-4)
    plain_grad_x, plain_grad_w = torch.autograd.grad(plain, (x2, w2), upstream)
    # the gradients keep the parameters' and inputs' true shapes
    assert grad_x.shape == x.shape and grad_w.shape == w.shape
    torch.testing.assert_close(grad_x, plain_grad_x, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(grad_w, plain_grad_w, rtol=1e-5, atol=1e-4)


def test_padding_is_off_on_the_cpu_and_for_a_single_member(monkeypatch):
    x, w = _operands(shared=False)
    calls = []
    real_pad = torch.nn.functional.pad
    monkeypatch.setattr(networks.F, "pad", lambda *a, **k: calls.append(a[1]) or real_pad(*a, **k))
    aligned_bmm(x, w)  # CPU: the default is unpadded
    assert calls == []
    aligned_bmm(x, w, pad=True)
    assert calls == [(0, 1), (0, 3, 0, 1)]  # 135 -> 136 inner, 101 -> 104 output


def test_alignment_one_turns_padding_off():
    x, w = _operands(shared=True)
    out = aligned_bmm(x, w, pad=True, alignment=1)
    assert out.is_contiguous() and out.shape == (MEMBERS, ROWS, N)


def test_padded_output_is_a_view_of_the_first_columns():
    x, w = _operands(shared=False)
    out = aligned_bmm(x, w, pad=True)
    assert out.stride()[-2] == N + (-N % networks.GEMM_ALIGNMENT)


@pytest.fixture
def ieee_float32_matmuls():
    """Float32 products without TF32 for the duration of a test."""
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("highest")
    yield
    torch.set_float32_matmul_precision(previous)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_twin_critic_on_cuda_pads_and_matches_float64(monkeypatch, ieee_float32_matmuls):
    """On CUDA the twin critic takes the padded path by default; in float32 it matches a float64 CPU copy."""
    torch.manual_seed(0)
    net = StackedLayerNormMlp(MEMBERS, K, [64, 32], N)
    reference = StackedLayerNormMlp(MEMBERS, K, [64, 32], N).double()
    reference.load_state_dict({k: v.double() for k, v in net.state_dict().items()})
    net = net.cuda()
    x = torch.randn(ROWS, K)
    pads = []
    real_pad = torch.nn.functional.pad
    monkeypatch.setattr(networks.F, "pad", lambda *a, **k: pads.append(a[1]) or real_pad(*a, **k))
    out = net(x.cuda())
    # padded path taken: the 135-wide input (input and weight) and the 101-atom output weight
    assert pads == [(0, 1), (0, 0, 0, 1), (0, 3, 0, 0)]
    torch.testing.assert_close(out.double().cpu(), reference(x.double()), rtol=1e-4, atol=1e-4)
    out.square().sum().backward()
    reference(x.double()).square().sum().backward()
    for (name, p), q in zip(net.named_parameters(), reference.parameters()):
        assert p.grad.shape == p.shape, name
        torch.testing.assert_close(p.grad.double().cpu(), q.grad, rtol=1e-3, atol=1e-3, msg=name)
