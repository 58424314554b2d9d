"""Null managers: stand-ins for empty config groups, so the env's step never branches on what is configured.

Each one has the full surface of its real counterpart and does nothing (no buffers, no kernels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from trainrt.hotpath import cold_path
from trainrt.managers.base import ManagerBase
from trainrt.managers.env_protocol import ManagedEnv

if TYPE_CHECKING:
    from trainrt.managers.command import CommandTerm


class NullManager(ManagerBase):
    """A manager with no terms: every operation is a no-op."""

    def __init__(self, env: ManagedEnv) -> None:
        super().__init__(env)

    def reset(self, env_mask: torch.Tensor) -> None:
        """Nothing to reset."""

    @cold_path
    def __str__(self) -> str:
        return f"{type(self).__name__}: no {self.kind} terms"


class NullCommandManager(NullManager):
    """Command manager for tasks without commands."""

    kind = "command"

    def command(self, name: str) -> torch.Tensor:
        """There are no commands: always raises ``ValueError``."""
        raise ValueError(f"no command term {name!r}: this task has no commands")

    def get_term(self, name: str) -> CommandTerm:
        """There are no command terms: always raises ``ValueError``."""
        raise ValueError(f"no command term {name!r}: this task has no commands")

    def compute(self, dt: float) -> None:
        """Nothing to advance."""

    def draw_reset_(self) -> None:
        """Nothing to draw."""

    def apply_reset(self, env_mask: torch.Tensor) -> None:
        """Nothing to resample."""

    def draw_compute_(self) -> None:
        """Nothing to draw."""

    def apply_compute(self, dt: float) -> None:
        """Nothing to advance."""


class NullEventManager(NullManager):
    """Event manager for tasks without events."""

    kind = "event"

    def get_term(self, name: str) -> Any:
        """There are no event terms: always raises ``ValueError``."""
        raise ValueError(f"no event term {name!r}: this task has no events")

    def mode_terms(self, mode: str) -> list[str]:
        """No events of any mode."""
        return []

    @property
    def interval_time_left(self) -> list[torch.Tensor]:
        """No interval timers."""
        return []

    def apply_startup(self) -> None:
        """No startup events."""

    def draw_reset_(self) -> None:
        """Nothing to draw."""

    def apply_reset(self, env_mask: torch.Tensor) -> None:
        """No reset events."""

    def draw_interval_(self) -> None:
        """Nothing to draw."""

    def apply_interval(self, dt: float) -> None:
        """No interval events."""


class NullCurriculumManager(NullManager):
    """Curriculum manager for tasks without a curriculum."""

    kind = "curriculum"

    def compute(self, env_mask: torch.Tensor) -> None:
        """No curriculum terms."""

    @cold_path
    def publish_state(self) -> dict[str, float]:
        """No curriculum state."""
        return {}


class NullMetricsManager(NullManager):
    """Metrics manager for tasks without metric terms."""

    kind = "metric"

    def compute(self) -> None:
        """No metrics."""

    def record_episode_end(self, env_mask: torch.Tensor, episode_length: torch.Tensor) -> None:
        """No metrics."""

    @cold_path
    def publish_episode_stats(self, finished_episodes: float) -> dict[str, Any]:
        """No metrics."""
        return {}
