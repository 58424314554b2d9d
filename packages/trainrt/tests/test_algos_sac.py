"""SAC (FastSAC-style) update: loss signs, temperature direction, target soft update."""

import itertools

import pytest
import torch

from trainrt.algos import SacConfig, make_agent
from trainrt.algos.distributional import expected_value
from trainrt.algos.networks import tanh_gaussian_sample
from trainrt.replay import Batch

OBS_DIMS = {"policy": 6, "critic": 9}
NUM_ACTIONS = 3


pytestmark = pytest.mark.usefixtures("one_thread")


def _config(**overrides) -> SacConfig:
    small = dict(
        actor_hidden_dim=32, critic_hidden_dim=64, num_atoms=21, v_min=-5.0, v_max=5.0, batch_size=64
    )
    return SacConfig(**(small | overrides))


def _fixed_batch(batch_size: int = 64, seed: int = 0) -> Batch:
    g = torch.Generator().manual_seed(seed)
    obs = {k: torch.randn(batch_size, d, generator=g) for k, d in OBS_DIMS.items()}
    next_obs = {k: torch.randn(batch_size, d, generator=g) for k, d in OBS_DIMS.items()}
    action = torch.rand(batch_size, NUM_ACTIONS, generator=g) * 2 - 1
    return Batch(
        obs=obs,
        action=action,
        reward=-(action - 0.3).square().sum(-1),
        next_obs=next_obs,
        bootstrap=(torch.rand(batch_size, generator=g) > 0.1).float(),
        discount=torch.full((batch_size,), 0.97),
    )


def _q_of_policy(agent, batch: Batch) -> float:
    with torch.no_grad():
        action = agent.act(batch.obs, deterministic=True)
        critic_obs = agent.critic_obs_normalizer(batch.obs["critic"])
        probs = torch.softmax(agent.critic(critic_obs, action), -1)
        return expected_value(probs, agent.support).mean().item()


def test_critic_loss_decreases_on_a_fixed_batch():
    agent = make_agent("sac", _config(critic_lr=2e-3), OBS_DIMS, NUM_ACTIONS, "cpu", seed=0)
    batch = _fixed_batch()
    batch.bootstrap.zero_()  # terminal targets: a fixed two-atom distribution the critic can fit
    agent.update(batch)
    first = agent.losses()["critic_loss"].item()
    for _ in range(30):
        agent.update(batch)
    assert agent.losses()["critic_loss"].item() < 0.7 * first


def test_actor_step_increases_q_under_a_fixed_critic():
    cfg = _config(critic_lr=1e-12, autotune_alpha=False, alpha_init=1e-4, actor_lr=1e-3)
    agent = make_agent("sac", cfg, OBS_DIMS, NUM_ACTIONS, "cpu", seed=1)
    batch = _fixed_batch()
    agent.update(batch)  # normalizer statistics settle on this batch
    before = _q_of_policy(agent, batch)
    for _ in range(40):
        agent.update(batch)
    assert _q_of_policy(agent, batch) > before + 1e-3


def test_temperature_moves_toward_the_target_entropy():
    batch = _fixed_batch()
    low = make_agent("sac", _config(target_entropy_per_action=-20.0), OBS_DIMS, NUM_ACTIONS, "cpu", seed=2)
    high = make_agent("sac", _config(target_entropy_per_action=20.0), OBS_DIMS, NUM_ACTIONS, "cpu", seed=2)
    alpha0 = low.log_alpha.exp().item()
    for _ in range(5):
        low.update(batch)
        high.update(batch)
    assert low.log_alpha.exp().item() < alpha0  # entropy above a very low target: less bonus
    assert high.log_alpha.exp().item() > alpha0  # entropy below an unreachable target: more bonus
    assert high.losses()["alpha"].item() == high.log_alpha.exp().item()


