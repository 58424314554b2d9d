"""Shared machinery of the managers: term resolution, argument checks, stateful-term resets, summary tables.

A term is either a plain function or a class. A class is instantiated once as ``cls(cfg, env)`` and then
called like the function would be; if it has a ``reset(env_mask)`` method, its manager calls it with the
``(num_envs,)`` bool mask of the rows that start a new episode.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from trainrt.hotpath import cold_path

if TYPE_CHECKING:
    from trainrt.envs.manager_based_rl_env import ManagerBasedRlEnv


class ManagerTermBase:
    """Base class of stateful terms: built once with ``(cfg, env)``, called every step, reset per row."""

    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        self.cfg = cfg
        self.env = env
        self.num_envs = env.num_envs
        self.device = env.device

    def __call__(self, env: ManagerBasedRlEnv, **params: Any) -> torch.Tensor:
        """Evaluate the term for all rows."""
        raise NotImplementedError(f"{type(self).__name__} must implement __call__")

    def reset(self, env_mask: torch.Tensor) -> None:
        """Reset internal state of the rows where ``env_mask`` (num_envs,) is True (default: nothing)."""


@cold_path
def resolve_term(kind: str, name: str, cfg: Any, env: ManagerBasedRlEnv, leading_args: int = 1) -> Callable:
    """Return the callable for a term config: the function itself, or an instance of a term class.

    Checks that ``leading_args`` positional arguments (``env``, and ``env_mask`` for events) plus the
    configured ``params`` bind to the callable's signature, so a misspelled parameter fails at construction.
    """
    func = cfg.func
    if inspect.isclass(func):
        term = func(cfg, env)
        target = term.__call__
    elif callable(func):
        term = func
        target = func
    else:
        raise ValueError(f"{kind} term {name!r}: func must be a function or a class, got {func!r}")
    if not isinstance(cfg.params, dict):
        raise ValueError(f"{kind} term {name!r}: params must be a dict, got {type(cfg.params).__name__}")
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):  # builtins without a signature: nothing to check
        return term
    try:
        signature.bind(*([None] * leading_args), **cfg.params)
    except TypeError as err:
        raise ValueError(
            f"{kind} term {name!r}: params {sorted(cfg.params)} do not fit {getattr(func, '__name__', func)}"
            f"{signature}: {err}"
        ) from err
    return term


@cold_path
def merge_term_params(owner: str, params: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Merge a term's ``params`` over its ``defaults``; ValueError naming unknown keys and the valid set."""
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"{owner}: unknown params {unknown}; valid: {sorted(defaults)}")
    return {**defaults, **params}


@cold_path
def stateful_terms(terms: Sequence[Callable]) -> list[Any]:
    """Return the terms that carry per-row state (have a ``reset`` method)."""
    return [term for term in terms if callable(getattr(term, "reset", None))]


@cold_path
def format_table(title: str, header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Render a plain-text table with a title line, for the managers' ``__str__``."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(row: list[str]) -> str:
        return "| " + " | ".join(cell.ljust(w) for cell, w in zip(row, widths)) + " |"

    lines = [title, rule, line(cells[0]), rule, *(line(row) for row in cells[1:]), rule]
    return "\n".join(lines)


@cold_path
def callable_name(func: Any) -> str:
    """Return a readable name for a term function or class."""
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)


@cold_path
def index_or_slice(indices: list[int], device: torch.device) -> slice | torch.Tensor:
    """A contiguous ascending index list becomes a slice (a view, no gather), otherwise a device index tensor."""
    if indices and indices == list(range(indices[0], indices[0] + len(indices))):
        return slice(indices[0], indices[0] + len(indices))
    return torch.tensor(indices, dtype=torch.long, device=device)


def assign_columns_(target: torch.Tensor, columns: slice | torch.Tensor, values: torch.Tensor) -> None:
    """Write ``values`` (N, k) into ``target[:, columns]`` in place (slice copy or ``index_copy_``, no sync)."""
    if isinstance(columns, slice):
        target[:, columns] = values
    else:
        target.index_copy_(1, columns, values.to(target.dtype))


class ManagerBase:
    """Common surface of every manager: active term names, per-row reset of stateful terms, summary table."""

    kind: str = "manager"

    def __init__(self, env: ManagerBasedRlEnv) -> None:
        self._env = env
        self.num_envs = env.num_envs
        self.device = env.device
        self._term_names: list[str] = []
        self._stateful: list[Any] = []

    @property
    def active_terms(self) -> list[str]:
        """Names of the active terms, in evaluation order."""
        return list(self._term_names)

    def reset(self, env_mask: torch.Tensor) -> None:
        """Reset the stateful terms for rows where ``env_mask`` (num_envs,) is True."""
        for term in self._stateful:
            term.reset(env_mask)

    @cold_path
    def _table_header(self) -> list[str]:
        return ["index", "name"]

    @cold_path
    def _table_rows(self) -> list[list[Any]]:
        return [[i, name] for i, name in enumerate(self._term_names)]

    @cold_path
    def __str__(self) -> str:
        title = f"{type(self).__name__}: {len(self._term_names)} active {self.kind} terms"
        return format_table(title, self._table_header(), self._table_rows())
