"""Off-policy learners: FastSAC-style `sac` and `flashsac` (arXiv 2604.04539), built by `make_agent`."""

from typing import Literal

import torch

from trainrt.algos.agent import Agent
from trainrt.algos.execution import SampleFn
from trainrt.algos.flashsac import FlashSacAgent
from trainrt.algos.flashsac_config import FlashSacConfig
from trainrt.algos.sac import SacAgent, SacConfig

AlgoName = Literal["sac", "flashsac"]
ALGORITHMS: dict[str, tuple[type[Agent], type[SacConfig] | type[FlashSacConfig]]] = {
    "sac": (SacAgent, SacConfig),
    "flashsac": (FlashSacAgent, FlashSacConfig),
}


def make_agent(
    algo: AlgoName,
    cfg: SacConfig | FlashSacConfig | None,
    obs_dims: dict[str, int],
    num_actions: int,
    device: torch.device | str,
    *,
    seed: int = 0,
    learns: bool = True,
) -> Agent:
    """Build an agent for `algo` ("sac" or "flashsac") on `device`.

    Args:
        algo: algorithm name.
        cfg: its config (SacConfig or FlashSacConfig); None uses the defaults.
        obs_dims: observation group sizes, e.g. {"policy": 98, "critic": 131}; must contain the
            config's actor_obs_group and critic_obs_group.
        num_actions: A, the action dimension (actions live in [-1, 1]).
        device: parameter / buffer / generator device.
        seed: seeds parameter init and the agent's generators.
        learns: False builds an agent that only acts (evaluation, play, export): no optimizers or update
            parts, so it builds in a fraction of the time; it loads a checkpoint's weights but cannot update
            or save a resumable state.
    """
    if algo not in ALGORITHMS:
        raise ValueError(f"unknown algo {algo!r}; valid: {sorted(ALGORITHMS)}")
    agent_cls, cfg_cls = ALGORITHMS[algo]
    if cfg is None:
        cfg = cfg_cls()
    if not isinstance(cfg, cfg_cls):
        raise ValueError(f"algo {algo!r} needs a {cfg_cls.__name__}, got {type(cfg).__name__}")
    for role, group in (("actor_obs_group", cfg.actor_obs_group), ("critic_obs_group", cfg.critic_obs_group)):
        if group not in obs_dims:
            raise ValueError(f"{role}={group!r} is not an observation group; available: {sorted(obs_dims)}")
    if num_actions < 1:
        raise ValueError(f"num_actions must be >= 1, got {num_actions}")
    return agent_cls(cfg, obs_dims, num_actions, device, seed=seed, learns=learns)


__all__ = [
    "ALGORITHMS",
    "Agent",
    "AlgoName",
    "FlashSacAgent",
    "FlashSacConfig",
    "SacAgent",
    "SacConfig",
    "SampleFn",
    "make_agent",
]
