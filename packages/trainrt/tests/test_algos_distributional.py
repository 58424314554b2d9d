"""C51 projection against a straightforward float64 loop reference."""

import math

import numpy as np
import pytest
import torch

from trainrt.algos.distributional import categorical_projection, categorical_support, expected_value

V_MIN, V_MAX, ATOMS = -3.0, 5.0, 17


def _reference_projection(probs, rewards, continuation, v_min, v_max):
    """Textbook C51 projection, one atom at a time, in float64."""
    batch, atoms = probs.shape
    spacing = (v_max - v_min) / (atoms - 1)
    support = np.linspace(v_min, v_max, atoms)
    out = np.zeros((batch, atoms))
    for i in range(batch):
        for j in range(atoms):
            moved = min(max(rewards[i] + continuation[i] * support[j], v_min), v_max)
            position = (moved - v_min) / spacing
            lower, upper = math.floor(position), math.ceil(position)
            if lower == upper:
                out[i, lower] += probs[i, j]
            else:
                out[i, lower] += probs[i, j] * (upper - position)
                out[i, upper] += probs[i, j] * (position - lower)
    return out


def _cases():
    rng = np.random.default_rng(0)
    batch = 64
    probs = rng.dirichlet(np.ones(ATOMS), size=batch)
    rewards = rng.normal(scale=2.0, size=batch)
    continuation = np.full(batch, 0.9)
    continuation[:8] = 0.0  # done rows: all mass collapses onto the reward
    rewards[8:12] = [50.0, -50.0, 6.0, -4.0]  # far outside the support: clamped to the edges
    rewards[12:16] = [0.5, 1.0, -0.5, 0.0]  # land exactly on support points when done
    continuation[12:16] = 0.0
    rewards[16] = 0.0  # identity map: every atom stays on its support point
    continuation[16] = 1.0
    return probs, rewards, continuation


def test_projection_matches_float64_loop_reference():
    probs, rewards, continuation = _cases()
    support = categorical_support(V_MIN, V_MAX, ATOMS, "cpu")
    target_atoms = (
        torch.tensor(rewards, dtype=torch.float32).unsqueeze(-1)
        + torch.tensor(continuation, dtype=torch.float32).unsqueeze(-1) * support
    )
    ours = categorical_projection(torch.tensor(probs, dtype=torch.float32), target_atoms, V_MIN, V_MAX)
    reference = _reference_projection(probs, rewards, continuation, V_MIN, V_MAX)
    np.testing.assert_allclose(ours.double().numpy(), reference, atol=2e-6)
    np.testing.assert_allclose(ours.sum(-1).numpy(), 1.0, atol=1e-5)
    # clamped rows put everything on the edge atoms
    assert ours[8, -1].item() == pytest.approx(1.0) and ours[9, 0].item() == pytest.approx(1.0)
    np.testing.assert_allclose(ours[16].numpy(), probs[16], atol=1e-6)


def test_projection_preserves_the_mean_inside_the_support():
    rng = np.random.default_rng(1)
    probs = torch.tensor(rng.dirichlet(np.ones(ATOMS), size=32), dtype=torch.float32)
    support = categorical_support(V_MIN, V_MAX, ATOMS, "cpu")
    reward = torch.tensor(rng.uniform(-0.2, 0.5, size=32), dtype=torch.float32)
    discount = 0.5  # keeps every moved atom inside [V_MIN, V_MAX]
    projected = categorical_projection(probs, reward.unsqueeze(-1) + discount * support, V_MIN, V_MAX)
    expected = reward + discount * expected_value(probs, support)
    torch.testing.assert_close(expected_value(projected, support), expected, atol=1e-5, rtol=0)


def test_projection_handles_leading_member_axis():
    probs, rewards, continuation = _cases()
    support = categorical_support(V_MIN, V_MAX, ATOMS, "cpu")
    p = torch.tensor(probs, dtype=torch.float32)
    atoms = (
        torch.tensor(rewards, dtype=torch.float32).unsqueeze(-1)
        + torch.tensor(continuation, dtype=torch.float32).unsqueeze(-1) * support
    )
    stacked = categorical_projection(torch.stack([p, p.flip(0)]), atoms.expand(2, -1, -1), V_MIN, V_MAX)
    torch.testing.assert_close(stacked[0], categorical_projection(p, atoms, V_MIN, V_MAX))


def test_support_rejects_bad_ranges():
    with pytest.raises(ValueError, match="v_min"):
        categorical_support(1.0, 1.0, 5, "cpu")
    with pytest.raises(ValueError, match="num_atoms"):
        categorical_support(0.0, 1.0, 1, "cpu")


def test_a_nan_target_gives_a_nan_row_and_no_index_outside_the_support():
    """A nan target atom (from a non-finite reward) once became an index outside the support inside the compiled
    learner and stopped the process with a device assert; now its row is nan and the other rows are untouched."""
    generator = torch.Generator().manual_seed(0)
    probs = torch.softmax(torch.randn(3, 11, generator=generator), dim=-1)
    targets = torch.linspace(-2.0, 2.0, 11).expand(3, 11).clone()
    clean = categorical_projection(probs, targets, -1.0, 1.0)
    targets[1, 4] = float("nan")
    projected = categorical_projection(probs, targets, -1.0, 1.0)
    assert torch.isnan(projected[1]).any()
    assert torch.equal(projected[[0, 2]], clean[[0, 2]])
