"""SAC's hidden-layer tail as one Triton kernel each way: bias, LayerNorm, per-member scale and shift, SiLU.

    y = silu(layer_norm(h + b_lin) * gamma + beta)      h: (M, B, D) from the layer's bias-free product

On CUDA `StackedLayerNormMlp` calls `layer_norm_silu` after every hidden product. It is the custom op
``trainrt::layer_norm_silu_v2`` (`OP_NAME`): the forward reads ``h`` once and writes ``y`` in ``h``'s dtype
(bf16 under autocast) plus one mean and one inverse std per row; the backward reads ``h`` and the incoming
gradient once, recomputes what it needs, writes the input gradient, and sums the three parameter gradients
per program into a small partials buffer that a second kernel reduces in program order (no atomics: the
same inputs give the same bits). When the layer's parameters take no gradient (the critic, frozen during the
actor's step) the backward skips those sums.
torch.compile sees the op as one opaque call, so it stays inside the compiled update and its CUDA graph.

Elsewhere (CPU runs, float64 copies, the ONNX export, which moves the policy to the CPU) the network runs its
layers as plain torch operations (`kernel_supported` decides). docs/perf/tuning/0023 says why the kernel is hand-written
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

OP_NAME = "layer_norm_silu_v3"
"""The forward op's name in the ``trainrt`` namespace (the backward's adds ``_backward``). The version moves
whenever the ops' signatures or the gradient formula change: torch.compile's on-disk caches key a compiled
graph by the names of the ops it calls, not by their Python code, so an entry compiled against older code
would call it with the old signature."""

_TILE_ELEMENTS = 8192
"""Elements of one row tile (rows x padded width) a forward program holds: 8 rows of the critic's 768."""

_BACKWARD_TILE_ELEMENTS = 4096
"""Elements of one row tile a backward program holds at once. The backward keeps three running sums of that
size (the parameter gradients, summed across rows once at the end), so its tile is the smaller."""

_TARGET_PROGRAMS = 128
"""About how many programs the backward spreads the rows over (each writes one partial row of sums per
parameter). 128 is about one per multiprocessor of an H200 (132): the backward runs in one wave and, while
the collector runs beside the learner, leaves it room; docs/perf/tuning/0023 has the measurements. The default
of `SacConfig.norm_backward_programs`, which the SAC networks pass to every call; a call without a count (a
layer on its own, as `benchmarks/norm_kernel.py` sweeps it) reads this constant."""

_BACKWARD_STAGES = 1
"""Loop iterations of a backward program whose loads are in flight at once (Triton's software pipelining;
1: none)."""

