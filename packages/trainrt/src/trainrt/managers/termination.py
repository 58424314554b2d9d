"""Termination manager: failure terms -> ``failures``; ``time_out`` terms -> ``time_outs``, kept apart.

Learners bootstrap through a truncation but not through a failure, so the two never mix. The env turns these
into its step result: ``env.terminated`` is ``failures`` of the rows whose state is finite, ``truncated`` is
``time_outs`` plus the non-finite rows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.managers.base import ManagerBase, callable_name, check_term_value, resolve_term, stateful_terms
from trainrt.managers.env_protocol import ManagedEnv


@dataclass
class TerminationTermCfg:
    """One termination term: ``func(env, **params) -> (num_envs,)`` bool; ``time_out`` marks truncations."""

    func: Callable[..., torch.Tensor] | type
    params: dict[str, Any] = field(default_factory=dict)
    time_out: bool = False


class TerminationManager(ManagerBase):
    """Evaluates the termination terms into persistent bool buffers and counts causes of finished episodes."""

    kind = "termination"

    @cold_path
    def __init__(self, cfg: dict[str, TerminationTermCfg], env: ManagedEnv) -> None:
        super().__init__(env)
        self._keep_term_cfgs(cfg, TerminationTermCfg)
        self._terms: list[tuple[int, Callable, dict[str, Any]]] = []
        for i, (name, term_cfg) in enumerate(cfg.items()):
            self._terms.append((i, *resolve_term("termination", name, term_cfg, env)))
        self._stateful = stateful_terms([fn for _, fn, _ in self._terms])
        n, t, device = env.num_envs, len(self._term_names), env.device
        self._time_out_columns = torch.tensor(
            [c.time_out for c in cfg.values()], dtype=torch.bool, device=device
        )
        self._failure_columns = ~self._time_out_columns
        self.term_dones = torch.zeros(n, t, dtype=torch.bool, device=device)
        """Which term fired for each row in the last step (num_envs, num_terms)."""
        self.failures = torch.zeros(n, dtype=torch.bool, device=device)
        """Rows where a failure (non-time-out) term fired in the last step (num_envs,); the env's
        ``terminated`` is this restricted to finite rows."""
        self.time_outs = torch.zeros(n, dtype=torch.bool, device=device)
        """Time-out truncations of the last step (num_envs,)."""
        self.dones = torch.zeros(n, dtype=torch.bool, device=device)
        """``failures | time_outs`` (num_envs,)."""
        self._cause_counts = torch.zeros(t, device=device)

    @cold_path
    def check_outputs(self) -> None:
        """Call every term once: ``ValueError`` naming a term that does not return a (num_envs,) bool tensor."""
        for i, fn, params in self._terms:
            value = fn(self._env, **params)
            check_term_value("termination", self._term_names[i], value, self._env.num_envs, flag=True)

    def compute(self) -> torch.Tensor:
        """Evaluate all terms; return ``dones`` (num_envs,) bool (a persistent buffer)."""
        env = self._env
        if self._terms:  # one stacked write instead of one column write per term
            torch.stack(
                [fn(env, **params).to(torch.bool) for _, fn, params in self._terms], 1, out=self.term_dones
            )
        torch.any(self.term_dones & self._time_out_columns, dim=1, out=self.time_outs)
        torch.any(self.term_dones & self._failure_columns, dim=1, out=self.failures)
        torch.logical_or(self.failures, self.time_outs, out=self.dones)
        return self.dones

    def record_episode_end(self, env_mask: torch.Tensor) -> None:
        """Count, per term, the rows where ``env_mask`` (num_envs,) is True and the term fired."""
        self._cause_counts.add_((self.term_dones & env_mask.unsqueeze(1)).sum(dim=0))

    @cold_path
    def publish_episode_stats(self, finished_episodes: float) -> dict[str, float]:
        """Return ``Episode/term_<name>`` (fraction of finished episodes the term ended) and zero the counts."""
        counts = self._cause_counts.cpu().tolist()
        self._cause_counts.zero_()
        if finished_episodes <= 0:
            return {}
        return {f"Episode/term_{name}": c / finished_episodes for name, c in zip(self._term_names, counts)}

    @cold_path
    def _table_header(self) -> list[str]:
        return ["index", "name", "func", "time_out"]

    @cold_path
    def _table_rows(self) -> list[list[Any]]:
        return [[i, n, callable_name(c.func), c.time_out] for i, (n, c) in enumerate(self._cfgs.items())]
