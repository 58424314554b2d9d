"""Seven updates of each learner from one seed and fixed batches end where the learner ended before its math and
its execution were split apart (`algos/execution.py`): weights, target, normalizers, temperature, optimizer moments
and step counters, the learning-rate schedule, every recorded loss and the acting copy.

The recorded fingerprints were taken from the code before the split, whose final states this code matches bit for
bit on the same machine; the tolerance here only allows for another CPU's float rounding.
"""

import pytest
import torch

from trainrt.algos import FlashSacConfig, SacConfig, make_agent
from trainrt.replay import Batch

pytestmark = pytest.mark.usefixtures("one_thread")

OBS_DIMS = {"policy": 5, "critic": 7}
NUM_ACTIONS = 2
BATCH = 32
UPDATES = 7
CONFIGS = {
    "sac": lambda: SacConfig(
        actor_hidden_dim=16,
        critic_hidden_dim=32,
        num_atoms=11,
        batch_size=BATCH,
        lr_schedule="warmup_cosine",
        lr_warmup_updates=2,
        lr_final_ratio=0.5,
        lr_decay_updates=10,
    ),
    "flashsac": lambda: FlashSacConfig(
        actor_hidden_dim=8,
        critic_hidden_dim=16,
        actor_num_blocks=1,
        critic_num_blocks=1,
        num_atoms=11,
        batch_size=BATCH,
    ),
}

RECORDED: dict[str, dict[str, tuple[float, float]]] = {
    "flashsac": {
        "actor": (98.70706048135801, 5210.926975127024),
        "critic": (370.52942692278566, 17279.74337879767),
        "critic_target": (370.5065119435868, 17276.477136903115),
        "actor_obs_normalizer": (5.0, 45.0),
        "critic_obs_normalizer": (7.0, 84.0),
        "log_alpha": (-4.6039814949035645, -4.6039814949035645),
        "actor_optimizer": (47.326319150655934, 2508.6487825220674),
        "critic_optimizer": (84.30795570480983, 4173.921135702221),
        "alpha_optimizer": (3.9961774533145444, 11.996177952735934),
        "schedule_step": (7.0, 7.0),
        "losses": (15.877028168179095, 421.29631277546287),
        "acting_actor": (98.70706048135801, 5210.926975127024),
        "act": (-0.0631888136267662, -0.24528608098626137),
    },
    "sac": {
        "actor": (26.94865756201034, 1004.2612332174758),
        "critic": (89.42135944130496, 2918.7612385178218),
        "critic_target": (89.39556856631316, 2917.073482810276),
        "actor_obs_normalizer": (228.5240160562098, 266.4813932515681),
        "critic_obs_normalizer": (230.69539650715888, 302.8628313206136),
        "log_alpha": (-6.907155513763428, -6.907155513763428),
        "actor_optimizer": (28.028279391557135, 969.1804397971691),
        "critic_optimizer": (98.4073287728017, 4547.769317726776),
        "alpha_optimizer": (1.9995936080193246, 5.9995940547884175),
        "schedule_step": (7.0, 7.0),
        "losses": (14.985526950331405, 299.11965200002305),
        "acting_actor": (26.94865756201034, 1004.2612332174758),
        "act": (-0.11629647389054298, -0.49089644476771355),
    },
}
"""Fingerprints (sum, weighted sum) of each part of the final state, from the code before the split."""


def _batch(seed: int) -> Batch:
    g = torch.Generator().manual_seed(seed)
    obs = {k: torch.randn(BATCH, d, generator=g) for k, d in OBS_DIMS.items()}
    next_obs = {k: torch.randn(BATCH, d, generator=g) for k, d in OBS_DIMS.items()}
    return Batch(
        obs=obs,
        action=torch.rand(BATCH, NUM_ACTIONS, generator=g) * 2 - 1,
        reward=torch.randn(BATCH, generator=g),
        next_obs=next_obs,
        bootstrap=(torch.rand(BATCH, generator=g) > 0.1).float(),
        discount=torch.full((BATCH,), 0.9),
        return_var=torch.tensor(2.0),
        return_abs_max=torch.tensor(7.0),
    )


def _tensors(tree) -> list[torch.Tensor]:
    """Every tensor of a nested state tree, in key order."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    if isinstance(tree, dict):
        return [t for key in sorted(tree, key=str) for t in _tensors(tree[key])]
    if isinstance(tree, list | tuple):
        return [t for value in tree for t in _tensors(value)]
    return []


def _fingerprint(tree) -> tuple[float, float]:
    flat = torch.cat([t.detach().double().flatten() for t in _tensors(tree)])
    weight = torch.arange(flat.numel(), dtype=torch.float64) % 97 + 1
    return flat.sum().item(), (flat * weight).sum().item()


def final_state_fingerprints(algo: str) -> dict[str, tuple[float, float]]:
    """The fingerprints of each part of the agent's state after `UPDATES` updates."""
    agent = make_agent(algo, CONFIGS[algo](), OBS_DIMS, NUM_ACTIONS, "cpu", seed=5)
    losses = []
    for index in range(UPDATES):
        agent.update(_batch(100 + index))
        losses.append({name: value.clone() for name, value in agent.losses().items()})
    state = agent.state_dict()
    parts = {
        key: state[key]
        for key in (
            "actor",
            "critic",
            "critic_target",
            "actor_obs_normalizer",
            "critic_obs_normalizer",
            "log_alpha",
            "actor_optimizer",
            "critic_optimizer",
            "alpha_optimizer",
            "schedule_step",
        )
    }
    parts["losses"] = losses
    parts["acting_actor"] = agent.acting_actor.state_dict()
    obs = {k: torch.randn(4, d, generator=torch.Generator().manual_seed(9)) for k, d in OBS_DIMS.items()}
    parts["act"] = agent.act(obs)
    return {name: _fingerprint(tree) for name, tree in parts.items()}


@pytest.mark.parametrize("algo", sorted(CONFIGS))
def test_updates_end_where_the_learner_ended_before_the_split(algo):
    recorded = RECORDED[algo]
    mine = final_state_fingerprints(algo)
    assert mine.keys() == recorded.keys()
    for name, expected in recorded.items():
        assert mine[name] == pytest.approx(expected, rel=1e-6, abs=1e-9), name