_SUM_ROWS, _SUM_COLUMNS = 64, 32
"""The tile (partial rows x columns) of the kernel that adds the backward's partial sums. One program adds one
parameter's partials over one narrow column block (144 programs for the critic's 768 columns), in a few
passes, so the adding is neither a long chain of loads nor a handful of busy programs."""


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
    backward_programs: int | None = None,
) -> torch.Tensor:
    """``silu(layer_norm(h + linear_bias) * weight + bias)`` per member, from the kernel; differentiable in all
    four inputs.

    Args:
        h: (M, B, D) the bias-free product of a member-stacked linear layer, float32, bf16 or fp16.
        linear_bias: (M, 1, D) that layer's bias (float32), or None.
        weight: (M, 1, D) the normalization's per-member scale (float32).
        bias: (M, 1, D) the normalization's per-member shift (float32).
        eps: added to the variance.
        backward_programs: about how many programs the backward spreads the rows over (None: `_TARGET_PROGRAMS`).

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
    programs = _TARGET_PROGRAMS if backward_programs is None else backward_programs
    out, _, _ = getattr(torch.ops.trainrt, OP_NAME)(h, linear_bias, weight, bias, eps, programs)
    return out


# --------------------------------------------------------------------------------------------------
# launch geometry
# --------------------------------------------------------------------------------------------------
def _block_sizes(width: int, tile_elements: int) -> tuple[int, int]:
    """(rows per tile, padded width) for rows of ``width`` values in tiles of about ``tile_elements``."""
    block_d = triton.next_power_of_2(width)
    return max(1, tile_elements // block_d), block_d


def backward_split(
    rows_per_member: int, members: int, block_r: int, target_programs: int | None = None
) -> tuple[int, int]:
    """(rows per backward program, programs per member): whole tiles of one member's rows per program, about
    ``target_programs`` (None: `_TARGET_PROGRAMS`) programs in all, and no more programs than tiles. The last
    program of a member may hold fewer rows (masked)."""
    target = _TARGET_PROGRAMS if target_programs is None else target_programs
    tiles = triton.cdiv(rows_per_member, block_r)
    wanted = max(1, min(tiles, target // members))
    rows_per_program = triton.cdiv(tiles, wanted) * block_r
    return rows_per_program, triton.cdiv(rows_per_member, rows_per_program)


def _num_warps(block_d: int) -> int:
    return 4 if block_d <= 512 else 8


# --------------------------------------------------------------------------------------------------
# kernels
# --------------------------------------------------------------------------------------------------
if triton is not None:

    @triton.jit
    def _forward_kernel(
        H, LIN_B, GAMMA, BETA, Y, MEAN, RSTD,
        rows_per_member, width, eps,
        BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr,
    ):  # fmt: skip
        # grid: (row tiles of one member, members); a program's rows belong to one member
        member = tl.program_id(1)
        local = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        rows = member * rows_per_member + local
        cols = tl.arange(0, BLOCK_D)
        row_ok = local < rows_per_member
        col_ok = cols < width
        ok = row_ok[:, None] & col_ok[None, :]
        lin_b = tl.load(LIN_B + member * width + cols, mask=col_ok, other=0.0)
        gamma = tl.load(GAMMA + member * width + cols, mask=col_ok, other=0.0)
        beta = tl.load(BETA + member * width + cols, mask=col_ok, other=0.0)
        offsets = rows[:, None] * width + cols[None, :]
        x = tl.load(H + offsets, mask=ok, other=0.0).to(tl.float32) + lin_b[None, :]
        mean = tl.sum(x, axis=1) / width
        centred = tl.where(ok, x - mean[:, None], 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(centred * centred, axis=1) / width + eps)
        z = centred * rstd[:, None] * gamma[None, :] + beta[None, :]
        y = z * tl.sigmoid(z)
        tl.store(Y + offsets, y.to(Y.dtype.element_ty), mask=ok)
        tl.store(MEAN + rows, mean, mask=row_ok)
        tl.store(RSTD + rows, rstd, mask=row_ok)

    @triton.jit
    def _backward_kernel(
        H, LIN_B, GAMMA, BETA, MEAN, RSTD, DY, DH, PARTIALS,
        rows_per_member, rows_per_program, width,
        PARAM_GRADS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr, STAGES: tl.constexpr,
    ):  # fmt: skip
        # grid: (programs per member, members); each program owns rows_per_program rows of one member
        program = tl.program_id(0)
        member = tl.program_id(1)
        cols = tl.arange(0, BLOCK_D)
        col_ok = cols < width
        lin_b = tl.load(LIN_B + member * width + cols, mask=col_ok, other=0.0)
        gamma = tl.load(GAMMA + member * width + cols, mask=col_ok, other=0.0)
        beta = tl.load(BETA + member * width + cols, mask=col_ok, other=0.0)
        # Running sums per tile position; summed across rows once, after the loop.
        sum_gamma = tl.zeros((BLOCK_R, BLOCK_D), dtype=tl.float32)
        sum_beta = tl.zeros((BLOCK_R, BLOCK_D), dtype=tl.float32)
        sum_lin_b = tl.zeros((BLOCK_R, BLOCK_D), dtype=tl.float32)
        first = program * rows_per_program
        for start in tl.range(0, rows_per_program, BLOCK_R, num_stages=STAGES):
            local = first + start + tl.arange(0, BLOCK_R)
            row_ok = local < rows_per_member
            rows = member * rows_per_member + local
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
            if PARAM_GRADS:
                sum_gamma += dz * x_hat
                sum_beta += dz
                sum_lin_b += dh
        if PARAM_GRADS:
            base = PARTIALS + ((member * tl.num_programs(0) + program) * 3) * width + cols
            tl.store(base, tl.sum(sum_gamma, axis=0), mask=col_ok)
            tl.store(base + width, tl.sum(sum_beta, axis=0), mask=col_ok)
            tl.store(base + 2 * width, tl.sum(sum_lin_b, axis=0), mask=col_ok)

    @triton.jit
    def _sum_partials_kernel(
        PARTIALS, GRAD_GAMMA, GRAD_BETA, GRAD_LIN_B,
        programs_per_member, width,
        BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
    ):  # fmt: skip
        # grid: (column blocks, 3 parameters, members); sums one parameter's partial rows of one member,
        # BLOCK_P at a time, in a fixed order
        which = tl.program_id(1)
        member = tl.program_id(2)
        cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
        col_ok = cols < width
        total = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
        for start in range(0, programs_per_member, BLOCK_P):
            program = start + tl.arange(0, BLOCK_P)
            ok = (program < programs_per_member)[:, None] & col_ok[None, :]
            rows = (member * programs_per_member + program[:, None]) * 3 + which
            total += tl.load(PARTIALS + rows * width + cols[None, :], mask=ok, other=0.0)
        summed = tl.sum(total, axis=0)
        offsets = member * width + cols
        if which == 0:
            tl.store(GRAD_GAMMA + offsets, summed, mask=col_ok)
        elif which == 1:
            tl.store(GRAD_BETA + offsets, summed, mask=col_ok)
        else:
            tl.store(GRAD_LIN_B + offsets, summed, mask=col_ok)


# --------------------------------------------------------------------------------------------------
# the custom op and its gradient
# --------------------------------------------------------------------------------------------------
@torch.library.custom_op(f"trainrt::{OP_NAME}", mutates_args=())
def _layer_norm_silu_op(
    h: torch.Tensor,
    linear_bias: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    eps: float,
    backward_programs: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(y (M, B, D) in h's dtype, mean (M*B,), rstd (M*B,)) from the kernel; ``backward_programs`` is for the
    backward (`_setup_context` keeps it)."""
    h = h.contiguous()
    members, rows_per_member, width = h.shape
    total = members * rows_per_member
    y = torch.empty_like(h)
    mean = torch.empty(total, device=h.device, dtype=torch.float32)
    rstd = torch.empty(total, device=h.device, dtype=torch.float32)
    block_r, block_d = _block_sizes(width, _TILE_ELEMENTS)
    _forward_kernel[(triton.cdiv(rows_per_member, block_r), members)](
        h, linear_bias.contiguous(), weight.contiguous(), bias.contiguous(), y, mean, rstd,
        rows_per_member, width, eps,
        BLOCK_R=block_r, BLOCK_D=block_d, num_warps=_num_warps(block_d),
    )  # fmt: skip
    return y, mean, rstd


