"""SAC's update math (`trainrt.algos.sac`), as plain functions of the modules and tensors they read.

``autocast`` is the agent's context factory (bf16 on CUDA when configured, a no-op otherwise); ``support`` the
C51 atoms (K,). The agent binds the modules once and passes each update's tensors.
"""

from collections.abc import Callable
from contextlib import AbstractContextManager

import torch
import torch.nn.functional as F
from torch import nn

from trainrt.algos.distributional import categorical_projection, expected_value
from trainrt.algos.networks import tanh_gaussian_sample

Autocast = Callable[[], AbstractContextManager]


def critic_target(
    actor: nn.Module,
    target_critic: nn.Module,
    support: torch.Tensor,
    v_min: float,
    v_max: float,
    autocast: Autocast,
    next_actor_obs: torch.Tensor,
    next_critic_obs: torch.Tensor,
    reward: torch.Tensor,
    continuation: torch.Tensor,
    alpha: torch.Tensor,
    noise: torch.Tensor,
) -> torch.Tensor:
    """Projected soft Bellman target distributions (2, B, K), one per target member; no gradients."""
    with torch.no_grad(), autocast():
        mean, log_std = actor(next_actor_obs)
        next_action, next_log_prob = tanh_gaussian_sample(mean.float(), log_std.float(), noise)
        target_probs = F.softmax(target_critic(next_critic_obs, next_action).float(), dim=-1)
        # Soft value: every return atom is shifted by the entropy bonus before discounting.
        target_atoms = reward.unsqueeze(-1) + continuation.unsqueeze(-1) * (
            support - alpha * next_log_prob.unsqueeze(-1)
        )
        return categorical_projection(target_probs, target_atoms.expand_as(target_probs), v_min, v_max)


def critic_loss(
    critic: nn.Module,
    support: torch.Tensor,
    autocast: Autocast,
    critic_obs: torch.Tensor,
    action: torch.Tensor,
    target: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Cross-entropy of both members to their targets (summed over members) and the mean Q."""
    with autocast():
        logits = critic(critic_obs, action)
    log_probs = F.log_softmax(logits.float(), dim=-1)
    loss = -(target * log_probs).sum(-1).mean(-1).sum()
    return loss, expected_value(log_probs.detach().exp(), support).mean()


def actor_loss(
    actor: nn.Module,
    critic: nn.Module,
    support: torch.Tensor,
    autocast: Autocast,
    actor_obs: torch.Tensor,
    critic_obs: torch.Tensor,
    alpha: torch.Tensor,
    noise: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """alpha * log pi - mean twin Q and log pi (B,); call with the critic frozen."""
    with autocast():
        mean, log_std = actor(actor_obs)
        action, log_prob = tanh_gaussian_sample(mean.float(), log_std.float(), noise)
        q_probs = F.softmax(critic(critic_obs, action).float(), dim=-1)
    q_value = expected_value(q_probs, support).mean(0)
    return (alpha * log_prob - q_value).mean(), log_prob
