"""FlashSAC's update math (`trainrt.algos.flashsac`), as plain functions of the modules and tensors they read.

``autocast`` is the agent's context factory (bf16 on CUDA when configured, a no-op otherwise); ``support`` the
C51 atoms (K,); ``log_alpha`` the temperature's log, a device scalar. The agent binds the modules once and passes
each update's tensors.
"""

from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F
from torch import nn

from trainrt.algos.adamw_step import adamw_step
from trainrt.algos.distributional import categorical_projection, expected_value
from trainrt.algos.flashsac_networks import project_to_unit_norm, refresh_bf16_weight_copies
from trainrt.algos.networks import tanh_gaussian_sample
from trainrt.algos.sac_math import Autocast

if TYPE_CHECKING:
    from trainrt.algos.flashsac_config import FlashSacConfig


def reward_scale(
    cfg: "FlashSacConfig",
    device: torch.device,
    return_var: torch.Tensor | None,
    return_abs_max: torch.Tensor | None,
) -> torch.Tensor:
    """The reward divisor as a device scalar, from the replay's return statistics (`Batch.return_var`,
    `Batch.return_abs_max`): std of the discounted return, or at least max |return| / G_max in
    ``max_return`` mode; 1 when disabled."""
    if not cfg.reward_scaling or return_var is None or return_abs_max is None:
        return torch.ones((), device=device)
    std = torch.sqrt(return_var + 1e-8)
    if cfg.reward_scale_mode == "return_std":
        return std
    return torch.maximum(std, return_abs_max / cfg.normalized_return_max)


def actor_loss(
    actor: nn.Module,
    critic: nn.Module,
    support: torch.Tensor,
    log_alpha: torch.Tensor,
    autocast: Autocast,
    actor_obs: torch.Tensor,
    next_actor_obs: torch.Tensor,
    critic_obs: torch.Tensor,
    noise: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """alpha * log pi - pessimistic Q and log pi (B,); call with the critic frozen."""
    batch_size = actor_obs.shape[0]
    alpha = log_alpha.exp().detach()
    # Current and next observations share one BatchNorm batch; only the current half enters the
    # loss. The critic scores actions with its running statistics (eval mode).
    with autocast():
        mean, log_std = actor(
            torch.cat([actor_obs, next_actor_obs]), training=True, rows=slice(None, batch_size)
        )
        action, log_prob = tanh_gaussian_sample(mean.float(), log_std.float(), noise)
        q_logits = critic(critic_obs, action, training=False)
    q_value = expected_value(F.softmax(q_logits.float(), dim=-1), support).min(0).values
    return (alpha * log_prob - q_value).mean(), log_prob


def critic_target(
    actor: nn.Module,
    target_critic: nn.Module,
    support: torch.Tensor,
    log_alpha: torch.Tensor,
    cfg: "FlashSacConfig",
    autocast: Autocast,
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
    scale = reward_scale(cfg, support.device, return_var, return_abs_max)
    reward = reward / scale
    continuation = discount * bootstrap
    alpha = log_alpha.exp().detach()
    both_obs = torch.cat([critic_obs, next_critic_obs])
    with torch.no_grad(), autocast():
        next_mean, next_log_std = actor(next_actor_obs, training=False)
        next_action, next_log_prob = tanh_gaussian_sample(next_mean.float(), next_log_std.float(), noise)
        both_actions = torch.cat([action, next_action])
        target_logits = target_critic(both_obs, both_actions, training=True, rows=slice(batch_size, None))
        target_probs = F.softmax(target_logits.float(), dim=-1)
        first_is_lower = expected_value(target_probs, support).argmin(0) == 0
        chosen = torch.where(first_is_lower.unsqueeze(-1), target_probs[0], target_probs[1])
        target_atoms = reward.unsqueeze(-1) + continuation.unsqueeze(-1) * (
            support - alpha * next_log_prob.unsqueeze(-1)
        )
        target = categorical_projection(chosen, target_atoms, cfg.v_min, cfg.v_max)
    statistics = {
        "reward_scale": scale,
        "alpha": alpha,
        "target_q_mean": expected_value(target, support).mean(),
    }
    return both_obs, both_actions, target, statistics


def critic_loss(
    critic: nn.Module,
    support: torch.Tensor,
    autocast: Autocast,
    both_obs: torch.Tensor,
    both_actions: torch.Tensor,
    target: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of both members to the target on the current half of the batch, and the mean Q."""
    batch_size = target.shape[0]
    with autocast():
        logits = critic(both_obs, both_actions, training=True, rows=slice(None, batch_size))
    log_probs = F.log_softmax(logits.float(), dim=-1)
    loss = -(target.unsqueeze(0) * log_probs).sum(-1).mean()
    return loss, expected_value(log_probs.detach().exp(), support).mean()


def project_critic(
    critic: nn.Module,
    target_critic: nn.Module,
    target_params: list[torch.Tensor],
    critic_params: list[torch.Tensor],
    tau: float,
) -> None:
    """Re-project the critic's norm-bounded layers, then move the target critic toward it (inductor fuses the
    EMA into the projection's kernels) and rewrite the target's bf16 weight copies."""
    project_to_unit_norm(critic)
    with torch.no_grad():
        torch._foreach_lerp_(target_params, critic_params, tau)
    refresh_bf16_weight_copies(target_critic)


def temperature_step(
    alpha_optimizer: torch.optim.AdamW, log_alpha: torch.Tensor, target_entropy: float, log_prob: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The temperature's AdamW step from the actor's log-probabilities ``log_prob`` (B,).

    The loss alpha * (entropy - target) shrinks alpha while the entropy exceeds the target. Its gradient in
    log alpha is the loss itself, so the step takes it without a backward. Returns the loss and the entropy.
    """
    with torch.no_grad():
        entropy = -log_prob.mean()
        alpha_loss = log_alpha.exp() * (entropy - target_entropy)
        adamw_step(alpha_optimizer, [alpha_loss])
    return alpha_loss, entropy
