"""SAC's hidden-layer tail as one Triton kernel each way: bias, LayerNorm, per-member scale and shift, SiLU.

    y = silu(layer_norm(h + b_lin) * gamma + beta)      h: (M, B, D) from the layer's bias-free product

On CUDA `StackedLayerNormMlp` calls `layer_norm_silu` after every hidden product. It is the custom op
``trainrt::layer_norm_silu``: the forward reads ``h`` once and writes ``y`` in ``h``'s dtype (bf16 under
autocast) plus one mean and one inverse std per row; the backward reads ``h`` and the incoming gradient once,
recomputes what it needs, writes the input gradient, and sums the three parameter gradients per program
into a small partials buffer that one ``sum`` reduces (no atomics: the same inputs give the same bits).
torch.compile sees the op as one opaque call, so it stays inside the compiled update and its CUDA graph.

Elsewhere (CPU runs, float64 copies, the ONNX export, which moves the policy to the CPU) the network runs its
layers as plain torch operations (`kernel_supported` decides). adr/0023 says why the kernel is hand-written
and what it was measured against.
"""

from __future__ import annotations

import torch

try:  # Triton ships with torch's Linux wheels; without it the networks run their layers as torch operations
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - platforms without Triton
    triton = None

KERNEL_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
"""Activation dtypes the kernel takes; its parameters must be float32 (the modules' own)."""

_TILE_ELEMENTS = 8192
"""Elements of one row tile (rows x padded width) a program holds at once: 8 rows of the critic's 768."""

_TARGET_PROGRAMS = 256
"""About how many programs the backward spreads the rows over (each writes one partial row of sums).
With 4096-element tiles and 512 programs the SAC learner was slower than with inductor's own kernels; with
these two it is faster (adr/0023 has both measurements)."""


def kernel_supported(device: torch.device, param_dtype: torch.dtype) -> bool:
    """Whether a network on ``device`` with parameters of ``param_dtype`` takes the kernel: CUDA, float32
    parameters (so activations are float32, or bf16/fp16 under autocast) and Triton installed."""
    return triton is not None and device.type == "cuda" and param_dtype == torch.float32


def layer_norm_silu(
    h: torch.Tensor,
    linear_bias: torch.Tensor | None,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float,
) -> torch.Tensor:
    """``silu(layer_norm(h + linear_bias) * weight + bias)`` per member, from the kernel; differentiable in all
    four inputs.

    Args:
        h: (M, B, D) the bias-free product of a member-stacked linear layer, float32, bf16 or fp16.
        linear_bias: (M, 1, D) that layer's bias (float32), or None.
        weight: (M, 1, D) the normalization's per-member scale (float32).
        bias: (M, 1, D) the normalization's per-member shift (float32).
        eps: added to the variance.

    Returns:
        (M, B, D) in ``h``'s dtype. On a CPU tensor the kernel runs in Triton's interpreter, which needs
        ``TRITON_INTERPRET=1`` set before Triton is imported (the tests do this); callers on the hot path
        check `kernel_supported` first.
    """
    if triton is None:
        raise RuntimeError("the fused LayerNorm + SiLU kernel needs Triton; install torch's Linux wheel")
    if h.dtype not in KERNEL_DTYPES:
        raise TypeError(f"the fused LayerNorm + SiLU kernel takes {KERNEL_DTYPES} activations, not {h.dtype}")
    members, _, width = h.shape
    if linear_bias is None:
        linear_bias = torch.zeros(members, 1, width, device=h.device, dtype=torch.float32)
    out, _, _ = torch.ops.trainrt.layer_norm_silu(h, linear_bias, weight, bias, eps)
    return out