@_layer_norm_silu_op.register_fake
def _layer_norm_silu_fake(h, linear_bias, weight, bias, eps, backward_programs):
    total = h.shape[0] * h.shape[1]
    stats = h.new_empty(total, dtype=torch.float32)
    return torch.empty_like(h, memory_format=torch.contiguous_format), stats, stats.clone()


@torch.library.custom_op(f"trainrt::{OP_NAME}_backward", mutates_args=())
def _layer_norm_silu_backward_op(
    grad: torch.Tensor,
    h: torch.Tensor,
    linear_bias: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    mean: torch.Tensor,
    rstd: torch.Tensor,
    param_grads: bool,
    backward_programs: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Gradients of h (h's dtype), linear_bias, weight and bias (float32, (M, 1, D)) from the kernel. Without
    ``param_grads`` (the parameters are frozen) the last three are empty and the kernel skips their sums."""
    h = h.contiguous()
    grad = grad.contiguous()
    members, rows_per_member, width = h.shape
    block_r, block_d = _block_sizes(width, _BACKWARD_TILE_ELEMENTS)
    rows_per_program, programs = backward_split(rows_per_member, members, block_r, backward_programs)
    grad_h = torch.empty_like(h)
    shape = (members, 1, width) if param_grads else (0,)
    grad_weight, grad_bias, grad_linear_bias = (h.new_empty(shape, dtype=torch.float32) for _ in range(3))
    # Frozen parameters: the kernel compiles without the sums and never touches its partials argument.
    partials = h.new_empty((members, programs, 3, width), dtype=torch.float32) if param_grads else grad_h
    _backward_kernel[(programs, members)](
        h, linear_bias.contiguous(), weight.contiguous(), bias.contiguous(), mean, rstd, grad, grad_h,
        partials, rows_per_member, rows_per_program, width,
        PARAM_GRADS=param_grads, BLOCK_R=block_r, BLOCK_D=block_d, STAGES=_BACKWARD_STAGES,
        num_warps=_num_warps(block_d),
    )  # fmt: skip
    if param_grads:
        block_c = min(block_d, _SUM_COLUMNS)
        _sum_partials_kernel[(triton.cdiv(width, block_c), 3, members)](
            partials, grad_weight, grad_bias, grad_linear_bias, programs, width,
            BLOCK_P=min(triton.next_power_of_2(programs), _SUM_ROWS), BLOCK_C=block_c,
        )  # fmt: skip
    return grad_h, grad_linear_bias, grad_weight, grad_bias


@_layer_norm_silu_backward_op.register_fake
def _layer_norm_silu_backward_fake(
    grad, h, linear_bias, weight, bias, mean, rstd, param_grads, backward_programs
):
    members, _, width = h.shape
    shape = (members, 1, width) if param_grads else (0,)
    params = [h.new_empty(shape, dtype=torch.float32) for _ in range(3)]
    return torch.empty_like(h, memory_format=torch.contiguous_format), *params


def _setup_context(ctx, inputs, output) -> None:
    h, linear_bias, weight, bias, _, backward_programs = inputs
    _, mean, rstd = output
    ctx.save_for_backward(h, linear_bias, weight, bias, mean, rstd)
    ctx.backward_programs = backward_programs


def _backward(ctx, grad_y, _grad_mean, _grad_rstd):
    h, linear_bias, weight, bias, mean, rstd = ctx.saved_tensors
    param_grads = any(ctx.needs_input_grad[1:4])  # the critic is frozen during the actor's step
    grad_h, grad_linear_bias, grad_weight, grad_bias = _layer_norm_silu_backward_op(
        grad_y, h, linear_bias, weight, bias, mean, rstd, param_grads, ctx.backward_programs
    )
    if not param_grads:
        return grad_h, None, None, None, None, None
    return grad_h, grad_linear_bias, grad_weight, grad_bias, None, None


_layer_norm_silu_op.register_autograd(_backward, setup_context=_setup_context)
