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

import dataclasses
import math
from typing import Any, ClassVar

import torch
from torch import nn

from trainrt.algos import flashsac_math, update_math
from trainrt.algos.agent import Agent, clone_state, frozen
from trainrt.algos.execution import Part, UpdateParts, check_part_names
from trainrt.algos.flashsac_config import FlashSacConfig
from trainrt.algos.flashsac_networks import (
    FlashSacActor,
    FlashSacCritic,
    _unit_linear_layers,
    drop_bf16_weight_copies,
    keep_bf16_weight_copies,
    project_to_unit_norm,
    refresh_bf16_weight_copies,
)
from trainrt.algos.networks import set_gemm_alignment
from trainrt.hotpath import cold_path
from trainrt.replay import Batch

REWARD_SCALE_WARNING_RATIO = 4.0
"""`FlashSacAgent.learning_warnings` reports a reward scale whose max |return| term exceeds this many return
stds (the tracking runs of adr/0017 sat at about 15)."""


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
@dataclasses.dataclass
class FlashSacParts(UpdateParts):
    """FlashSAC's update parts, in the order of its compiled parts' names (`FlashSacAgent._update_step` calls
    the actor's first when due)."""

    advance_lr_schedule: Part
    normalize: Part
    actor_loss: Part  # flashsac_math.actor_loss
    critic_target: Part  # flashsac_math.critic_target
    critic_loss: Part  # flashsac_math.critic_loss
    critic_optimizer_step: (
        Part  # update_math.optimizer_step: the critic's AdamW alone (docs/perf/tuning/0025)
    )
    actor_step: Part  # update_math.optimizer_step
    temperature_step: Part  # flashsac_math.temperature_step
    project_actor: Part  # flashsac_networks.project_to_unit_norm
    project_critic: Part  # flashsac_math.project_critic: the projection, then the target's EMA
    record_losses: Part

    optimizer_steps: ClassVar[tuple[str, ...]] = (
        "_critic_optimizer_step",
        "_actor_step",
        "_temperature_step",
    )


class FlashSacAgent(Agent):
    """FlashSAC agent. Construct through `trainrt.algos.make_agent("flashsac", ...)`.

    Attributes:
        held_noise: (N, A) exploration noise each env currently holds (allocated by the first
            stochastic `act`; None before).
        hold_steps_left: (N,) long, steps the held noise still applies; 0 means draw a new one.
    """

    algo = "flashsac"
    # BatchNorm on running statistics for acting and export.
    actor_eval_kwargs: ClassVar[dict[str, Any]] = {"training": False}

    def __init__(
        self,
        cfg: FlashSacConfig,
        obs_dims: dict[str, int],
        num_actions: int,
        device: torch.device | str,
        seed: int = 0,
        learns: bool = True,
    ):
        check_part_names(FlashSacParts, cfg)
        super().__init__(cfg, num_actions, device, seed, learns)
        actor_dim, critic_dim = self._obs_group_dims(obs_dims)
        with self._seeded_init():
            actor = FlashSacActor(actor_dim, num_actions, cfg)
            critic = FlashSacCritic(critic_dim, num_actions, cfg)
        # Start on the norm bounds every optimizer step re-projects to (on the device, before the
        # target copy is taken).
        for net in (actor, critic):
            set_gemm_alignment(net, cfg.gemm_alignment)
            project_to_unit_norm(net.to(self.device))
        self._init_learner(actor, critic, actor_dim, critic_dim)
        if cfg.target_entropy is None:
            # Differential entropy of N(0, std^2) per dimension: 0.5 * log(2 pi e std^2).
            per_dim = 0.5 * math.log(2.0 * math.pi * math.e * cfg.target_action_std**2)
            self.target_entropy = per_dim * num_actions
        else:
            self.target_entropy = cfg.target_entropy
        if cfg.bf16_weight_copies and self.autocast_enabled:
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
        if learns:
            self.parts = self._flashsac_parts()

    def _flashsac_parts(self) -> FlashSacParts:
        """The update's math bound to this agent's modules and optimizers (each part its own lambda, as
        `SacAgent._sac_parts` says why)."""
        cfg, actor, critic, target_critic = self.cfg, self.actor, self.critic, self.critic_target
        support, log_alpha, autocast, target_entropy = (
            self.support,
            self.log_alpha,
            self._autocast,
            self.target_entropy,
        )
        critic_optimizer, actor_optimizer, alpha_optimizer = (
            self.critic_optimizer,
            self.actor_optimizer,
            self.alpha_optimizer,
        )
        target_params, critic_params = self._target_params, self._critic_params
        return FlashSacParts(
            **self._shared_parts(),
            actor_loss=Part(
                lambda *batch: flashsac_math.actor_loss(actor, critic, support, log_alpha, autocast, *batch)
            ),
            critic_target=Part(
                lambda *batch: flashsac_math.critic_target(
                    actor, target_critic, support, log_alpha, cfg, autocast, *batch
                )
            ),
            critic_loss=Part(lambda *batch: flashsac_math.critic_loss(critic, support, autocast, *batch)),
            critic_optimizer_step=Part(lambda: update_math.optimizer_step(critic_optimizer)),
            actor_step=Part(lambda: update_math.optimizer_step(actor_optimizer)),
            temperature_step=Part(
                lambda log_prob: flashsac_math.temperature_step(
                    alpha_optimizer, log_alpha, target_entropy, log_prob
                )
            ),
            project_actor=Part(lambda: project_to_unit_norm(actor)),
            project_critic=Part(
                lambda: flashsac_math.project_critic(
                    critic, target_critic, target_params, critic_params, cfg.tau
                )
            ),
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
        std = math.sqrt(return_statistics["return_var"] + 1e-8)  # as `flashsac_math.reward_scale`
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

    def _update_step(self, batch: Batch, update_actor: bool) -> None:
        """Actor and temperature (when due), then critic, then target update; losses land in `losses()`.

        Besides the random draws, the optimizer's gradient bookkeeping and the backward calls, every step
        runs inside a compilable part: between the compiled parts only the draws launch kernels.
        """
        parts = self.parts
        batch_size = batch.batch_size
        actor_obs, next_actor_obs, critic_obs, next_critic_obs = self._normalized_groups(batch)
        parts.advance_lr_schedule()
        losses: dict[str, torch.Tensor] = {}

        if update_actor:
            with frozen(self.critic):
                actor_loss, log_prob = parts.actor_loss(
                    actor_obs, next_actor_obs, critic_obs, self._policy_noise(batch_size)
                )
            self.actor_optimizer.zero_grad()
            actor_loss.backward()
            parts.actor_step()
            parts.project_actor()
            alpha_loss, entropy = parts.temperature_step(log_prob.detach())
            losses |= {"actor_loss": actor_loss, "alpha_loss": alpha_loss, "entropy": entropy}

        # Critic: target from the pessimistic target member, observations and next observations in
        # one BatchNorm batch for both the target and the online critic.
        both_obs, both_actions, target, statistics = parts.critic_target(
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
        critic_loss, q_mean = parts.critic_loss(both_obs, both_actions, target)
        self.critic_optimizer.zero_grad()
        critic_loss.backward()
        parts.critic_optimizer_step()
        parts.project_critic()  # and the target's EMA
        losses |= {"critic_loss": critic_loss, "q_mean": q_mean, **statistics}
        parts.record_losses(losses)

    # ----------------------------------------------------------------------------------------------
    # bf16 weight copies (`FlashSacConfig.bf16_weight_copies`)
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
