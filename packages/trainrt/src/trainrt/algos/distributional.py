"""Categorical (C51) value distributions shared by `sac` and `flashsac`.

A critic outputs logits over `num_atoms` fixed return values (the support) evenly spaced in
[v_min, v_max]. The Bellman target moves each atom to a new location; `categorical_projection`
puts that shifted distribution back onto the fixed support (Bellemare et al., 2017).
"""

import torch


def check_support_range(v_min: float, v_max: float) -> None:
    """Raise ValueError unless the value support [v_min, v_max] is a non-empty interval."""
    if not v_min < v_max:
        raise ValueError(f"v_min must be below v_max, got v_min={v_min}, v_max={v_max}")


def categorical_support(
    v_min: float, v_max: float, num_atoms: int, device: torch.device | str
) -> torch.Tensor:
    """Evenly spaced atom locations (num_atoms,) float32 from v_min to v_max inclusive."""
    check_support_range(v_min, v_max)
    if num_atoms < 2:
        raise ValueError(f"num_atoms must be at least 2, got {num_atoms}")
    return torch.linspace(v_min, v_max, num_atoms, device=device, dtype=torch.float32)


def categorical_projection(
    probs: torch.Tensor, target_atoms: torch.Tensor, v_min: float, v_max: float
) -> torch.Tensor:
    """Project probability mass sitting at arbitrary locations onto the fixed support.

    Each atom's mass is clamped into [v_min, v_max] and split linearly between its two nearest
    support points. Fixed shape, no host sync; mass is conserved exactly up to rounding. A nan target atom
    makes its row's projection nan (no out-of-range index).

    Args:
        probs: probabilities (..., K) of the moved atoms (rows sum to 1).
        target_atoms: where each atom moved to (..., K), e.g. r + discount * z.
        v_min: lowest support value.
        v_max: highest support value.

    Returns:
        projected probabilities on the support (..., K), float32.
    """
    num_atoms = probs.shape[-1]
    probs = probs.float()
    spacing = (v_max - v_min) / (num_atoms - 1)
    position = (target_atoms.float().clamp(v_min, v_max) - v_min) / spacing  # in [0, K-1]
    # A non-finite target (nan survives the clamp) must not become an index outside the support, which would
    # stop the process with a device assert; its weights stay nan, so the loss shows it instead.
    lower = torch.nan_to_num(position.floor(), nan=0.0).clamp(0, num_atoms - 1)
    upper_weight = position - lower  # 0 when the atom lands exactly on a support point
    lower_index = lower.long()
    upper_index = (lower_index + 1).clamp(max=num_atoms - 1)
    projected = torch.zeros_like(probs)
    projected.scatter_add_(-1, lower_index, probs * (1.0 - upper_weight))
    projected.scatter_add_(-1, upper_index, probs * upper_weight)
    return projected


def expected_value(probs: torch.Tensor, support: torch.Tensor) -> torch.Tensor:
    """Mean of a categorical distribution: probs (..., K) with support (K,) -> (...)."""
    return (probs.float() * support).sum(-1)
