"""SAC, FastSAC-style: twin C51 critics, tanh-Gaussian actor, auto-tuned temperature, bf16, graph-capturable.

The recipe follows FastSAC (the SAC variant of FastTD3, Seo et al., 2025, github.com/younggyoseo/FastTD3)
as tuned for humanoids with thousands of parallel envs: wide LayerNorm+SiLU MLPs, a distributional
critic pair whose members each learn from their own target network's projected distribution, an actor
that maximizes the members' mean value, a small initial temperature tuned toward a target entropy,
AdamW with a short beta2, and observation normalization with running statistics on the device.
The actor may read a different observation group than the critics (asymmetric actor-critic).

Update, top to bottom (`SacAgent._update_step`): normalize observations -> critic step on the
C51 cross-entropy, its optimizer step and the soft target update (one compiled part) -> actor step
(every `actor_update_period` updates) -> temperature step. No step reads a tensor value on the host, so
the whole update captures as one graph.
"""

import dataclasses
from typing import ClassVar, Literal

import torch
from pydantic import Field
from torch import nn

from trainrt.algos import fused_norm, sac_math, update_math
from trainrt.algos.agent import Agent, CheckedLearnerConfig, frozen
from trainrt.algos.distributional import expected_value
from trainrt.algos.execution import Part, UpdateParts, check_part_names
from trainrt.algos.networks import (
    FUSED_NORM_KERNEL,
    GEMM_ALIGNMENT,
    StackedLayerNormMlp,
    bounded_log_std,
    set_gemm_alignment,
)
from trainrt.replay import Batch


class SacConfig(CheckedLearnerConfig):
    """SAC hyperparameters; defaults target a 29-DoF humanoid with 2048 parallel envs.

    These defaults are the one home of the SAC learner's settings: they are what the canonical presets run
    (an iteration of 8 vector env steps at 2048 envs, ``trainrt.config.presets``), and a task preset names
    only what differs from them (``trainrt/tasks/<task>/presets.py``). A field's meaning is its description
    (``trainrt.algos.agent.LEARNER_FIELD_DESCRIPTIONS`` for the fields both learners share).
    """

    # Networks. FastSAC's humanoid sizes: the actor is 512 -> 256 -> 128, each critic 768 -> 384 -> 192.
    actor_hidden_dim: int = Field(512, ge=4, description="width of the actor's first hidden layer")
    critic_hidden_dim: int = Field(768, ge=4, description="width of each critic's first hidden layer")
    # C51 support. The presets size [v_min, v_max] to the task's dt-scaled returns
    # (trainrt.config.presets.return_support); a support far wider leaves few atoms where values live.
    num_atoms: int = Field(101, ge=2)
    v_min: float = -20.0
    v_max: float = 20.0
    # exp(0) = 1 caps the pre-tanh std: wider noise only saturates tanh on a position-controlled robot.
    log_std_min: float = -5.0
    log_std_max: float = 0.0

    # Temporal difference. gamma 0.97 (FastSAC's G1 setting) is a ~33-step horizon, ~0.7 s at 50 Hz.
    gamma: float = Field(0.97, gt=0.0, le=1.0)
    n_step: int = Field(1, ge=1)
    # Fast target tracking works with large batches and twin distributional critics (FastTD3/FastSAC);
    # 0.125 is holosoma FastSAC's G1 setting.
    tau: float = Field(0.125, gt=0.0, le=1.0)

    # Optimization: AdamW with beta2 0.95 and light weight decay, as FastSAC.
    actor_lr: float = Field(3e-4, gt=0.0)
    critic_lr: float = Field(3e-4, gt=0.0)
    alpha_lr: float = Field(3e-4, gt=0.0)
    # Actor and critic learning-rate schedule ("constant", or linear warm-up then cosine decay to
    # lr_final_ratio over lr_decay_updates; None: the run's total updates).
    lr_schedule: Literal["constant", "warmup_cosine"] = "constant"
    lr_warmup_updates: int = Field(0, ge=0)
    lr_final_ratio: float = Field(1.0, gt=0.0, le=1.0)
    lr_decay_updates: int | None = Field(None, ge=1)
    weight_decay: float = Field(1e-3, ge=0.0)
    adam_betas: tuple[float, float] = (0.9, 0.95)
    # holosoma FastSAC's G1 schedule: 8 updates of 8192 transitions per vector env step, so 64 per
    # iteration of the presets' 8 vector steps (all of them replay as one learner graph), with the actor
    # and temperature step every 4th update (the period divides the updates, so one graph holds them all).
    batch_size: int = Field(8192, ge=1)
    updates_per_iteration: int = Field(64, ge=1)
    actor_update_period: int = Field(4, ge=1)

    # Replay. 1024 rows per env (2M transitions at 2048 envs, ~4 GB with both obs groups).
    buffer_size_per_env: int = Field(1024, ge=1)
    # Vector env steps collected before the first update (FastSAC starts almost at once).
    learning_starts: int = Field(10, ge=1)

    # Temperature. A small start keeps the entropy bonus below dt-scaled per-step rewards (~1e-2);
    # target entropy 0 (FastSAC) rather than -|A| keeps roughly 0.24 pre-tanh std per joint.
    alpha_init: float = Field(1e-3, gt=0.0)
    autotune_alpha: bool = Field(
        True, description="learn the temperature toward the target entropy (false: fixed alpha_init)"
    )
    target_entropy_per_action: float = Field(0.0, description="target entropy per action dimension")

    # Numerics and inputs.
    bf16_autocast: bool = True
    obs_normalization: bool = True
    actor_obs_group: str = "policy"
    critic_obs_group: str = "critic"

    # Execution: kernel and compiler variants (the update's math is the same under each; docs/performance.md).
    gemm_alignment: int = Field(GEMM_ALIGNMENT, ge=1)
    fused_norm_kernel: bool = Field(
        FUSED_NORM_KERNEL,
        description="hidden layers end in the fused LayerNorm + SiLU Triton kernel on CUDA (docs/perf/tuning/0023)",
    )
    norm_backward_programs: int = Field(
        fused_norm._TARGET_PROGRAMS,
        ge=1,
        description="about how many programs the fused kernel's backward spreads the rows over (docs/perf/tuning/0023)",
    )
    uncompiled_parts: tuple[str, ...] = ()
    horizontal_fusion_parts: tuple[str, ...] = ()
    inductor_options: dict[str, bool | int | float | str] = Field(default_factory=dict)


