"""FlashSAC: SAC with norm-bounded networks, a categorical critic and held exploration noise.

Reference: D. Kim, Y. Lee, M. Park, et al., "FlashSAC: Fast and Stable Off-Policy Reinforcement
Learning for High-Dimensional Robot Control", arXiv:2604.04539, 2026. This module is our own
implementation of the method as described there; it shares no code with the authors' release.

What makes it FlashSAC rather than plain SAC, in the order the code meets it:
- Networks bound weight, feature and gradient norms. Observations (and actions, for the critic)
  enter through BatchNorm and a linear embedding; the trunk is a stack of inverted-residual blocks
  (expand 4x -> BatchNorm -> ReLU -> project back -> BatchNorm -> ReLU, plus the skip) and ends in an
  RMSNorm. BatchNorm runs in training mode inside updates and in eval mode (running statistics) for
  acting and export.
- After every optimizer step each weight vector of a linear layer is re-projected to unit norm, and each
  normalization layer's scale (with its shift, for BatchNorm) to norm sqrt(width). The actor's output
  head is the exception by default (``actor_head="linear"``): unconstrained, its mean starting near zero,
  log-std bounds [-5, 0], as in the authors' later release. Their first release norm-bounded the head too,
  with free biases and log-std bounds [-10, 2]; ``actor_head="unit_norm"`` builds that head, which tracked
  worse in our A/B (adr/0016).
- The critic is a twin categorical (C51) critic whose target uses the member with the lower
  expected value. Rewards are divided by an adaptive scale, max(std of the discounted return,
  max |return| / G_max), so normalized returns fit the fixed support [-G_max, G_max];
  ``reward_scale_mode="return_std"`` divides by the std alone (adr/0017).
- The temperature's target entropy is that of a Gaussian with a fixed per-dimension std.
- Exploration noise is held: each env keeps one Gaussian draw for a Zeta-distributed number of steps
  (P(n) proportional to n^-s, n <= n_max), giving temporally correlated exploration. The draw and its
  remaining hold live in persistent per-env buffers (`held_noise`, `hold_steps_left`) so `act` stays
  graph-capturable.
  Deviation from the authors' release, on purpose: there one hold length is drawn for all envs at
  once and every env redraws its noise at the same step; here each env draws its own hold length and
  an env whose episode ended redraws at once, so envs never change noise in lockstep and a new
  episode never inherits the previous episode's noise.
- Learning rates follow a warm-up + cosine schedule (`lr_schedule`), computed on the device so it runs
  inside the replayed learner graph; the presets decay 3e-4 to 1.5e-4 over the run, as the authors.
- The actor and temperature are updated every `actor_update_period` critic updates, before the critic
  step, and the actor sees current and next observations together so its BatchNorm statistics match
  the critic's batch.
"""

import math
from typing import Any, ClassVar, Literal

import torch
import torch.nn.functional as F
from pydantic import Field
from torch import nn

from trainrt.algos.adamw_step import adamw_step
from trainrt.algos.agent import Agent, CheckedLearnerConfig, clone_state, frozen
from trainrt.algos.distributional import (
    categorical_projection,
    expected_value,
)
from trainrt.algos.networks import aligned_bmm, bounded_log_std, tanh_gaussian_sample
from trainrt.hotpath import cold_path
from trainrt.replay import Batch


