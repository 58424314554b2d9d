"""Learning-rate schedule evaluated on the device: linear warm-up, then cosine decay to a floor.

The factor is computed from a device update counter with tensor ops, so an optimizer whose learning
rate is a tensor follows the schedule inside a replayed CUDA graph (a Python float would be frozen into
the graph at capture).
"""

from __future__ import annotations

import math

import torch

from trainrt.hotpath import cold_path


class LrSchedule:
    """factor(u) = (u + 1) / W during the first W updates, then cosine from 1 to `final_ratio` over the
    remaining updates of the horizon, then `final_ratio`.

    Args:
        warmup_updates: W (0: no warm-up).
        final_ratio: learning-rate factor at the end of the horizon, in (0, 1].
        horizon_updates: total updates the schedule spans; None until `set_horizon` (the runner sets it
            to the run's total updates before capture).
        device: where the schedule constants live.
    """

    def __init__(
        self,
        warmup_updates: int,
        final_ratio: float,
        horizon_updates: int | None,
        device: torch.device | str,
    ) -> None:
        if warmup_updates < 0:
            raise ValueError(f"warmup_updates must be >= 0, got {warmup_updates}")
        if not 0.0 < final_ratio <= 1.0:
            raise ValueError(f"final_ratio must lie in (0, 1], got {final_ratio}")
        self.warmup_updates = int(warmup_updates)
        self.final_ratio = float(final_ratio)
        self._warmup = torch.tensor(float(max(warmup_updates, 1)), device=device)
        self._horizon = torch.tensor(0.0, device=device)
        self.horizon_updates: int | None = None
        self.set_horizon(horizon_updates)

    @cold_path
    def set_horizon(self, horizon_updates: int | None) -> None:
        """Set the number of updates the decay spans (None: no decay, the factor stays 1 after warm-up)."""
        if horizon_updates is not None and horizon_updates < 1:
            raise ValueError(f"horizon_updates must be >= 1, got {horizon_updates}")
        self.horizon_updates = horizon_updates
        self._horizon.fill_(float(horizon_updates) if horizon_updates else 0.0)

    def factor(self, step: int) -> float:
        """The factor at update `step` (host arithmetic; the reference for `factor_tensor`)."""
        if step < self.warmup_updates:
            return (step + 1) / self.warmup_updates
        if not self.horizon_updates or self.horizon_updates <= self.warmup_updates:
            return 1.0
        progress = min(1.0, (step - self.warmup_updates) / (self.horizon_updates - self.warmup_updates))
        return self.final_ratio + (1.0 - self.final_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))

    def factor_tensor(self, step: torch.Tensor) -> torch.Tensor:
        """The factor at update `step` (a float device scalar), with tensor ops only."""
        warmup_steps = float(self.warmup_updates)
        warming = (step + 1.0) / self._warmup
        span = (self._horizon - warmup_steps).clamp(min=1.0)
        progress = ((step - warmup_steps) / span).clamp(0.0, 1.0)
        cosine = self.final_ratio + (1.0 - self.final_ratio) * 0.5 * (1.0 + torch.cos(math.pi * progress))
        decayed = torch.where(self._horizon > warmup_steps, cosine, torch.ones_like(cosine))
        return torch.where(step < warmup_steps, warming, decayed)


@cold_path
def lr_schedule_from(cfg: object, device: torch.device | str) -> LrSchedule | None:
    """The schedule an algorithm config asks for (`lr_schedule`, `lr_warmup_updates`, `lr_final_ratio`,
    `lr_decay_updates`), or None for a constant learning rate."""
    if getattr(cfg, "lr_schedule", "constant") == "constant":
        return None
    return LrSchedule(cfg.lr_warmup_updates, cfg.lr_final_ratio, cfg.lr_decay_updates, device)
