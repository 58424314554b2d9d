"""Curriculum manager: terms that adapt the task as training progresses, evaluated in the reset path.

A curriculum function has the signature ``func(env, env_mask, **params)`` (``env_mask``: the ``(num_envs,)``
bool rows about to reset, possibly none) and returns ``None``, a scalar tensor, or a dict of scalar tensors
describing its state. Returned values are copied into device buffers and published as ``Curriculum/<name>``
(or ``Curriculum/<name>/<key>``) by :meth:`publish_state`. The env runs every term once at construction on no
rows, so the buffers exist (and a checkpoint's env state loads) before the first reset.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.managers.base import ManagerBase, resolve_term, stateful_terms
from trainrt.managers.env_protocol import ManagedEnv


@dataclass
class CurriculumTermCfg:
    """One curriculum term: ``func(env, env_mask, **params) -> None | scalar tensor | dict of them``."""

    func: Callable[..., Any] | type
    params: dict[str, Any] = field(default_factory=dict)


class CurriculumManager(ManagerBase):
    """Runs the curriculum terms for the rows about to reset and keeps their reported state on the device."""

    kind = "curriculum"

    @cold_path
    def __init__(self, cfg: dict[str, CurriculumTermCfg], env: ManagedEnv) -> None:
        super().__init__(env)
        self._keep_term_cfgs(cfg, CurriculumTermCfg)
        self._terms: list[tuple[str, Callable, dict[str, Any]]] = []
        for name, term_cfg in cfg.items():
            fn, params = resolve_term("curriculum", name, term_cfg, env, leading_args=2)
            self._terms.append((name, fn, params))
        self._stateful = stateful_terms([fn for _, fn, _ in self._terms])
        self._state: dict[str, torch.Tensor] = {}

    def compute(self, env_mask: torch.Tensor) -> None:
        """Run every term for the rows where ``env_mask`` (num_envs,) is True and store what they report."""
        for name, fn, params in self._terms:
            self._store(name, fn(self._env, env_mask, **params))

    def _store(self, name: str, value: Any) -> None:
        items = value.items() if isinstance(value, dict) else [(None, value)] if value is not None else []
        for key, tensor in items:
            tag = f"Curriculum/{name}" if key is None else f"Curriculum/{name}/{key}"
            if not isinstance(tensor, torch.Tensor) or tensor.numel() != 1 or tensor.device != self.device:
                # a Python number would be a host-to-device copy per reset, frozen into a captured graph
                raise ValueError(
                    f"curriculum term {name!r} must report scalar tensors on {self.device}, got {tensor!r}"
                )
            tensor = tensor.detach().to(torch.float32).reshape(())
            buffer = self._state.get(tag)
            if buffer is None:  # first call happens at the initial reset, before any graph capture
                self._state[tag] = tensor.detach().clone()
            else:
                buffer.copy_(tensor)

    @cold_path
    def publish_state(self) -> dict[str, float]:
        """Return the latest reported state of every term as ``Curriculum/...`` floats."""
        return {tag: float(value.cpu()) for tag, value in self._state.items()}
