"""Shared machinery of the managers: term resolution, argument checks, stateful-term resets, summary tables.

A term is either a plain function or a class. A class is instantiated once as ``cls(cfg, env)`` and then
called with the leading arguments only (``env``, and ``env_mask`` for events and curricula); if it has a
``reset(env_mask)`` method, its manager calls it with the ``(num_envs,)`` bool mask of the rows that start a
new episode.

Term parameters are declared once, in one of two places, and checked by one function
(``merge_term_params``):

- a function term declares them as its keyword parameters (a parameter without a default is required); its
  manager passes the merged params on every call;
- a class term (``ManagerTermBase``, ``CommandTerm``, ``ActionTerm``) declares them in the class variable
  ``PARAMS`` (name -> default, ``REQUIRED`` for none); the base class merges ``cfg.params`` over them into
  ``self.params`` at construction, and ``__call__`` takes no params.

``term_param_defaults(func)`` returns the declared set of either kind, for tools that check params before an
env exists (config overrides, docs).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Final

import torch

from trainrt.hotpath import cold_path
from trainrt.managers.env_protocol import ManagedEnv


class _Required:
    """Marker of a declared term parameter that has no default."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Final = _Required()
"""Default of a declared term parameter that the config must set."""


@cold_path
def term_param_defaults(func: Any, leading_args: int = 1) -> dict[str, Any]:
    """The parameters a term declares: name -> default, ``REQUIRED`` where it has none.

    A class declares them in ``PARAMS``; a function as its keyword parameters after the ``leading_args``
    positional ones (1: ``env``; 2: ``env, env_mask`` for event and curriculum terms).
    """
    if inspect.isclass(func):
        return dict(getattr(func, "PARAMS", {}))
    try:
        parameters = list(inspect.signature(func).parameters.values())[leading_args:]
    except (TypeError, ValueError) as err:  # builtins without a signature
        raise ValueError(f"term {func!r} has no inspectable signature to declare its params") from err
    declared = {}
    for p in parameters:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise ValueError(
                f"term {callable_name(func)}: parameter {p.name!r} must be a plain keyword parameter "
                "(no *args, **kwargs or positional-only) so its params can be checked"
            )
        declared[p.name] = REQUIRED if p.default is p.empty else p.default
    return declared


@cold_path
def term_param_names(func: Any, leading_args: int = 1) -> list[str]:
    """Names of the parameters a term declares (see ``term_param_defaults``), in declaration order."""
    return list(term_param_defaults(func, leading_args))


class ManagerTermBase:
    """Base class of stateful terms: built once with ``(cfg, env)``, called every step, reset per row.

    Subclasses declare their parameters in ``PARAMS`` and read them from ``self.params`` (merged and checked
    here); ``__call__`` takes only ``env`` (and ``env_mask`` for events).
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {}
    """Declared parameters: name -> default (``REQUIRED`` for none)."""

    @cold_path
    def __init__(self, cfg: Any, env: ManagedEnv) -> None:
        self.cfg = cfg
        self.env = env
        self.num_envs = env.num_envs
        self.device = env.device
        self.params = merge_term_params(type(self).__name__, cfg.params, self.PARAMS)
        """The term's parameters: ``cfg.params`` over the declared defaults."""

    def __call__(self, env: ManagedEnv) -> torch.Tensor:
        """Evaluate the term for all rows."""
        raise NotImplementedError(f"{type(self).__name__} must implement __call__")

    def reset(self, env_mask: torch.Tensor) -> None:
        """Reset internal state of the rows where ``env_mask`` (num_envs,) is True (default: nothing)."""


@cold_path
def resolve_term(
    kind: str, name: str, cfg: Any, env: ManagedEnv, leading_args: int = 1
) -> tuple[Callable, dict[str, Any]]:
    """Return the callable for a term config and the params its manager passes on every call.

    A function comes back with its params merged over its declared defaults; a class is instantiated (it
    checks and keeps its params itself) and comes back with no per-call params. Unknown or missing params
    fail here, at construction, with the valid set in the message.
    """
    func = cfg.func
    if not isinstance(cfg.params, dict):
        raise ValueError(f"{kind} term {name!r}: params must be a dict, got {type(cfg.params).__name__}")
    owner = f"{kind} term {name!r} ({callable_name(func)})"
    if inspect.isclass(func):
        merge_term_params(owner, cfg.params, term_param_defaults(func))  # also for classes off the bases
        term = func(cfg, env)
        params: dict[str, Any] = {}
        try:
            inspect.signature(term.__call__).bind(*([None] * leading_args))
        except TypeError as err:
            leading = "env, env_mask" if leading_args == 2 else "env"
            raise ValueError(
                f"{owner}: __call__ must take only ({leading}) and read its params from self.params: {err}"
            ) from err
        return term, params
    if not callable(func):
        raise ValueError(f"{kind} term {name!r}: func must be a function or a class, got {func!r}")
    _check_leading_parameters(owner, func, cfg.params, leading_args)
    return func, merge_term_params(owner, cfg.params, term_param_defaults(func, leading_args))