class FlashSacConfig(CheckedLearnerConfig):
    """FlashSAC hyperparameters; defaults: the authors' Isaac Lab setting, scaled to 2048 envs.

    These defaults are the one home of the FlashSAC learner's settings: they are what the canonical presets run
    (an iteration of 8 vector env steps at 2048 envs, ``trainrt.config.presets``), and a task preset names
    only what differs from them (``trainrt/tasks/<task>/presets.py``). A field's meaning is its description
    (``trainrt.algos.agent.LEARNER_FIELD_DESCRIPTIONS`` for the fields both learners share).
    """

    # Networks: the authors' Isaac Lab sizes (blocks expand the width 4x internally). The learner graph
    # replays in 5.5 ms per update at batch 8192 on an H200 with motion-tracking observation sizes.
    actor_hidden_dim: int = Field(128, ge=4, description="width of the actor's residual stream")
    actor_num_blocks: int = Field(2, ge=0, description="residual blocks of the actor")
    critic_hidden_dim: int = Field(256, ge=4, description="width of each critic's residual stream")
    critic_num_blocks: int = Field(2, ge=0, description="residual blocks of each critic")
    block_expansion: int = Field(4, ge=1, description="width expansion inside a residual block")
    batch_norm_momentum: float = Field(
        0.01, gt=0.0, le=1.0, description="momentum of the BatchNorm running statistics"
    )
    log_std_min: float = -5.0
    log_std_max: float = 0.0
    # The actor's output layer: "linear" (the presets) is unconstrained, its mean starting near zero;
    # "unit_norm" re-projects each action's mean and log-std weight vectors to unit norm after every step
    # (free biases), as the authors' first release did with log-std bounds [-10, 2]. adr/0016 has the A/B.
    actor_head: Literal["linear", "unit_norm"] = Field(
        "linear", description="actor output layer: linear, or unit_norm (re-projected weight vectors)"
    )

    # Categorical critic over the normalized-return range [-G_max, G_max].
    num_atoms: int = Field(101, ge=2)
    v_min: float = -5.0
    v_max: float = 5.0
    # Adaptive reward scaling, by the running statistics of the discounted return G:
    # "max_return" (the authors) divides rewards by max(std(G), max|G| / normalized_return_max), so the
    # largest return ever seen lands on the support's edge (keep normalized_return_max equal to v_max);
    # "return_std" divides by std(G) alone, so one outlier return (a fall full of penalties) cannot
    # shrink every other return to a fraction of an atom for the rest of the run (adr/0017).
    reward_scaling: bool = Field(
        True, description="scale rewards by running statistics of the discounted return"
    )
    reward_scale_mode: Literal["max_return", "return_std"] = Field(
        "max_return", description="reward scale: max_return or return_std (adr/0017)"
    )
    normalized_return_max: float = Field(
        5.0, gt=0.0, description="largest scaled return (max_return mode); keep equal to v_max"
    )

    # Temporal difference: 3-step returns, as the authors' Isaac Lab setting; the target tracks at 0.05 per
    # update, the reference schedule the presets are measured with (the authors' Isaac Lab setting: 0.01).
    gamma: float = Field(0.99, gt=0.0, le=1.0)
    n_step: int = Field(3, ge=1)
    tau: float = Field(0.05, gt=0.0, le=1.0)

    # Optimization. Weight decay is 0: the unit-norm projection already fixes every weight's scale.
    actor_lr: float = Field(3e-4, gt=0.0)
    critic_lr: float = Field(3e-4, gt=0.0)
    alpha_lr: float = Field(3e-4, gt=0.0)
    # Actor and critic learning rates: linear warm-up, then cosine decay to lr_final_ratio of the
    # initial rate over lr_decay_updates (None: the run's total updates), as the authors decay 3e-4
    # to 1.5e-4 over training; "constant" keeps them fixed.
    lr_schedule: Literal["constant", "warmup_cosine"] = "warmup_cosine"
    lr_warmup_updates: int = Field(0, ge=0)
    lr_final_ratio: float = Field(0.5, gt=0.0, le=1.0)
    lr_decay_updates: int | None = Field(None, ge=1)
    weight_decay: float = Field(0.0, ge=0.0)
    adam_betas: tuple[float, float] = (0.9, 0.999)
    # 4 updates of 2048 transitions per 2048-env vector step replay each transition ~4 times, the authors'
    # Isaac Lab ratio (2 updates x 2048 per 1024-env step): 32 per iteration of the presets' 8 vector steps
    # (all of them replay as one learner graph).
    batch_size: int = Field(2048, ge=1)
    updates_per_iteration: int = Field(32, ge=1)
    # Delayed actor/temperature: every 2nd critic update, as the authors.
    actor_update_period: int = Field(2, ge=1)

    # Replay: a large buffer (authors: 10M transitions); 4096 rows x 2048 envs = 8.4M (~30 GB with
    # motion-tracking observation sizes, stored twice for obs and next_obs).
    buffer_size_per_env: int = Field(4096, ge=1)
    # Vector env steps before the first update (~100k transitions at 2048 envs, as the authors).
    learning_starts: int = Field(50, ge=1)

    # Temperature: target entropy of a Gaussian with std 0.15 per action dimension (paper), unless
    # target_entropy is given explicitly.
    alpha_init: float = Field(0.01, gt=0.0)
    target_action_std: float = Field(
        0.15,
        gt=0.0,
        description="per-dimension std of the Gaussian whose entropy is the target (unless target_entropy)",
    )
    target_entropy: float | None = Field(None, description="target entropy (null: from target_action_std)")

    # Held exploration noise: hold length n ~ Zeta(s) truncated to n <= noise_hold_max_steps.
    noise_hold_zeta_exponent: float = Field(
        2.0, gt=0.0, description="exponent s of the Zeta(s) hold length of exploration noise"
    )
    noise_hold_max_steps: int = Field(
        16, ge=1, description="longest hold of one exploration noise draw, in steps"
    )

    # Numerics and inputs. The input BatchNorm already standardizes observations, so the separate
    # running normalizer is off by default.
    bf16_autocast: bool = True
    obs_normalization: bool = False
    actor_obs_group: str = "policy"
    critic_obs_group: str = "critic"


