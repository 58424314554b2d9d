"""FlashSAC's networks (`trainrt.algos.flashsac`): norm-bounded layers over member-stacked activations.

Activations are (M, B, D): the twin critic is M = 2 independent networks evaluated with one batched GEMM per layer,
the actor is M = 1. Observations (and actions, for the critic) enter through BatchNorm and a linear embedding; the
trunk is a stack of inverted-residual blocks and ends in an RMSNorm. After every optimizer step
`project_to_unit_norm` re-projects each weight vector of a linear layer to unit norm, and each normalization
layer's scale (with its shift, for BatchNorm) to norm sqrt(width).
"""

import math
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from trainrt.algos.networks import GEMM_ALIGNMENT, aligned_bmm, bounded_log_std

if TYPE_CHECKING:
    from trainrt.algos.flashsac_config import FlashSacConfig


# --------------------------------------------------------------------------------------------------
# norm-bounded layers over member-stacked activations (M, B, D): the twin critic is M = 2 independent
# networks evaluated with one batched GEMM per layer, the actor is M = 1
# --------------------------------------------------------------------------------------------------
class _Bf16Weight(torch.autograd.Function):
    """A weight's bf16 copy in the forward; in the backward the gradient goes to the float32 weight, cast as
    autocast's own cast of the weight would send it."""

    @staticmethod
    def forward(ctx: Any, weight: torch.Tensor, copy: torch.Tensor) -> torch.Tensor:
        return copy

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad.to(torch.float32), None


def _autocasts_to(x: torch.Tensor, dtype: torch.dtype) -> bool:
    """Whether autocast is on for ``x``'s device and casts products to ``dtype`` (host state, not a tensor)."""
    kind = x.device.type
    return torch.is_autocast_enabled(kind) and torch.get_autocast_dtype(kind) == dtype


class _UnitLinear(nn.Module):
    """M linear layers (M, B, in) -> (M, B, out) whose weight vectors (one per output unit) keep unit norm.

    With `keep_bf16_copy_` the layer also holds ``weight_bf16``, the weight in bf16, which every change of the
    weight through this module rewrites (`project_`, `refresh_bf16_copy_`); under bf16 autocast the forward
    multiplies by it instead of casting the weight.
    """

    weight_bf16: torch.Tensor | None

    def __init__(self, members: int, in_features: int, out_features: int, *, bias: bool = False):
        super().__init__()
        weight = torch.empty(members, out_features, in_features)
        for member in weight:
            nn.init.orthogonal_(member)
        self.weight = nn.Parameter(weight.transpose(1, 2).contiguous())  # (M, in, out)
        self.bias = nn.Parameter(torch.zeros(members, 1, out_features)) if bias else None
        self.register_buffer("weight_bf16", None, persistent=False)  # not in checkpoints: derived
        self.gemm_alignment = GEMM_ALIGNMENT

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(M, B, in) -> (M, B, out)."""
        copy = self.weight_bf16
        if copy is not None and _autocasts_to(x, copy.dtype):
            # What autocast does to the product's operands, with the weight's cast made beforehand.
            out = aligned_bmm(
                x.to(copy.dtype), _Bf16Weight.apply(self.weight, copy), alignment=self.gemm_alignment
            )
        else:
            out = aligned_bmm(x, self.weight.to(x.dtype), alignment=self.gemm_alignment)
        return out if self.bias is None else out + self.bias.to(out.dtype)

    @torch.no_grad()
    def project_(self) -> None:
        """Rescale every output unit's weight vector to unit L2 norm (and rewrite the bf16 copy)."""
        self.weight.div_(self.weight.norm(dim=1, keepdim=True).clamp(min=1e-8))
        self.refresh_bf16_copy_()

    @torch.no_grad()
    def keep_bf16_copy_(self) -> None:
        """Hold a bf16 copy of the weight from now on (see the class docstring)."""
        if self.weight_bf16 is None:
            self.weight_bf16 = self.weight.detach().to(torch.bfloat16)

    @torch.no_grad()
    def refresh_bf16_copy_(self) -> None:
        """Rewrite the bf16 copy from the weight, in place (a captured graph keeps its address)."""
        if self.weight_bf16 is not None:
            self.weight_bf16.copy_(self.weight)