@cold_path
def _check_leading_parameters(owner: str, func: Any, params: Mapping[str, Any], leading_args: int) -> None:
    """``ValueError`` when a term function does not start with the ``leading_args`` positional parameters its
    manager passes (``env``; ``env, env_mask`` for events and curricula), e.g. its first one is a param."""
    try:
        first = list(inspect.signature(func).parameters.values())[:leading_args]
    except (TypeError, ValueError):
        return  # term_param_defaults names a callable without a signature
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(first) < leading_args or any(p.kind not in positional or p.name in params for p in first):
        leading = "env, env_mask" if leading_args == 2 else "env"
        starts = ", ".join(p.name for p in first) or "nothing"
        raise ValueError(
            f"{owner}: a term function takes ({leading}) first, then its params as keywords; it starts with "
            f"({starts})"
        )
    if leading_args == 2 and "mask" not in first[1].name.lower():
        # without this, (env, strength) would get the row mask as its strength and run
        raise ValueError(
            f"{owner}: its second parameter {first[1].name!r} would receive the rows to act on, a bool mask of "
            f"shape (num_envs,) (not row ids); write the function as (env, env_mask, ...) with its params after"
        )


@cold_path
def merge_term_params(owner: str, params: Mapping[str, Any], defaults: Mapping[str, Any]) -> dict[str, Any]:
    """Merge a term's ``params`` over its declared ``defaults``; the one check of every term's params.

    ValueError naming unknown keys and the valid set, or the declared parameters left ``REQUIRED``.
    """
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(f"{owner}: unknown params {unknown}; valid: {sorted(defaults)}")
    merged = {**defaults, **params}
    missing = [key for key, value in merged.items() if value is REQUIRED]
    if missing:
        raise ValueError(f"{owner}: missing required params {missing}; set them in the term's params")
    return merged


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

    def __init__(self, env: ManagedEnv) -> None:
        self._env = env
        self.num_envs = env.num_envs
        self.device = env.device
        self._cfgs: dict[str, Any] = {}
        self._term_names: list[str] = []
        self._stateful: list[Any] = []

    @cold_path
    def _keep_term_cfgs(self, cfg: Mapping[str, Any], cfg_type: type) -> None:
        """Keep the term configs in evaluation order; ``ValueError`` naming any entry not a ``cfg_type``."""
        article = "an" if cfg_type.__name__[0] in "AEIOU" else "a"
        for name, term_cfg in cfg.items():
            if not isinstance(term_cfg, cfg_type):
                raise ValueError(
                    f"{self.kind} term {name!r} must be {article} {cfg_type.__name__}, got {term_cfg!r}"
                )
        self._cfgs = dict(cfg)
        self._term_names = list(cfg)

    @property
    def active_terms(self) -> list[str]:
        """Names of the active terms, in evaluation order."""
        return list(self._term_names)

    def reset(self, env_mask: torch.Tensor) -> None:
        """Reset the stateful terms for rows where ``env_mask`` (num_envs,) is True."""
        for term in self._stateful:
            term.reset(env_mask)

    @cold_path
    def check_outputs(self) -> None:
        """Call the terms once and refuse outputs the manager cannot take (``ValueError`` naming the term); a
        manager whose terms return nothing to check passes."""

    @cold_path
    def _table_header(self) -> list[str]:
        return ["index", "name", "func"]

    @cold_path
    def _table_rows(self) -> list[list[Any]]:
        return [[i, n, callable_name(c.func)] for i, (n, c) in enumerate(self._cfgs.items())]

    @cold_path
    def __str__(self) -> str:
        title = f"{type(self).__name__}: {len(self._term_names)} active {self.kind} terms"
        return format_table(title, self._table_header(), self._table_rows())


@cold_path
def check_term_value(kind: str, name: str, value: Any, num_envs: int, *, flag: bool = False) -> None:
    """``ValueError`` naming the ``kind`` term ``name`` unless ``value`` is what such a term returns: a
    ``(num_envs,)`` tensor, bool when ``flag`` (terminations), finite otherwise."""
    want = "(num_envs,) bool tensor" if flag else "(num_envs,) tensor"
    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{kind} term {name!r} must return a {want}, got {type(value).__name__}")
    if tuple(value.shape) != (num_envs,):
        raise ValueError(
            f"{kind} term {name!r} must return a {want}, got shape {tuple(value.shape)} for {num_envs} envs "
            "(drop the trailing axis, e.g. .squeeze(-1), or reduce it, e.g. .sum(dim=-1))"
        )
    if flag and value.dtype != torch.bool:
        raise ValueError(
            f"{kind} term {name!r} must return a {want}, got {value.dtype} (compare, e.g. value > threshold, "
            "rather than let nonzero numbers count as true)"
        )
    if not flag:
        check_term_finite(kind, name, value)


@cold_path
def check_term_finite(kind: str, name: str, value: torch.Tensor) -> None:
    """``ValueError`` naming the ``kind`` term ``name`` when a floating-point ``value`` holds NaN or infinities
    (a synchronizing read: set-up checks only)."""
    if value.is_floating_point() and not bool(torch.isfinite(value).all()):
        raise ValueError(
            f"{kind} term {name!r} returned NaN or infinite values (checked after a reset and after one step)"
        )