def test_fixed_temperature_stays_put():
    agent = make_agent("sac", _config(autotune_alpha=False), OBS_DIMS, NUM_ACTIONS, "cpu", seed=2)
    value = agent.log_alpha.item()
    agent.update(_fixed_batch())
    assert agent.log_alpha.item() == value


def test_target_critic_is_a_soft_copy_after_each_update():
    tau = 0.2
    agent = make_agent("sac", _config(tau=tau), OBS_DIMS, NUM_ACTIONS, "cpu", seed=3)
    for online, target in zip(agent.critic.parameters(), agent.critic_target.parameters()):
        torch.testing.assert_close(online, target)  # starts as an exact copy
    batch = _fixed_batch()
    agent.update(batch)
    before = [p.detach().clone() for p in agent.critic_target.parameters()]
    agent.update(batch)
    for old, new, online in zip(before, agent.critic_target.parameters(), agent.critic.parameters()):
        torch.testing.assert_close(new, (1 - tau) * old + tau * online, rtol=1e-6, atol=1e-7)
    assert not any(p.requires_grad for p in agent.critic_target.parameters())


def test_delayed_actor_updates_follow_the_period():
    agent = make_agent("sac", _config(actor_update_period=3), OBS_DIMS, NUM_ACTIONS, "cpu", seed=4)
    batch = _fixed_batch()
    snapshots = []
    for _ in range(4):
        snapshots.append([p.detach().clone() for p in agent.actor.parameters()])
        agent.update(batch)
    snapshots.append([p.detach().clone() for p in agent.actor.parameters()])
    changed = [any(not torch.equal(a, b) for a, b in zip(s, t)) for s, t in itertools.pairwise(snapshots)]
    assert changed == [True, False, False, True]


def test_critic_target_matches_a_float64_soft_bellman_reference(monkeypatch):
    """Target atoms = r + discount * bootstrap * (z - alpha * log pi(a'|s')), per sample, before projection."""
    from trainrt.algos import sac_math as sac_module

    cfg = _config(obs_normalization=False, alpha_init=0.2, autotune_alpha=False)
    agent = make_agent("sac", cfg, OBS_DIMS, NUM_ACTIONS, "cpu", seed=3)
    batch = _fixed_batch(batch_size=32, seed=5)
    g = torch.Generator().manual_seed(9)
    batch.bootstrap.copy_((torch.rand(32, generator=g) > 0.5).float())  # mixed: truncation and termination
    batch.discount.copy_(0.97 ** torch.randint(1, 4, (32,), generator=g).float())  # n-step discounts
    captured = []
    real_projection = sac_module.categorical_projection
    monkeypatch.setattr(
        sac_module,
        "categorical_projection",
        lambda probs, atoms, lo, hi: captured.append(atoms.clone()) or real_projection(probs, atoms, lo, hi),
    )
    # the update's first draw is the next-state action: take it here with the same generator state, before
    # the update changes the actor
    rng_before = agent.update_rng.get_state()
    with torch.no_grad():
        mean, log_std = agent.actor(batch.next_obs["policy"])
        _, next_log_prob = tanh_gaussian_sample(mean, log_std, agent._policy_noise(32))
    agent.update_rng.set_state(rng_before)
    agent.update(batch)
    support = agent.support.double()
    continuation = (batch.discount.double() * batch.bootstrap.double()).unsqueeze(-1)
    reference = batch.reward.double().unsqueeze(-1) + continuation * (
        support - 0.2 * next_log_prob.double().unsqueeze(-1)
    )
    atoms = captured[0]
    assert atoms.shape[-2:] == reference.shape
    torch.testing.assert_close(atoms[0].double(), reference, rtol=1e-5, atol=1e-5)
    # terminated rows: every atom collapses onto the reward
    terminal = batch.bootstrap == 0
    torch.testing.assert_close(
        atoms[0][terminal].double(), batch.reward.double()[terminal, None].expand(-1, cfg.num_atoms)
    )
