"""Observation noise configs: additive noise drawn from the env's generator into a preallocated buffer."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class NoiseCfg:
    """Base of additive observation noise: a subclass implements `draw_`, the add is the same for all.

    (A subclass that overrides only `add_` still works; its observations then stay uncompiled.)
    """

    def draw_(self, scratch: torch.Tensor, generator: torch.Generator) -> None:
        """Draw the noise into ``scratch`` (num_envs, D) from ``generator``."""
        raise NotImplementedError(f"{type(self).__name__} must implement draw_")

    def add_(self, values: torch.Tensor, scratch: torch.Tensor, generator: torch.Generator) -> None:
        """Add noise to ``values`` (num_envs, D) in place, drawing into ``scratch`` (num_envs, D)."""
        self.draw_(scratch, generator)
        values.add_(scratch)

    @property
    def draws_apart(self) -> bool:
        """Whether the draw is separate from the add (`draw_` implemented and `add_` not replaced)."""
        cls = type(self)
        return cls.draw_ is not NoiseCfg.draw_ and cls.add_ is NoiseCfg.add_


@dataclass
class UniformNoiseCfg(NoiseCfg):
    """Additive noise uniform in ``[n_min, n_max)``."""

    n_min: float
    n_max: float

    def __post_init__(self) -> None:
        if not self.n_min <= self.n_max:
            raise ValueError(f"UniformNoiseCfg needs n_min <= n_max, got ({self.n_min}, {self.n_max})")

    def draw_(self, scratch: torch.Tensor, generator: torch.Generator) -> None:
        """Draw uniform noise into ``scratch`` (num_envs, D)."""
        scratch.uniform_(self.n_min, self.n_max, generator=generator)


@dataclass
class GaussianNoiseCfg(NoiseCfg):
    """Additive zero-mean Gaussian noise with standard deviation ``std``."""

    std: float

    def __post_init__(self) -> None:
        if not self.std >= 0.0:
            raise ValueError(f"GaussianNoiseCfg needs std >= 0, got {self.std}")

    def draw_(self, scratch: torch.Tensor, generator: torch.Generator) -> None:
        """Draw Gaussian noise into ``scratch`` (num_envs, D)."""
        scratch.normal_(0.0, self.std, generator=generator)