BF16_WEIGHT_COPIES = True
"""Keep a bf16 copy of every unit-norm weight beside it, rewritten wherever the weight changes (its projection
after each optimizer step, the target's EMA, a checkpoint load), so that a forward under bf16 autocast reads
the copy instead of casting the weight again: about 25 cast kernels fewer per update at the presets'
sizes. The arithmetic is the same bit for bit (docs/perf/tuning/0029). Only a run under bf16 autocast (CUDA) keeps copies;
`benchmarks/learner_variants.py --variants padded,cast_weights` measures the update without them."""

HORIZONTAL_FUSION_PARTS = ("_project_actor", "_project_critic", "_critic_optimizer_step", "_actor_step")
"""The update's parts that touch every parameter of a network one tensor at a time (the unit-norm projections with
the target's EMA, the AdamW steps). They compile with inductor's horizontal fusion (combo kernels), so the
per-tensor reductions and updates share a few launches instead of one or two each (docs/perf/tuning/0033)."""

HORIZONTAL_FUSION_OPTIONS: dict[str, Any] = {"combo_kernels": True, "combo_kernels_pointwise_only": False}
"""The inductor options of `HORIZONTAL_FUSION_PARTS`: horizontal fusion, reductions included."""

REWARD_SCALE_WARNING_RATIO = 4.0
"""`FlashSacAgent.learning_warnings` reports a reward scale whose max |return| term exceeds this many return
stds (the tracking runs of adr/0017 sat at about 15)."""


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

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(M, B, in) -> (M, B, out)."""
        copy = self.weight_bf16
        if copy is not None and _autocasts_to(x, copy.dtype):
            # What autocast does to the product's operands, with the weight's cast made beforehand.
            out = aligned_bmm(x.to(copy.dtype), _Bf16Weight.apply(self.weight, copy))
        else:
            out = aligned_bmm(x, self.weight.to(x.dtype))
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
    """Give every unit-norm linear layer of `module` a bf16 copy of its weight (`BF16_WEIGHT_COPIES`)."""
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

    def __init__(self, obs_dim: int, num_actions: int, cfg: FlashSacConfig):
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

    def __init__(self, obs_dim: int, num_actions: int, cfg: FlashSacConfig):
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


# --------------------------------------------------------------------------------------------------
# held exploration noise
# --------------------------------------------------------------------------------------------------
def zeta_hold_cdf(exponent: float, max_steps: int) -> torch.Tensor:
    """CDF (max_steps,) of the truncated Zeta law P(n) = n^-exponent / sum_k k^-exponent, n = 1..max_steps."""
    steps = torch.arange(1, max_steps + 1, dtype=torch.float64)
    pmf = steps.pow(-exponent)
    return (pmf / pmf.sum()).cumsum(0).float()


def sample_hold_steps(uniform: torch.Tensor, cdf: torch.Tensor) -> torch.Tensor:
    """Inverse-CDF draw of hold lengths: uniform (N,) in [0, 1) -> steps (N,) long in 1..len(cdf)."""
    below = (uniform.unsqueeze(-1) >= cdf).sum(-1)
    return below.clamp(max=cdf.shape[0] - 1) + 1


# --------------------------------------------------------------------------------------------------
# agent
# --------------------------------------------------------------------------------------------------
class FlashSacAgent(Agent):
    """FlashSAC agent. Construct through `trainrt.algos.make_agent("flashsac", ...)`.

    Attributes:
        held_noise: (N, A) exploration noise each env currently holds (allocated by the first
            stochastic `act`; None before).
        hold_steps_left: (N,) long, steps the held noise still applies; 0 means draw a new one.
    """

    algo = "flashsac"
    compiled_parts = (
        "_advance_lr_schedule",
        "_normalize",
        "_actor_loss",
        "_critic_target",
        "_critic_loss",
        "_critic_optimizer_step",
        "_actor_step",
        "_temperature_step",
        "_project_actor",
        "_project_critic",
        "_record_losses",
    )
    optimizer_step_parts = ("_critic_optimizer_step", "_actor_step", "_temperature_step")
    part_compile_options: ClassVar[dict[str, dict[str, Any]]] = {
        part: dict(HORIZONTAL_FUSION_OPTIONS) for part in HORIZONTAL_FUSION_PARTS
    }
    # BatchNorm on running statistics for acting and export.
    actor_eval_kwargs: ClassVar[dict[str, Any]] = {"training": False}

    def __init__(
        self,
        cfg: FlashSacConfig,
        obs_dims: dict[str, int],
        num_actions: int,
        device: torch.device | str,
        seed: int = 0,
    ):
        super().__init__(cfg, num_actions, device, seed)
        actor_dim, critic_dim = self._obs_group_dims(obs_dims)
        with self._seeded_init():
            actor = FlashSacActor(actor_dim, num_actions, cfg)
            critic = FlashSacCritic(critic_dim, num_actions, cfg)
        # Start on the norm bounds every optimizer step re-projects to (on the device, before the
        # target copy is taken).
        project_to_unit_norm(actor.to(self.device))
        project_to_unit_norm(critic.to(self.device))
        self._init_learner(actor, critic, actor_dim, critic_dim)
        if cfg.target_entropy is None:
            # Differential entropy of N(0, std^2) per dimension: 0.5 * log(2 pi e std^2).
            per_dim = 0.5 * math.log(2.0 * math.pi * math.e * cfg.target_action_std**2)
            self.target_entropy = per_dim * num_actions
        else:
            self.target_entropy = cfg.target_entropy
        if BF16_WEIGHT_COPIES and self.autocast_enabled:
            self._keep_bf16_weight_copies()
        self.zeta_cdf = zeta_hold_cdf(cfg.noise_hold_zeta_exponent, cfg.noise_hold_max_steps).to(self.device)
        self.held_noise: torch.Tensor | None = None
        self.hold_steps_left: torch.Tensor | None = None
        self._declare_losses(  # recorded by every update first, then by actor updates only
            "critic_loss",
            "q_mean",
            "target_q_mean",
            "alpha",
            "reward_scale",
            "actor_loss",
            "alpha_loss",
            "entropy",
        )

    # ----------------------------------------------------------------------------------------------
    # acting
    # ----------------------------------------------------------------------------------------------
    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False) -> torch.Tensor:
        """Actions (N, A) in [-1, 1]: tanh(mean), or the mean plus each env's held noise.

        Every stochastic call draws a fresh noise vector and hold length per env from `self.rng`
        (fixed consumption, so replays stay in step) and keeps them only where the hold expired.
        """
        x = obs[self.cfg.actor_obs_group]
        if deterministic:
            return torch.tanh(self._acting_mean(x)[0])
        n = x.shape[0]
        held_noise, hold_steps_left = self._noise_state(n)
        fresh_noise = torch.randn((n, self.num_actions), device=self.device, generator=self.rng)
        fresh_uniform = torch.rand(n, device=self.device, generator=self.rng)
        return self._sample_action(x, fresh_noise, fresh_uniform, held_noise, hold_steps_left)

    def _acting_mean(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The acting policy's mean and log-std (float32) for the actor's observation group ``x`` (N, Dp)."""
        normalized = self.acting_obs_normalizer(x.float())
        with self._autocast():
            mean, log_std = self.acting_actor(normalized, training=False)
        return mean.float(), log_std.float()

    def _stochastic_action(
        self,
        x: torch.Tensor,
        fresh_noise: torch.Tensor,
        fresh_uniform: torch.Tensor,
        held_noise: torch.Tensor,
        hold_steps_left: torch.Tensor,
    ) -> torch.Tensor:
        """tanh(mean + std * held noise); rows whose hold expired take ``fresh_noise`` (N, A) and a hold
        length drawn from ``fresh_uniform`` (N,) in [0, 1). Updates ``held_noise`` and ``hold_steps_left``."""
        mean, log_std = self._acting_mean(x)
        expired = hold_steps_left <= 0
        held_noise.copy_(torch.where(expired.unsqueeze(-1), fresh_noise, held_noise))
        fresh_hold = sample_hold_steps(fresh_uniform, self.zeta_cdf)
        hold_steps_left.copy_(torch.where(expired, fresh_hold, hold_steps_left) - 1)
        return torch.tanh(mean + log_std.exp() * held_noise)

    def end_episodes(self, done: torch.Tensor) -> None:
        """A new episode starts with fresh exploration noise: expire the hold of rows in ``done`` (num_envs,)."""
        if self.hold_steps_left is not None:  # created by the first stochastic act()
            self.hold_steps_left.masked_fill_(done, 0)

    def _noise_state(self, num_envs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The persistent per-env noise buffers, created (expired) on first use or when N changes."""
        if self.held_noise is None or self.hold_steps_left is None or self.held_noise.shape[0] != num_envs:
            capturing = self.device.type == "cuda" and torch.cuda.is_current_stream_capturing()
            if capturing:  # a host-side query of the capture state, not a tensor value
                raise RuntimeError(
                    "FlashSAC's held-noise buffers are created by the first stochastic act(); "
                    "call act() once eagerly before capturing it"
                )
            self.held_noise = torch.zeros(num_envs, self.num_actions, device=self.device)
            self.hold_steps_left = torch.zeros(num_envs, device=self.device, dtype=torch.long)
        return self.held_noise, self.hold_steps_left

    # ----------------------------------------------------------------------------------------------
    # learning
    # ----------------------------------------------------------------------------------------------
    def _reward_scale(
        self, return_var: torch.Tensor | None, return_abs_max: torch.Tensor | None
    ) -> torch.Tensor:
        """The reward divisor as a device scalar, from the replay's return statistics (`Batch.return_var`,
        `Batch.return_abs_max`): std of the discounted return, or at least max |return| / G_max in
        ``max_return`` mode; 1 when disabled."""
        if not self.cfg.reward_scaling or return_var is None or return_abs_max is None:
            return torch.ones((), device=self.device)
        std = torch.sqrt(return_var + 1e-8)
        if self.cfg.reward_scale_mode == "return_std":
            return std
        return torch.maximum(std, return_abs_max / self.cfg.normalized_return_max)

    @cold_path
    def learning_warnings(self, return_statistics: dict[str, float]) -> dict[str, str]:
        """``reward_scale``: the max |return| term sets the divisor, several times the returns' std.

        Then one outlier return (a fall full of penalties) shrinks every other return to a few atoms of the
        support for the rest of the run. On motion tracking the critic then learned little; the walking preset
        learns in that state (adr/0017), so the warning says what to try if training stalls.
        """
        cfg = self.cfg
        if not cfg.reward_scaling or cfg.reward_scale_mode != "max_return":
            return {}
        std = math.sqrt(return_statistics["return_var"] + 1e-8)  # as `_reward_scale`
        outlier_term = return_statistics["return_abs_max"] / cfg.normalized_return_max
        if outlier_term <= REWARD_SCALE_WARNING_RATIO * std:
            return {}
        return {
            "reward_scale": (
                f"FlashSAC's reward scale {outlier_term:.3g} is set by the largest return seen "
                f"({return_statistics['return_abs_max']:.3g} / normalized_return_max), {outlier_term / std:.0f}x "
                f"the returns' std {std:.3g}: most returns now span a few atoms of the critic's support. On motion "
                "tracking that left the critic flat (adr/0017); if the returns stop rising, set "
                "algo.params.reward_scaling=false with algo.params.v_min/v_max sized to the returns (as the "
                "tracking preset does), or algo.params.reward_scale_mode=return_std"
            )
        }

    def _actor_loss(
        self,
        actor_obs: torch.Tensor,
        next_actor_obs: torch.Tensor,
        critic_obs: torch.Tensor,
        noise: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """alpha * log pi - pessimistic Q and log pi (B,); call with the critic frozen."""
        batch_size = actor_obs.shape[0]
        alpha = self.log_alpha.exp().detach()
        # Current and next observations share one BatchNorm batch; only the current half enters the
        # loss. The critic scores actions with its running statistics (eval mode).
        with self._autocast():
            mean, log_std = self.actor(
                torch.cat([actor_obs, next_actor_obs]), training=True, rows=slice(None, batch_size)
            )
            action, log_prob = tanh_gaussian_sample(mean.float(), log_std.float(), noise)
            q_logits = self.critic(critic_obs, action, training=False)
        q_value = expected_value(F.softmax(q_logits.float(), dim=-1), self.support).min(0).values
        return (alpha * log_prob - q_value).mean(), log_prob

    def _critic_target(
        self,
        next_actor_obs: torch.Tensor,
        critic_obs: torch.Tensor,
        next_critic_obs: torch.Tensor,
        transition: tuple[torch.Tensor, ...],
        noise: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """The critic's inputs and its target, from the pessimistic target member; no gradients.

        ``transition`` holds the batch's action, reward, discount, bootstrap, return variance and largest
        |return| (`Batch` fields; the last two may be None). Returns the observations and next observations in
        one batch (2B, Dc), the batch's actions followed by the next actions (2B, A), the projected target
        (B, K), and the statistics the update records (``reward_scale``, ``alpha``, ``target_q_mean``).
        """
        batch_size = next_actor_obs.shape[0]
        action, reward, discount, bootstrap, return_var, return_abs_max = transition
        reward_scale = self._reward_scale(return_var, return_abs_max)
        reward = reward / reward_scale
        continuation = discount * bootstrap
        alpha = self.log_alpha.exp().detach()
        both_obs = torch.cat([critic_obs, next_critic_obs])
        with torch.no_grad(), self._autocast():
            next_mean, next_log_std = self.actor(next_actor_obs, training=False)
            next_action, next_log_prob = tanh_gaussian_sample(next_mean.float(), next_log_std.float(), noise)
            both_actions = torch.cat([action, next_action])
            target_logits = self.critic_target(
                both_obs, both_actions, training=True, rows=slice(batch_size, None)
            )
            target_probs = F.softmax(target_logits.float(), dim=-1)
            first_is_lower = expected_value(target_probs, self.support).argmin(0) == 0
            chosen = torch.where(first_is_lower.unsqueeze(-1), target_probs[0], target_probs[1])
            target_atoms = reward.unsqueeze(-1) + continuation.unsqueeze(-1) * (
                self.support - alpha * next_log_prob.unsqueeze(-1)
            )
            target = categorical_projection(chosen, target_atoms, self.cfg.v_min, self.cfg.v_max)
        statistics = {
            "reward_scale": reward_scale,
            "alpha": alpha,
            "target_q_mean": expected_value(target, self.support).mean(),
        }
        return both_obs, both_actions, target, statistics

    def _critic_loss(
        self, both_obs: torch.Tensor, both_actions: torch.Tensor, target: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Cross-entropy of both members to the target on the current half of the batch, and the mean Q."""
        batch_size = target.shape[0]
        with self._autocast():
            logits = self.critic(both_obs, both_actions, training=True, rows=slice(None, batch_size))
        log_probs = F.log_softmax(logits.float(), dim=-1)
        loss = -(target.unsqueeze(0) * log_probs).sum(-1).mean()
        return loss, expected_value(log_probs.detach().exp(), self.support).mean()

    def _critic_optimizer_step(self) -> None:
        """The critic's AdamW step alone (the target's EMA follows the projection), a compiled part of its
        own: compiled together with the projections the step failed in inductor on CUDA (torch 2.11), apart
        from them it compiles (docs/perf/tuning/0025)."""
        adamw_step(self.critic_optimizer)

    def _project_actor(self) -> None:
        """Re-project the actor's norm-bounded layers (a compilable part)."""
        project_to_unit_norm(self.actor)

    def _project_critic(self) -> None:
        """Re-project the critic's norm-bounded layers, then move the target critic toward it (a compilable
        part: inductor fuses the EMA into the projection's kernels)."""
        project_to_unit_norm(self.critic)
        with torch.no_grad():
            torch._foreach_lerp_(self._target_params, self._critic_params, self.cfg.tau)
        refresh_bf16_weight_copies(self.critic_target)

    def _temperature_step(self, log_prob: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The temperature's AdamW step from the actor's log-probabilities ``log_prob`` (B,) (a compilable part).

        The loss alpha * (entropy - target) shrinks alpha while the entropy exceeds the target. Its gradient in
        log alpha is the loss itself, so the step takes it without a backward. Returns the loss and the entropy.
        """
        with torch.no_grad():
            entropy = -log_prob.mean()
            alpha_loss = self.log_alpha.exp() * (entropy - self.target_entropy)
            adamw_step(self.alpha_optimizer, [alpha_loss])
        return alpha_loss, entropy

    def _update_step(self, batch: Batch, update_actor: bool) -> None:
        """Actor and temperature (when due), then critic, then target update; losses land in `losses()`.

        Besides the random draws, the optimizer's gradient bookkeeping and the backward calls, every step
        runs inside a compilable part: between the compiled parts only the draws launch kernels.
        """
        batch_size = batch.batch_size
        actor_obs, next_actor_obs, critic_obs, next_critic_obs = self._normalized_groups(batch)
        self._part("_advance_lr_schedule")()
        losses: dict[str, torch.Tensor] = {}

        if update_actor:
            with frozen(self.critic):
                actor_loss, log_prob = self._part("_actor_loss")(
                    actor_obs, next_actor_obs, critic_obs, self._policy_noise(batch_size)
                )
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            self._part("_actor_step")()
            self._part("_project_actor")()
            alpha_loss, entropy = self._part("_temperature_step")(log_prob.detach())
            losses |= {"actor_loss": actor_loss, "alpha_loss": alpha_loss, "entropy": entropy}

        # Critic: target from the pessimistic target member, observations and next observations in
        # one BatchNorm batch for both the target and the online critic.
        both_obs, both_actions, target, statistics = self._part("_critic_target")(
            next_actor_obs,
            critic_obs,
            next_critic_obs,
            (
                batch.action,
                batch.reward,
                batch.discount,
                batch.bootstrap,
                batch.return_var,
                batch.return_abs_max,
            ),
            self._policy_noise(batch_size),
        )
        critic_loss, q_mean = self._part("_critic_loss")(both_obs, both_actions, target)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        self._part("_critic_optimizer_step")()
        self._part("_project_critic")()  # and the target's EMA
        losses |= {"critic_loss": critic_loss, "q_mean": q_mean, **statistics}
        self._part("_record_losses")(losses)

    # ----------------------------------------------------------------------------------------------
    # bf16 weight copies (BF16_WEIGHT_COPIES)
    # ----------------------------------------------------------------------------------------------
    @cold_path
    def _keep_bf16_weight_copies(self) -> None:
        """Give the actor, the critic, the target critic and the acting actor bf16 copies of their unit-norm
        weights; `publish_policy` copies the actor's into the acting actor from then on."""
        for net in (self.actor, self.critic, self.critic_target, self.acting_actor):
            keep_bf16_weight_copies(net)
        self._pair_acting_tensors()

    @property
    def keeps_bf16_weight_copies(self) -> bool:
        """Whether the networks hold bf16 copies of their unit-norm weights."""
        return any(layer.weight_bf16 is not None for layer in _unit_linear_layers(self.critic))

    def _weights_loaded(self) -> None:
        """Rewrite the bf16 weight copies from the loaded weights (the acting copy follows when published)."""
        for net in (self.actor, self.critic, self.critic_target):
            refresh_bf16_weight_copies(net)

    # ----------------------------------------------------------------------------------------------
    # checkpoint and export
    # ----------------------------------------------------------------------------------------------
    @cold_path
    def actor_for_export(self) -> nn.Module:
        """The base export, without bf16 weight copies (it runs in float32)."""
        policy = super().actor_for_export()
        drop_bf16_weight_copies(policy)
        return policy

    @cold_path
    def state_dict(self) -> dict[str, Any]:
        """The base snapshot plus the held exploration noise and its per-env hold counters."""
        state = super().state_dict()
        state |= clone_state({"held_noise": self.held_noise, "hold_steps_left": self.hold_steps_left})
        return state

    @cold_path
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` output in place, held noise included."""
        super().load_state_dict(state)
        if state.get("held_noise") is not None:
            held_noise, hold_steps_left = self._noise_state(state["held_noise"].shape[0])
            held_noise.copy_(state["held_noise"])
            hold_steps_left.copy_(state["hold_steps_left"])
