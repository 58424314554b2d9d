"""Learning sanity check: on a one-step continuous bandit both algorithms move the policy to the optimum."""

import pytest
import torch

from trainrt.algos import FlashSacConfig, SacConfig, make_agent
from trainrt.replay import DeviceReplayBuffer

OBS_DIMS = {"policy": 2, "critic": 2}
NUM_ENVS = 32
BEST_ACTION = 0.5
# Small learners tuned for this bandit, with the actor in every update and the target rates they were tuned with
# (the class defaults are the 2048-env presets' schedule, not this problem's).
CONFIGS = {
    "sac": SacConfig(
        actor_hidden_dim=32,
        critic_hidden_dim=64,
        num_atoms=101,
        v_min=-2.0,
        v_max=1.5,
        batch_size=128,
        actor_lr=1e-2,
        critic_lr=3e-3,
        tau=0.1,
        actor_update_period=1,
    ),
    "flashsac": FlashSacConfig(
        actor_hidden_dim=16,
        critic_hidden_dim=32,
        actor_num_blocks=1,
        critic_num_blocks=1,
        num_atoms=51,
        batch_size=128,
        actor_lr=3e-3,
        critic_lr=3e-3,
        n_step=1,
        tau=0.01,
        actor_update_period=1,
    ),
}


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("algo", sorted(CONFIGS))
@pytest.mark.parametrize("seed", [0, pytest.param(1, marks=pytest.mark.slow)])  # one seed in the quick loop
def test_policy_moves_to_the_best_action_of_a_bandit(algo, seed):
    agent = make_agent(algo, CONFIGS[algo], OBS_DIMS, 1, "cpu", seed=seed)
    buffer = DeviceReplayBuffer(NUM_ENVS, 64, OBS_DIMS, 1, "cpu", n_step=1, gamma=0.9)
    g = torch.Generator().manual_seed(seed)

    def observe() -> dict[str, torch.Tensor]:
        obs = torch.randn(NUM_ENVS, 2, generator=g)
        return {"policy": obs, "critic": obs}

    every_step_ends = torch.ones(NUM_ENVS, dtype=torch.bool)
    obs = observe()
    start_gap = (agent.act(obs, deterministic=True) - BEST_ACTION).abs().mean().item()
    for step in range(160):
        action = agent.act(obs)
        reward = 1.0 - 4.0 * (action[:, 0] - BEST_ACTION).square()
        next_obs = observe()
        buffer.add(obs, action, reward, next_obs, every_step_ends, ~every_step_ends, every_step_ends)
        obs = next_obs
        if step >= 2:
            agent.update(buffer.sample(128, agent.update_rng))
    end_gap = (agent.act(obs, deterministic=True) - BEST_ACTION).abs().mean().item()
    assert end_gap < 0.5 * start_gap