class _BatchNorm(nn.Module):
    """BatchNorm over the batch axis of each member, (M, B, D) -> (M, B, D); the mode is an argument.

    `F.batch_norm` keeps bf16 activations in bf16 with float32 statistics and fuses the statistics,
    the running-average update and the affine map. Member m's feature d is channel m * D + d.
    """

    def __init__(self, members: int, dim: int, momentum: float, eps: float = 1e-5):
        super().__init__()
        self.members = members
        self.dim = dim
        self.momentum = momentum
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(members * dim))
        self.bias = nn.Parameter(torch.zeros(members * dim))
        self.register_buffer("running_mean", torch.zeros(members * dim))
        self.register_buffer("running_var", torch.ones(members * dim))

    def forward(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        """Batch statistics (and a running-statistics update) when training, running statistics otherwise."""
        flat = x.squeeze(0) if self.members == 1 else x.transpose(0, 1).flatten(1)
        out = F.batch_norm(
            flat,
            self.running_mean,
            self.running_var,
            self.weight,
            self.bias,
            training,
            self.momentum,
            self.eps,
        )
        return (
            out.unsqueeze(0)
            if self.members == 1
            else out.unflatten(1, (self.members, self.dim)).transpose(0, 1)
        )

    @torch.no_grad()
    def project_(self) -> None:
        """Rescale each member's (scale, shift) pair jointly to norm sqrt(dim)."""
        weight, bias = self.weight.view(self.members, self.dim), self.bias.view(self.members, self.dim)
        norm = (weight.square().sum(-1, keepdim=True) + bias.square().sum(-1, keepdim=True)).sqrt()
        factor = math.sqrt(self.dim) / norm.clamp(min=1e-8)
        weight.mul_(factor)
        bias.mul_(factor)


class _RmsNorm(nn.Module):
    """RMSNorm per member, (M, B, D) -> (M, B, D) float32: bounds each row's feature norm."""

    def __init__(self, members: int, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(members, 1, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Divide each row by its root mean square, then scale."""
        x = x.float()
        return x * torch.rsqrt(x.square().mean(-1, keepdim=True) + self.eps) * self.weight

    @torch.no_grad()
    def project_(self) -> None:
        """Rescale each member's scale vector to norm sqrt(dim)."""
        dim = self.weight.shape[-1]
        self.weight.mul_(math.sqrt(dim) / self.weight.norm(dim=-1, keepdim=True).clamp(min=1e-8))


_PROJECTED_LAYERS = (_UnitLinear, _BatchNorm, _RmsNorm)


@torch.no_grad()
def project_to_unit_norm(module: nn.Module) -> None:
    """Re-project every norm-bounded layer in `module` (called after each optimizer step)."""
    for layer in module.modules():
        if isinstance(layer, _PROJECTED_LAYERS):
            layer.project_()


def _unit_linear_layers(module: nn.Module) -> list[_UnitLinear]:
    return [layer for layer in module.modules() if isinstance(layer, _UnitLinear)]


@torch.no_grad()
def keep_bf16_weight_copies(module: nn.Module) -> None:
    """Give every unit-norm linear layer of `module` a bf16 copy of its weight (`FlashSacConfig.bf16_weight_copies`)."""
    for layer in _unit_linear_layers(module):
        layer.keep_bf16_copy_()


@torch.no_grad()
def refresh_bf16_weight_copies(module: nn.Module) -> None:
    """Rewrite the bf16 weight copies of `module` from its weights (after a change outside `project_`)."""
    for layer in _unit_linear_layers(module):
        layer.refresh_bf16_copy_()


def drop_bf16_weight_copies(module: nn.Module) -> None:
    """Remove the bf16 weight copies of `module` (an exported policy runs in float32 and needs none)."""
    for layer in _unit_linear_layers(module):
        layer.weight_bf16 = None


class _InvertedResidualBlock(nn.Module):
    """x + ReLU(BN(W2 ReLU(BN(W1 x)))) with W1 expanding the width `expansion` times, per member."""

    def __init__(self, members: int, dim: int, expansion: int, momentum: float):
        super().__init__()
        self.expand = _UnitLinear(members, dim, dim * expansion)
        self.expand_norm = _BatchNorm(members, dim * expansion, momentum)
        self.project = _UnitLinear(members, dim * expansion, dim)
        self.project_norm = _BatchNorm(members, dim, momentum)

    def forward(self, x: torch.Tensor, training: bool) -> torch.Tensor:
        """(M, B, dim) -> (M, B, dim)."""
        hidden = F.relu(self.expand_norm(self.expand(x), training))
        return x + F.relu(self.project_norm(self.project(hidden), training))


class _FlashTrunk(nn.Module):
    """BatchNorm -> unit linear embedding -> inverted-residual blocks -> RMSNorm: (M, B, in) -> (M, B, hidden)."""

    def __init__(
        self, members: int, in_dim: int, hidden_dim: int, num_blocks: int, expansion: int, momentum: float
    ):
        super().__init__()
        self.input_norm = _BatchNorm(members, in_dim, momentum)
        self.embed = _UnitLinear(members, in_dim, hidden_dim)
        self.blocks = nn.ModuleList(
            _InvertedResidualBlock(members, hidden_dim, expansion, momentum) for _ in range(num_blocks)
        )
        self.output_norm = _RmsNorm(members, hidden_dim)

    def forward(self, x: torch.Tensor, training: bool, rows: slice | None = None) -> torch.Tensor:
        """Inputs (M, B, in) -> features (M, B, hidden), or (M, R, hidden) of the rows in ``rows``.

        Every row enters the BatchNorm statistics; only the rows asked for pass the row-wise RMSNorm (and
        whatever head follows), so a caller that needs half of a joint batch does not pay for the other half.
        """
        x = self.embed(self.input_norm(x, training))
        for block in self.blocks:
            x = block(x, training)
        return self.output_norm(x if rows is None else x[:, rows])


class FlashSacActor(nn.Module):
    """Tanh-Gaussian policy: policy obs (B, Dp) -> pre-tanh mean and log-std (B, A)."""

    def __init__(self, obs_dim: int, num_actions: int, cfg: "FlashSacConfig"):
        super().__init__()
        self.log_std_min = cfg.log_std_min
        self.log_std_max = cfg.log_std_max
        self.trunk = _FlashTrunk(
            1,
            obs_dim,
            cfg.actor_hidden_dim,
            cfg.actor_num_blocks,
            cfg.block_expansion,
            cfg.batch_norm_momentum,
        )
        self.head: nn.Module
        if cfg.actor_head == "unit_norm":
            # One unit-norm weight vector per output (29 means, then 29 log-stds), orthogonal at start, biases
            # free and zero. The trunk's RMSNorm puts the features at norm ~sqrt(width), so the initial means
            # spread over about +-1 before the tanh.
            self.head = _UnitLinear(1, cfg.actor_hidden_dim, 2 * num_actions, bias=True)
        else:
            # Unconstrained: near-zero mean and mid-range std at start.
            self.head = nn.Linear(cfg.actor_hidden_dim, 2 * num_actions)
            nn.init.normal_(self.head.weight[:num_actions], std=1e-3)
            nn.init.zeros_(self.head.weight[num_actions:])
            nn.init.zeros_(self.head.bias)

    def forward(
        self, obs: torch.Tensor, training: bool, rows: slice | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-squash mean (B, A) and bounded log-std (B, A); (R, A) each for the rows in ``rows`` only (all rows
        still set the BatchNorm statistics)."""
        out = self.head(self.trunk(obs.unsqueeze(0), training, rows)).squeeze(
            0
        )  # either head takes (1, B, H)
        mean, raw_log_std = out.chunk(2, dim=-1)
        return mean, bounded_log_std(raw_log_std, self.log_std_min, self.log_std_max)


class FlashSacCritic(nn.Module):
    """Twin categorical critic: (critic obs (B, Dc), action (B, A)) -> logits (2, B, num_atoms).

    The two members are independent networks (own weights, own BatchNorm statistics) stored stacked.
    """

    def __init__(self, obs_dim: int, num_actions: int, cfg: "FlashSacConfig"):
        super().__init__()
        self.trunk = _FlashTrunk(
            2,
            obs_dim + num_actions,
            cfg.critic_hidden_dim,
            cfg.critic_num_blocks,
            cfg.block_expansion,
            cfg.batch_norm_momentum,
        )
        self.head = _UnitLinear(2, cfg.critic_hidden_dim, cfg.num_atoms, bias=True)

    def forward(
        self, obs: torch.Tensor, action: torch.Tensor, training: bool, rows: slice | None = None
    ) -> torch.Tensor:
        """Return-distribution logits of both members (2, B, num_atoms), or (2, R, num_atoms) for the rows in
        ``rows`` only (all rows still set the BatchNorm statistics)."""
        x = torch.cat([obs, action.to(obs.dtype)], dim=-1)
        return self.head(self.trunk(x.unsqueeze(0).expand(2, *x.shape), training, rows))
