"""Observation noise configs: additive noise drawn from the env's generator into a preallocated buffer."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class NoiseCfg:
    """Base of additive observation noise."""

    def add_(self, values: torch.Tensor, scratch: torch.Tensor, generator: torch.Generator) -> None:
        """Add noise to ``values`` (num_envs, D) in place, drawing into ``scratch`` (num_envs, D)."""
        raise NotImplementedError(f"{type(self).__name__} must implement add_")


@dataclass
class UniformNoiseCfg(NoiseCfg):
    """Additive noise uniform in ``[n_min, n_max)``."""

    n_min: float
    n_max: float

    def __post_init__(self) -> None:
        if not self.n_min <= self.n_max:
            raise ValueError(f"UniformNoiseCfg needs n_min <= n_max, got ({self.n_min}, {self.n_max})")

    def add_(self, values: torch.Tensor, scratch: torch.Tensor, generator: torch.Generator) -> None:
        """Add uniform noise to ``values`` (num_envs, D) in place."""
        scratch.uniform_(self.n_min, self.n_max, generator=generator)
        values.add_(scratch)


@dataclass
class GaussianNoiseCfg(NoiseCfg):
    """Additive zero-mean Gaussian noise with standard deviation ``std``."""

    std: float

    def __post_init__(self) -> None:
        if not self.std >= 0.0:
            raise ValueError(f"GaussianNoiseCfg needs std >= 0, got {self.std}")

    def add_(self, values: torch.Tensor, scratch: torch.Tensor, generator: torch.Generator) -> None:
        """Add Gaussian noise to ``values`` (num_envs, D) in place."""
        scratch.normal_(0.0, self.std, generator=generator)
        values.add_(scratch)
