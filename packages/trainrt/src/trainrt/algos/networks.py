"""Network pieces shared by `sac` and `flashsac`: the bounded log-std, the tanh-squashed Gaussian, and
member-stacked layers that evaluate several independent networks (the twin critics) as one batched GEMM.

On CUDA the member-stacked GEMMs go through `aligned_bmm`, which zero-pads the inner and output widths to a
multiple of `GEMM_ALIGNMENT` (docs/perf/tuning/0013): cuBLAS runs 4-8x slower on bf16 operands whose rows are not 16-byte
aligned (the twin critics' 135- or 315-wide input, their 101-atom output). Parameters keep their true shapes, so
checkpoints and ONNX exports do not see the padding."""

import math

import torch
import torch.nn.functional as F
from torch import nn

from trainrt.algos import fused_norm

_HALF_LOG_TWO_PI = 0.5 * math.log(2.0 * math.pi)
_LOG_TWO = math.log(2.0)


def check_log_std_range(log_std_min: float, log_std_max: float) -> None:
    """Raise ValueError unless the policy's log-std bounds satisfy log_std_min < log_std_max."""
    if not log_std_min < log_std_max:
        raise ValueError(
            f"log_std_min must be below log_std_max, got log_std_min={log_std_min}, log_std_max={log_std_max}"
        )


def bounded_log_std(raw: torch.Tensor, log_std_min: float, log_std_max: float) -> torch.Tensor:
    """Map an unbounded head output smoothly into [log_std_min, log_std_max] (same shape)."""
    return log_std_min + 0.5 * (log_std_max - log_std_min) * (torch.tanh(raw) + 1.0)


