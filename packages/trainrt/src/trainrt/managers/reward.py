"""Reward manager: reward = sum over terms of ``weight * term(env) * step_dt``, with per-term episode sums."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.managers.base import ManagerBase, callable_name, check_term_value, resolve_term, stateful_terms
from trainrt.managers.env_protocol import ManagedEnv


@dataclass
class RewardTermCfg:
    """One reward term: ``func(env, **params) -> (num_envs,)`` scaled by ``weight`` and the control step."""

    func: Callable[..., torch.Tensor] | type
    weight: float
    params: dict[str, Any] = field(default_factory=dict)


class RewardManager(ManagerBase):
    """Weighted, dt-scaled reward with per-term episode sums kept on the device.

    Terms with weight 0 are listed but never evaluated.
    """

    kind = "reward"

    @cold_path
    def __init__(self, cfg: dict[str, RewardTermCfg], env: ManagedEnv) -> None:
        super().__init__(env)
        self._keep_term_cfgs(cfg, RewardTermCfg)
        self._evaluated: list[tuple[int, Callable, dict[str, Any], float]] = []
        fns = []
        for i, (name, term_cfg) in enumerate(cfg.items()):
            weight = term_cfg.weight
            if isinstance(weight, bool) or not isinstance(weight, int | float) or not math.isfinite(weight):
                raise ValueError(f"reward term {name!r}: weight must be a finite number, got {weight!r}")
            fn, params = resolve_term("reward", name, term_cfg, env)
            fns.append(fn)
            if term_cfg.weight != 0.0:
                self._evaluated.append((i, fn, params, float(term_cfg.weight)))
        self._stateful = stateful_terms(fns)
        n, t = env.num_envs, len(self._term_names)
        self.reward = torch.zeros(n, device=env.device)
        """Total reward of the last step (num_envs,)."""
        self.step_reward = torch.zeros(n, t, device=env.device)
        """Weighted, dt-scaled contribution of each term in the last step (num_envs, num_terms)."""
        self.episode_sums = torch.zeros(n, t, device=env.device)
        """Per-term return of the running episode (num_envs, num_terms)."""
        self._finished_return_sum = torch.zeros(t, device=env.device)
        # The evaluated terms' values are stacked and scaled in one multiply (weight * dt per column, the same
        # float32 factor a per-term scalar multiply uses) instead of a multiply and a column write per term.
        columns = [i for i, *_ in self._evaluated]
        self._writes_every_column = columns == list(range(t))
        self._columns = torch.tensor(columns, dtype=torch.long, device=env.device)
        self._scales_dt: float | None = None
        self._scales = torch.zeros(len(columns), device=env.device)
        self._set_scales(env.step_dt)

    @cold_path
    def _set_scales(self, dt: float) -> None:
        """Per-column factors ``weight * dt`` of the evaluated terms (num_evaluated,)."""
        factors = [weight * dt for *_, weight in self._evaluated]
        self._scales.copy_(torch.tensor(factors, dtype=torch.float32))
        self._scales_dt = dt

    @cold_path
    def check_outputs(self) -> None:
        """Call every weighted term once: ``ValueError`` naming a term that does not return finite (num_envs,)."""
        for i, fn, params, _ in self._evaluated:
            check_term_value("reward", self._term_names[i], fn(self._env, **params), self._env.num_envs)

    def compute(self, dt: float) -> torch.Tensor:
        """Evaluate the terms for all rows and return the total reward (num_envs,) (a persistent buffer)."""
        env = self._env
        if dt != self._scales_dt:
            self._set_scales(dt)
        if self._evaluated:
            values = torch.stack([fn(env, **params) for _, fn, params, _ in self._evaluated], dim=1)
            if self._writes_every_column:
                torch.mul(values, self._scales, out=self.step_reward)
            else:
                self.step_reward[:, self._columns] = values * self._scales
        torch.sum(self.step_reward, dim=1, out=self.reward)
        self.episode_sums.add_(self.step_reward)
        return self.reward

    def record_episode_end(self, env_mask: torch.Tensor) -> None:
        """Add the per-term returns of rows where ``env_mask`` (num_envs,) is True to the device totals."""
        self._finished_return_sum.add_(torch.where(env_mask.unsqueeze(1), self.episode_sums, 0.0).sum(dim=0))

    def reset(self, env_mask: torch.Tensor) -> None:
        """Zero the episode sums of rows where ``env_mask`` (num_envs,) is True; reset stateful terms."""
        self.episode_sums.masked_fill_(env_mask.unsqueeze(1), 0.0)
        super().reset(env_mask)

    @cold_path
    def publish_episode_stats(self, finished_episodes: float) -> dict[str, float]:
        """Return ``Episode/rew_<term>`` (mean return per finished episode) and zero the totals."""
        totals = self._finished_return_sum.cpu().tolist()
        self._finished_return_sum.zero_()
        if finished_episodes <= 0:
            return {}
        return {
            f"Episode/rew_{name}": value / finished_episodes for name, value in zip(self._term_names, totals)
        }

    @cold_path
    def _table_header(self) -> list[str]:
        return ["index", "name", "func", "weight"]

    @cold_path
    def _table_rows(self) -> list[list[Any]]:
        return [[i, n, callable_name(c.func), c.weight] for i, (n, c) in enumerate(self._cfgs.items())]
