"""Update math both algorithms share, as plain functions of the tensors and modules they read.

Each is a part of an update (`trainrt.algos.execution.Part`): the agents bind the modules and optimizers once
(``functools.partial``) and pass the batch's tensors at each call, so torch.compile sees a function of explicit
inputs and fuses it.
"""

import torch

from trainrt.algos.adamw_step import adamw_step
from trainrt.algos.normalizer import RunningObsNormalizer


def normalize(
    actor_normalizer: RunningObsNormalizer,
    critic_normalizer: RunningObsNormalizer,
    shared_obs_group: bool,
    actor_obs: torch.Tensor,
    next_actor_obs: torch.Tensor,
    critic_obs: torch.Tensor,
    next_critic_obs: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Update the running statistics with this batch's observations, then normalize the actor's and the
    critics' observations and next observations (the critics' statistics are the actor's when
    ``shared_obs_group``)."""
    actor_normalizer.update(actor_obs)
    if not shared_obs_group:
        critic_normalizer.update(critic_obs)
    return (
        actor_normalizer(actor_obs),
        actor_normalizer(next_actor_obs),
        critic_normalizer(critic_obs),
        critic_normalizer(next_critic_obs),
    )


def optimizer_step(optimizer: torch.optim.AdamW) -> None:
    """One AdamW step of ``optimizer`` (the actor's in both algorithms, FlashSAC's critic's)."""
    adamw_step(optimizer)


def step_and_track(
    optimizer: torch.optim.AdamW,
    target_params: list[torch.Tensor],
    online_params: list[torch.Tensor],
    tau: float,
) -> None:
    """The critic's AdamW step, then the target critic's EMA toward it (inductor fuses the two over all the
    critic's tensors). SAC's critic step; FlashSAC projects its weights between the step and the EMA
    (docs/perf/tuning/0025)."""
    adamw_step(optimizer)
    with torch.no_grad():
        torch._foreach_lerp_(target_params, online_params, tau)