def tanh_gaussian_sample(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reparameterised tanh-Gaussian sample and its log-density.

    Args:
        mean: pre-squash mean (B, A).
        log_std: pre-squash log standard deviation (B, A).
        noise: standard normal draw (B, A).

    Returns:
        action in (-1, 1) (B, A) and log pi(action) (B,), including the tanh change of variables.
    """
    pre_tanh = mean + log_std.exp() * noise
    gaussian_log_prob = -0.5 * noise.square() - log_std - _HALF_LOG_TWO_PI
    # log(1 - tanh(u)^2) written without tanh so it stays finite for large |u|.
    log_det_jacobian = 2.0 * (_LOG_TWO - pre_tanh - F.softplus(-2.0 * pre_tanh))
    log_prob = (gaussian_log_prob - log_det_jacobian).sum(-1)
    return torch.tanh(pre_tanh), log_prob


# --------------------------------------------------------------------------------------------------
# aligned batched GEMM
# --------------------------------------------------------------------------------------------------
GEMM_ALIGNMENT = 8
"""Multiple the inner and output widths of a CUDA GEMM are zero-padded to (8 bf16 elements = 16 bytes): the
default of the learner configs' ``gemm_alignment``, which `set_gemm_alignment` hands to the layers. 1 turns
padding off; `benchmarks/learner_variants.py --variants padded,unpadded` measures the difference."""


def aligned_bmm(
    x: torch.Tensor, weight: torch.Tensor, *, pad: bool | None = None, alignment: int = GEMM_ALIGNMENT
) -> torch.Tensor:
    """Batched product ``x @ weight`` with the inner and output widths zero-padded to a multiple of ``alignment``.

    Args:
        x: (B, K) shared by every member, or (M, B, K) one input per member.
        weight: (M, K, N), already in ``x``'s dtype.
        pad: pad the widths; by default on CUDA when there are several members. A single member's
            product runs at full speed unpadded (docs/perf/2026-12-01-profiles-h200.md: padding the actor's layers
            made them 0.89x as fast on an H200), a stacked one 3.8-7.8x slower.

    Returns:
        (M, B, N). Zero columns add nothing to a dot product, so the values are those of the unpadded
        product up to the summation order of the chosen kernel; with N padded the result is a view of the
        first N columns.
    """
    members, k, n = weight.shape
    if pad is None:
        pad = x.is_cuda and members > 1
    pad_k = -k % alignment if pad else 0
    pad_n = -n % alignment if pad else 0
    if pad_k:
        x = F.pad(x, (0, pad_k))  # before any member expansion: the shared input is padded once
    if pad_k or pad_n:
        weight = F.pad(weight, (0, pad_n, 0, pad_k))
    if x.dim() == 2:
        x = x.unsqueeze(0).expand(members, *x.shape)
    out = torch.bmm(x, weight)
    return out[..., :n] if pad_n else out


# --------------------------------------------------------------------------------------------------
# member-stacked layers: M independent networks evaluated as one batched GEMM per layer
# --------------------------------------------------------------------------------------------------
class StackedLinear(nn.Module):
    """``members`` independent linear layers in one batched matmul: (B, in) or (M, B, in) -> (M, B, out).

    The weights are stored as one ``(M, in, out)`` tensor, so the twin critics of SAC and FlashSAC cost
    one batched GEMM per layer instead of one GEMM per member (half the kernels, forward and backward).
    Each member is initialized like ``nn.Linear`` (uniform in +-1/sqrt(in)).
    """

    def __init__(self, members: int, in_features: int, out_features: int, *, bias: bool = True):
        super().__init__()
        self.members = members
        self.in_features = in_features
        self.out_features = out_features
        self.gemm_alignment = GEMM_ALIGNMENT
        bound = 1.0 / math.sqrt(in_features)
        self.weight = nn.Parameter(torch.empty(members, in_features, out_features).uniform_(-bound, bound))
        self.bias = (
            nn.Parameter(torch.empty(members, 1, out_features).uniform_(-bound, bound)) if bias else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(B, in) shared by every member, or (M, B, in) one input per member -> (M, B, out)."""
        out = self.product(x)
        return out if self.bias is None else out + self.bias.to(out.dtype)

    def product(self, x: torch.Tensor) -> torch.Tensor:
        """The bias-free part of `forward`, (M, B, out), for a caller that adds the bias in a fused step."""
        return aligned_bmm(x, self.weight.to(x.dtype), alignment=self.gemm_alignment)

    def extra_repr(self) -> str:
        """Summary line for `print(module)`."""
        return f"members={self.members}, in={self.in_features}, out={self.out_features}"


class StackedLayerNorm(nn.Module):
    """LayerNorm over the last axis with a separate affine map per member: (M, B, D) -> (M, B, D)."""

    def __init__(self, members: int, dim: int, eps: float = 1e-5):
        super().__init__()
        self.dim = dim
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(members, 1, dim))
        self.bias = nn.Parameter(torch.zeros(members, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalize each row, then scale and shift with the member's own parameters."""
        normalized = F.layer_norm(x, (self.dim,), eps=self.eps)
        return normalized * self.weight.to(normalized.dtype) + self.bias.to(normalized.dtype)


FUSED_NORM_KERNEL = True
"""Hidden layers of `StackedLayerNormMlp` on CUDA end in one Triton kernel each way (bias, LayerNorm, scale
and shift, SiLU; `fused_norm`, docs/perf/tuning/0023): the default of `SacConfig.fused_norm_kernel`, which sets
the networks' ``fused_norm_kernel``. False runs them as torch operations that torch.compile fuses on its own;
`benchmarks/learner_variants.py --variants padded,compiled_norm` measures the two."""


class StackedLayerNormMlp(nn.Module):
    """M independent Linear -> LayerNorm -> SiLU MLPs with a linear output: (B, in) -> (M, B, out).

    With ``members=1`` it is a plain MLP whose output keeps the leading member axis of size 1. Each hidden
    layer's bias, normalization and SiLU run as `fused_norm.layer_norm_silu` on CUDA (one kernel each way).
    """

    def __init__(self, members: int, in_dim: int, hidden_dims: list[int], out_dim: int):
        super().__init__()
        self.members = members
        self.fused_norm_kernel = FUSED_NORM_KERNEL
        self.norm_backward_programs: int | None = None  # the kernel's default (`fused_norm._TARGET_PROGRAMS`)
        self.linears = nn.ModuleList()
        self.norms = nn.ModuleList()
        width = in_dim
        for hidden in hidden_dims:
            self.linears.append(StackedLinear(members, width, hidden))
            self.norms.append(StackedLayerNorm(members, hidden))
            width = hidden
        self.output = StackedLinear(members, width, out_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Inputs (B, in) (shared) or (M, B, in) -> outputs (M, B, out)."""
        fused = self.fused_norm_kernel and fused_norm.kernel_supported(x.device, self.output.weight.dtype)
        for linear, norm in zip(self.linears, self.norms):
            if fused:
                x = fused_norm.layer_norm_silu(
                    linear.product(x),
                    linear.bias,
                    norm.weight,
                    norm.bias,
                    norm.eps,
                    self.norm_backward_programs,
                )
            else:
                x = F.silu(norm(linear(x)))
        return self.output(x)


def set_gemm_alignment(module: nn.Module, alignment: int) -> None:
    """Pad the member-stacked products of every layer in ``module`` to a multiple of ``alignment`` (the learner
    config's ``gemm_alignment``; 1: unpadded)."""
    for layer in module.modules():
        if hasattr(layer, "gemm_alignment"):
            layer.gemm_alignment = alignment
