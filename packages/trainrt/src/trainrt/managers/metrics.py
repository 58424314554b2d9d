"""Metrics manager: per-step diagnostic values averaged over each episode, published as ``Metrics/<name>``.

Metrics never enter the reward; they say how a policy behaves (e.g. tracking error in m/s).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.managers.base import ManagerBase, check_term_value, resolve_term, stateful_terms
from trainrt.managers.env_protocol import ManagedEnv


@dataclass
class MetricTermCfg:
    """One metric term: ``func(env, **params) -> (num_envs,)``, averaged over each episode."""

    func: Callable[..., torch.Tensor] | type
    params: dict[str, Any] = field(default_factory=dict)


class MetricsManager(ManagerBase):
    """Accumulates per-episode sums of the metric terms and device totals of finished-episode means."""

    kind = "metric"

    @cold_path
    def __init__(self, cfg: dict[str, MetricTermCfg], env: ManagedEnv) -> None:
        super().__init__(env)
        self._keep_term_cfgs(cfg, MetricTermCfg)
        self._terms: list[tuple[int, Callable, dict[str, Any]]] = []
        for i, (name, term_cfg) in enumerate(cfg.items()):
            self._terms.append((i, *resolve_term("metric", name, term_cfg, env)))
        self._stateful = stateful_terms([fn for _, fn, _ in self._terms])
        n, m = env.num_envs, len(self._term_names)
        self.step_values = torch.zeros(n, m, device=env.device)
        """Metric values of the last step (num_envs, num_metrics)."""
        self.episode_sums = torch.zeros(n, m, device=env.device)
        """Per-metric sums over the running episode (num_envs, num_metrics)."""
        self._finished_mean_sum = torch.zeros(m, device=env.device)

    @cold_path
    def check_outputs(self) -> None:
        """Call every metric once: ``ValueError`` naming one that does not return finite (num_envs,) values."""
        for i, fn, params in self._terms:
            check_term_value("metric", self._term_names[i], fn(self._env, **params), self._env.num_envs)

    def compute(self) -> None:
        """Evaluate the metrics for all rows and add them to the episode sums."""
        env = self._env
        for i, fn, params in self._terms:
            self.step_values[:, i] = fn(env, **params)
        self.episode_sums.add_(self.step_values)

    def record_episode_end(self, env_mask: torch.Tensor, episode_length: torch.Tensor) -> None:
        """Add the episode means of rows where ``env_mask`` (num_envs,) is True to the device totals."""
        means = self.episode_sums / episode_length.clamp(min=1).unsqueeze(1)
        self._finished_mean_sum.add_(torch.where(env_mask.unsqueeze(1), means, 0.0).sum(dim=0))

    def reset(self, env_mask: torch.Tensor) -> None:
        """Zero the episode sums of rows where ``env_mask`` (num_envs,) is True; reset stateful terms."""
        self.episode_sums.masked_fill_(env_mask.unsqueeze(1), 0.0)
        super().reset(env_mask)

    @cold_path
    def publish_episode_stats(self, finished_episodes: float) -> dict[str, float]:
        """Return ``Metrics/<name>`` (mean over finished episodes of the per-episode mean) and zero totals."""
        totals = self._finished_mean_sum.cpu().tolist()
        self._finished_mean_sum.zero_()
        if finished_episodes <= 0:
            return {}
        return {f"Metrics/{name}": v / finished_episodes for name, v in zip(self._term_names, totals)}