# --------------------------------------------------------------------------------------------------
# launch geometry
# --------------------------------------------------------------------------------------------------
def _block_sizes(width: int) -> tuple[int, int]:
    """(rows per tile, padded width) for rows of ``width`` values."""
    block_d = triton.next_power_of_2(width)
    return max(1, _TILE_ELEMENTS // block_d), block_d


def backward_rows_per_program(rows_per_member: int, members: int, block_r: int) -> int:
    """Rows one backward program sums over: a power of two that divides ``rows_per_member`` (so a program
    never spans two members), about ``_TARGET_PROGRAMS`` programs in all, at least one tile where it can."""
    total = rows_per_member * members
    wanted = max(block_r, 1 << max(0, (total // _TARGET_PROGRAMS).bit_length() - 1))
    return min(rows_per_member & -rows_per_member, wanted)  # the largest power of two dividing it


# --------------------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------------------
if triton is not None:

    @triton.jit
    def _forward_kernel(
        H, LIN_B, GAMMA, BETA, Y, MEAN, RSTD,
        total_rows, rows_per_member, width, eps,
        BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        cols = tl.arange(0, BLOCK_D)
        row_ok = rows < total_rows
        col_ok = cols < width
        ok = row_ok[:, None] & col_ok[None, :]
        member = rows // rows_per_member
        offsets = rows[:, None] * width + cols[None, :]
        params = member[:, None] * width + cols[None, :]
        x = tl.load(H + offsets, mask=ok, other=0.0).to(tl.float32)
        x += tl.load(LIN_B + params, mask=ok, other=0.0)
        mean = tl.sum(x, axis=1) / width
        centred = tl.where(ok, x - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / width + eps)
        z = centred * rstd[:, None] * tl.load(GAMMA + params, mask=ok, other=0.0)
        z += tl.load(BETA + params, mask=ok, other=0.0)
        y = z * tl.sigmoid(z)
        tl.store(Y + offsets, y.to(Y.dtype.element_ty), mask=ok)
        tl.store(MEAN + rows, mean, mask=row_ok)
        tl.store(RSTD + rows, rstd, mask=row_ok)

    @triton.jit
    def _backward_kernel(
        H, LIN_B, GAMMA, BETA, MEAN, RSTD, DY, DH, PARTIALS,
        rows_per_member, width,
        ROWS_PER_PROGRAM: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        program = tl.program_id(0)
        first_row = program * ROWS_PER_PROGRAM
        member = first_row // rows_per_member
        cols = tl.arange(0, BLOCK_D)
        col_ok = cols < width
        lin_b = tl.load(LIN_B + member * width + cols, mask=col_ok, other=0.0)
        gamma = tl.load(GAMMA + member * width + cols, mask=col_ok, other=0.0)
        beta = tl.load(BETA + member * width + cols, mask=col_ok, other=0.0)
        sum_gamma = tl.zeros((BLOCK_D,), dtype=tl.float32)
        sum_beta = tl.zeros((BLOCK_D,), dtype=tl.float32)
        sum_lin_b = tl.zeros((BLOCK_D,), dtype=tl.float32)
        for start in range(0, ROWS_PER_PROGRAM, BLOCK_R):
            rows = first_row + start + tl.arange(0, BLOCK_R)
            row_ok = rows < first_row + ROWS_PER_PROGRAM
            ok = row_ok[:, None] & col_ok[None, :]
            offsets = rows[:, None] * width + cols[None, :]
            mean = tl.load(MEAN + rows, mask=row_ok, other=0.0)
            rstd = tl.load(RSTD + rows, mask=row_ok, other=0.0)
            x = tl.load(H + offsets, mask=ok, other=0.0).to(tl.float32) + lin_b[None, :]
            x_hat = tl.where(ok, (x - mean[:, None]) * rstd[:, None], 0.0)
            z = x_hat * gamma[None, :] + beta[None, :]
            sig = tl.sigmoid(z)
            dy = tl.load(DY + offsets, mask=ok, other=0.0).to(tl.float32)
            dz = tl.where(ok, dy * sig * (1.0 + z * (1.0 - sig)), 0.0)
            dx_hat = dz * gamma[None, :]
            mean_dx_hat = tl.sum(dx_hat, axis=1) / width
            mean_dx_hat_x_hat = tl.sum(dx_hat * x_hat, axis=1) / width
            dh = (dx_hat - x_hat * mean_dx_hat_x_hat[:, None] - mean_dx_hat[:, None]) * rstd[:, None]
            dh = tl.where(ok, dh, 0.0)
            tl.store(DH + offsets, dh.to(DH.dtype.element_ty), mask=ok)
            sum_gamma += tl.sum(dz * x_hat, axis=0)
            sum_beta += tl.sum(dz, axis=0)
            sum_lin_b += tl.sum(dh, axis=0)
        base = PARTIALS + program * 3 * width + cols
        tl.store(base, sum_gamma, mask=col_ok)
        tl.store(base + width, sum_beta, mask=col_ok)
        tl.store(base + 2 * width, sum_lin_b, mask=col_ok)


# --------------------------------------------------------------------------------------------------
# the custom op and its gradient
# --------------------------------------------------------------------------------------------------
@torch.library.custom_op("trainrt::layer_norm_silu", mutates_args=())
def _layer_norm_silu_op(
    h: torch.Tensor, linear_bias: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y (M, B, D) in h's dtype, mean (M*B,), rstd (M*B,)) from the kernel."""
    h = h.contiguous()
    members, rows_per_member, width = h.shape
    total = members * rows_per_member
    y = torch.empty_like(h)
    mean = torch.empty(total, device=h.device, dtype=torch.float32)
    rstd = torch.empty(total, device=h.device, dtype=torch.float32)
    block_r, block_d = _block_sizes(width)
    _forward_kernel[(triton.cdiv(total, block_r),)](
        h, linear_bias.contiguous(), weight.contiguous(), bias.contiguous(), y, mean, rstd,
        total, rows_per_member, width, eps,
        BLOCK_R=block_r, BLOCK_D=block_d, num_warps=4 if block_d <= 512 else 8,
    )  # fmt: skip
    return y, mean, rstd


@_layer_norm_silu_op.register_fake
def _layer_norm_silu_fake(h, linear_bias, weight, bias, eps):
    total = h.shape[0] * h.shape[1]
    stats = h.new_empty(total, dtype=torch.float32)
    return torch.empty_like(h, memory_format=torch.contiguous_format), stats, stats.clone()


@torch.library.custom_op("trainrt::layer_norm_silu_backward", mutates_args=())
def _layer_norm_silu_backward_op(
    grad: torch.Tensor,
    h: torch.Tensor,
    linear_bias: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of h (h's dtype), linear_bias, weight and bias (float32, (M, 1, D)) from the kernel."""
    h = h.contiguous()
    grad = grad.contiguous()
    members, rows_per_member, width = h.shape
    block_r, block_d = _block_sizes(width)
    rows_per_program = backward_rows_per_program(rows_per_member, members, block_r)
    programs = members * rows_per_member // rows_per_program
    grad_h = torch.empty_like(h)
    partials = torch.empty(programs, 3, width, device=h.device, dtype=torch.float32)
    _backward_kernel[(programs,)](
        h, linear_bias.contiguous(), weight.contiguous(), bias.contiguous(), mean, rstd, grad, grad_h,
        partials, rows_per_member, width,
        ROWS_PER_PROGRAM=rows_per_program, BLOCK_R=min(block_r, rows_per_program), BLOCK_D=block_d,
        num_warps=4 if block_d <= 512 else 8,
    )  # fmt: skip
    sums = partials.view(members, programs // members, 3, width).sum(1)  # (M, 3, D)
    # Each its own (M, 1, D) tensor: a custom op's outputs may not share storage.
    grad_weight, grad_bias, grad_linear_bias = (sums[:, k : k + 1].clone() for k in range(3))
    return grad_h, grad_linear_bias, grad_weight, grad_bias


@_layer_norm_silu_backward_op.register_fake
def _layer_norm_silu_backward_fake(grad, h, linear_bias, weight, bias, mean, rstd):
    members, _, width = h.shape
    params = [h.new_empty(members, 1, width, dtype=torch.float32) for _ in range(3)]
    return torch.empty_like(h, memory_format=torch.contiguous_format), *params


def _setup_context(ctx, inputs, output) -> None:
    h, linear_bias, weight, bias, _ = inputs
    _, mean, rstd = output
    ctx.save_for_backward(h, linear_bias, weight, bias, mean, rstd)


def _backward(ctx, grad_y, _grad_mean, _grad_rstd):
    h, linear_bias, weight, bias, mean, rstd = ctx.saved_tensors
    grad_h, grad_linear_bias, grad_weight, grad_bias = _layer_norm_silu_backward_op(
        grad_y, h, linear_bias, weight, bias, mean, rstd
    )
    return grad_h, grad_linear_bias, grad_weight, grad_bias, None


_layer_norm_silu_op.register_autograd(_backward, setup_context=_setup_context)