# --------------------------------------------------------------------------------------------------
# networks
# --------------------------------------------------------------------------------------------------
def _funnel(width: int) -> list[int]:
    """FastSAC's hidden widths: width, width/2, width/4."""
    return [width, width // 2, width // 4]


class SacActor(nn.Module):
    """Tanh-Gaussian policy head: normalized policy observations (B, Dp) -> pre-tanh mean, log-std (B, A)."""

    def __init__(
        self, obs_dim: int, num_actions: int, hidden_dim: int, log_std_min: float, log_std_max: float
    ):
        super().__init__()
        self.log_std_min = log_std_min
        self.log_std_max = log_std_max
        self.net = StackedLayerNormMlp(1, obs_dim, _funnel(hidden_dim), 2 * num_actions)
        # Zero output layer: the first policy is centred on the default pose with mid-range noise.
        nn.init.zeros_(self.net.output.weight)
        nn.init.zeros_(self.net.output.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Pre-squash mean (B, A) and bounded log-std (B, A)."""
        mean, raw_log_std = self.net(obs).squeeze(0).chunk(2, dim=-1)
        return mean, bounded_log_std(raw_log_std, self.log_std_min, self.log_std_max)


class SacCritic(nn.Module):
    """Twin distributional critics: (critic obs (B, Dc), action (B, A)) -> logits (2, B, num_atoms).

    The two members are independent networks stored stacked, so each layer of both runs as one batched
    GEMM.
    """

    def __init__(self, obs_dim: int, num_actions: int, hidden_dim: int, num_atoms: int):
        super().__init__()
        self.net = StackedLayerNormMlp(2, obs_dim + num_actions, _funnel(hidden_dim), num_atoms)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """Return-distribution logits of both members (2, B, num_atoms)."""
        return self.net(torch.cat([obs, action.to(obs.dtype)], dim=-1))


# --------------------------------------------------------------------------------------------------
# agent
# --------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class SacParts(UpdateParts):
    """SAC's update parts (`SacAgent._update_step` calls them in this order)."""

    advance_lr_schedule: Part
    normalize: Part
    critic_target: Part  # sac_math.critic_target
    critic_loss: Part  # sac_math.critic_loss
    actor_loss: Part  # sac_math.actor_loss
    critic_step: Part  # update_math.step_and_track: AdamW, then the target's EMA
    actor_step: Part  # update_math.optimizer_step
    record_losses: Part

    optimizer_steps: ClassVar[tuple[str, ...]] = ("_critic_step", "_actor_step")


class SacAgent(Agent):
    """FastSAC-style agent. Construct through `trainrt.algos.make_agent("sac", ...)`."""

    algo = "sac"

    def __init__(
        self,
        cfg: SacConfig,
        obs_dims: dict[str, int],
        num_actions: int,
        device: torch.device | str,
        seed: int = 0,
        learns: bool = True,
    ):
        check_part_names(SacParts, cfg)
        super().__init__(cfg, num_actions, device, seed, learns)
        actor_dim, critic_dim = self._obs_group_dims(obs_dims)
        with self._seeded_init():
            actor = SacActor(actor_dim, num_actions, cfg.actor_hidden_dim, cfg.log_std_min, cfg.log_std_max)
            critic = SacCritic(critic_dim, num_actions, cfg.critic_hidden_dim, cfg.num_atoms)
        for net in (actor, critic):
            set_gemm_alignment(net, cfg.gemm_alignment)
            net.net.fused_norm_kernel = cfg.fused_norm_kernel
            net.net.norm_backward_programs = cfg.norm_backward_programs
        self._init_learner(actor, critic, actor_dim, critic_dim)
        self.target_entropy = cfg.target_entropy_per_action * num_actions
        self._declare_losses(  # recorded by every update first, then by actor updates only
            "critic_loss", "q_mean", "target_q_mean", "alpha", "actor_loss", "alpha_loss", "entropy"
        )
        if learns:
            self.parts = self._sac_parts()

    def _sac_parts(self) -> SacParts:
        """The update's math bound to this agent's modules and optimizers.

        Each part is its own lambda, so torch.compile keeps one cache per part (a ``functools.partial`` would
        share one code object, and its recompile limit, among all of them)."""
        cfg, actor, critic, target_critic = self.cfg, self.actor, self.critic, self.critic_target
        support, autocast = self.support, self._autocast
        critic_optimizer, actor_optimizer = self.critic_optimizer, self.actor_optimizer
        target_params, critic_params = self._target_params, self._critic_params
        return SacParts(
            **self._shared_parts(),
            critic_target=Part(
                lambda *batch: sac_math.critic_target(
                    actor, target_critic, support, cfg.v_min, cfg.v_max, autocast, *batch
                )
            ),
            critic_loss=Part(lambda *batch: sac_math.critic_loss(critic, support, autocast, *batch)),
            actor_loss=Part(lambda *batch: sac_math.actor_loss(actor, critic, support, autocast, *batch)),
            critic_step=Part(
                lambda: update_math.step_and_track(critic_optimizer, target_params, critic_params, cfg.tau)
            ),
            actor_step=Part(lambda: update_math.optimizer_step(actor_optimizer)),
        )

    # ----------------------------------------------------------------------------------------------
    # acting
    # ----------------------------------------------------------------------------------------------
    @torch.no_grad()
    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False) -> torch.Tensor:
        """Actions (N, A) in [-1, 1]: tanh(mean) or a tanh-Gaussian sample drawn with `self.rng`."""
        x = obs[self.cfg.actor_obs_group]
        if deterministic:
            return torch.tanh(self._acting_mean(x)[0])
        noise = torch.randn((x.shape[0], self.num_actions), device=self.device, generator=self.rng)
        return self._sample_action(x, noise)

    def _acting_mean(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The acting policy's mean and log-std (float32) for the actor's observation group ``x`` (N, Dp)."""
        normalized = self.acting_obs_normalizer(x.float())
        with self._autocast():
            mean, log_std = self.acting_actor(normalized)
        return mean.float(), log_std.float()

    def _stochastic_action(self, x: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        """tanh(mean + std * noise) for observations ``x`` (N, Dp) and standard normal ``noise`` (N, A)."""
        mean, log_std = self._acting_mean(x)
        return torch.tanh(mean + log_std.exp() * noise)

    # ----------------------------------------------------------------------------------------------
    # learning
    # ----------------------------------------------------------------------------------------------
    def _update_step(self, batch: Batch, update_actor: bool) -> None:
        """Critic, actor (when due), temperature, then target update; losses land in `losses()`."""
        cfg, parts = self.cfg, self.parts
        actor_obs, next_actor_obs, critic_obs, next_critic_obs = self._normalized_groups(batch)
        alpha = self.log_alpha.exp().detach()
        batch_size = batch.batch_size
        parts.advance_lr_schedule()

        # Critic: cross-entropy to the projected soft Bellman target, one target per member.
        target = parts.critic_target(
            next_actor_obs,
            next_critic_obs,
            batch.reward,
            batch.discount * batch.bootstrap,
            alpha,
            self._policy_noise(batch_size),
        )
        critic_loss, q_mean = parts.critic_loss(critic_obs, batch.action, target)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        # The critic's step and the target's EMA toward it. The actor's step below reads the online critic
        # only, so updating the target here, before it, is the same as after it.
        parts.critic_step()
        losses = {
            "critic_loss": critic_loss,
            "q_mean": q_mean,
            "target_q_mean": expected_value(target, self.support).mean(),
        }

        if update_actor:
            # Actor: maximize the twin critics' mean value plus entropy.
            with frozen(self.critic):  # the critic's weight gradients are not needed
                actor_loss, log_prob = parts.actor_loss(
                    actor_obs, critic_obs, alpha, self._policy_noise(batch_size)
                )
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            parts.actor_step()
            # Temperature: raise alpha when entropy falls below the target, lower it above.
            log_prob = log_prob.detach()
            alpha_loss = -(self.log_alpha.exp() * (log_prob + self.target_entropy)).mean()
            if cfg.autotune_alpha:
                self.alpha_optimizer.zero_grad()
                alpha_loss.backward()
                self.alpha_optimizer.step()
            losses |= {"actor_loss": actor_loss, "alpha_loss": alpha_loss, "entropy": -log_prob.mean()}

        losses["alpha"] = self.log_alpha.exp()
        parts.record_losses(losses)
