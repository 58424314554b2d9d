"""The learner benchmark: FLOPs per update from torch's counter, ms per update per mode, state untouched."""

import pytest
import torch

from trainrt.algos import SacConfig, make_agent
from trainrt.algos.bench import learner_benchmark, update_flops
from trainrt.replay import DeviceReplayBuffer

pytestmark = pytest.mark.usefixtures("one_thread")

OBS_DIMS = {"policy": 6, "critic": 9}


def _agent_and_sample():
    cfg = SacConfig(actor_hidden_dim=16, critic_hidden_dim=32, batch_size=64, actor_update_period=2)
    agent = make_agent("sac", cfg, OBS_DIMS, 3, "cpu", seed=0)
    buffer = DeviceReplayBuffer(8, 16, OBS_DIMS, 3, "cpu")
    for _ in range(10):
        obs = {k: torch.randn(8, d) for k, d in OBS_DIMS.items()}
        done = torch.zeros(8, dtype=torch.bool)
        buffer.add(obs, agent.act(obs), torch.randn(8), obs, done, done, ~done)
    return agent, (lambda g: buffer.sample(64, g))


def test_update_flops_counts_the_critic_matmuls_and_leaves_the_agent_unchanged():
    agent, sample = _agent_and_sample()
    before = agent.state_dict()
    flops = update_flops(agent, sample)
    # lower bound: forward + backward of both critic members' matmuls on the batch (3 x 2 x 2 x MACs)
    critic_macs = (9 + 3) * 32 + 32 * 16 + 16 * 8 + 8 * 101
    assert flops > 3 * 2 * 2 * 64 * critic_macs
    after = agent.state_dict()
    for name in ("actor", "critic"):
        for key, value in before[name].items():
            assert torch.equal(value, after[name][key]), key


def test_learner_benchmark_reports_each_mode_it_ran():
    agent, sample = _agent_and_sample()
    result = learner_benchmark(agent, sample, updates_per_iteration=2, iterations=2, modes=("eager",))
    assert result["eager_ms_per_update"] > 0 and result["eager_tflops"] > 0
    assert result["flops_per_update"] > 0 and result["diagnostic"] is True
    assert agent.num_updates >= 4  # the timed updates are real ones
