"""Command manager: command terms (velocity targets, motion references...) with per-row resampling timers.

Each step a term's timers count down by ``step_dt``; rows whose timer expired get a new command and a new
timer drawn from ``resampling_time_range_s``; then ``_update()`` runs for all rows. A reset resamples the rows
that start an episode. The env resets commands before the reset events run, so a reset event (or the term
itself, through ``env.reset_payload``) can start the episode from the freshly sampled command, e.g. the
reference state of a motion clip at the sampled time.

One draw protocol: a term draws apart from its math. ``_draw_(generator)`` draws, for all rows, every random
number the next resample uses into persistent buffers; ``_resample_drawn(env_mask)`` is the math and draws
nothing. The env makes every draw of a step's resets and updates first, in a fixed order, then runs the math
(``draw_reset_`` / ``apply_reset``, ``draw_compute_`` / ``apply_compute``), which may run compiled. A term that
overrides ``_resample``, ``reset`` or ``compute`` (the entry points of the older inline form, which the env no
longer calls) or lacks ``_draw_`` / ``_resample_drawn`` is refused when the env builds it.

A term's math writes state other terms may read (a command, a reference frame), so the manager bumps the
env's state version after every term's math (``StateCache.bump``): no term marks the cache stale itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch

from trainrt.hotpath import cold_path
from trainrt.managers.base import ManagerBase, callable_name, merge_term_params
from trainrt.managers.env_protocol import ManagedEnv


@dataclass
class CommandTermCfg:
    """One command term: a ``CommandTerm`` subclass built as ``cls(cfg, env)``."""

    cls: type[CommandTerm]
    params: dict[str, Any] = field(default_factory=dict)
    resampling_time_range_s: tuple[float, float] = (10.0, 10.0)

    def __post_init__(self) -> None:
        rng = self.resampling_time_range_s
        if len(rng) != 2 or not 0.0 < rng[0] <= rng[1]:
            raise ValueError(f"resampling_time_range_s must be (low, high) with 0 < low <= high, got {rng}")


class CommandTerm:
    """Base of command terms. Subclasses implement ``command``, ``_draw_`` and ``_resample_drawn``, and
    optionally ``_update``.

    ``_draw_(generator)`` draws, for all rows, every random number the next ``_resample_drawn`` uses into
    persistent buffers (fixed shapes, whatever the mask). ``_resample_drawn(env_mask)`` changes only the rows
    where ``env_mask`` (num_envs,) is True, from those numbers, with no random draws and no host logic on
    tensor values, so it can run compiled; ``_update`` draws nothing either. A term with a different step (a
    motion clip sets its own pace) overrides ``draw_compute_`` and ``apply_compute`` together. Parameters are
    declared in ``PARAMS`` and read from ``self.params``.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {}
    """Declared parameters: name -> default (``REQUIRED`` for none)."""

    REMOVED_METHODS: ClassVar[tuple[str, ...]] = ("_resample", "reset", "compute")
    """Entry points of the older inline form: the env never calls a subclass's version, so overriding one
    is refused."""

    @cold_path
    def __init__(self, cfg: CommandTermCfg, env: ManagedEnv) -> None:
        check_draw_protocol(type(self))
        self.cfg = cfg
        self.env = env
        self.num_envs = env.num_envs
        self.device = env.device
        self.params = merge_term_params(type(self).__name__, cfg.params, self.PARAMS)
        """The term's parameters: ``cfg.params`` over the declared defaults."""
        low, high = cfg.resampling_time_range_s
        self._time_low, self._time_span = float(low), float(high - low)
        self.time_left = torch.zeros(env.num_envs, device=env.device)
        """Seconds until each row's next resample (num_envs,)."""
        self.resampled = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        """Rows resampled by the timer in the last ``compute`` (num_envs,)."""
        self._time_draw = torch.zeros(env.num_envs, device=env.device)

    @property
    def command(self) -> torch.Tensor:
        """The current command (num_envs, D)."""
        raise NotImplementedError(f"{type(self).__name__} must implement the command property")

    def _draw_(self, generator: torch.Generator) -> None:
        """Draw, for all rows, every random number the next ``_resample_drawn`` uses."""
        raise NotImplementedError(f"{type(self).__name__} must implement _draw_")

    def _resample_drawn(self, env_mask: torch.Tensor) -> None:
        """New commands for rows where ``env_mask`` (num_envs,) is True from the numbers ``_draw_`` drew;
        no random draws and no host logic on tensor values."""
        raise NotImplementedError(f"{type(self).__name__} must implement _resample_drawn")

    def resample(self, env_mask: torch.Tensor) -> None:
        """Draw from ``env.rng``, then new commands for rows where ``env_mask`` (num_envs,) is True (timers
        untouched)."""
        self._draw_(self.env.rng)
        self._resample_drawn(env_mask)

    def _update(self) -> None:
        """Per-step update for all rows after resampling (default: nothing)."""

    # A reset, and a step's update, each as its draws (all rows, fixed shapes) and then the math.

    def draw_reset_(self, generator: torch.Generator) -> None:
        """Every draw of ``reset``, in its order: the new timers, then the term's own."""
        self._draw_timers(generator)
        self._draw_(generator)

    def apply_reset(self, env_mask: torch.Tensor) -> None:
        """``reset``'s math from the numbers ``draw_reset_`` drew."""
        self._set_timers(env_mask)
        self._resample_drawn(env_mask)

    def draw_compute_(self, generator: torch.Generator) -> None:
        """Every draw of ``compute``, in its order (the same as a reset's: all rows draw, the timers pick)."""
        self.draw_reset_(generator)

    def apply_compute(self, dt: float) -> None:
        """``compute``'s math from the numbers ``draw_compute_`` drew."""
        self._count_down(dt)
        self.apply_reset(self.resampled)
        self._update()

    # The timers.

    def _draw_timers(self, generator: torch.Generator) -> None:
        """A new resampling time for every row into ``_time_draw``."""
        self._time_draw.uniform_(self._time_low, self._time_low + self._time_span, generator=generator)

    def _set_timers(self, env_mask: torch.Tensor) -> None:
        """Rows in ``env_mask`` take their drawn resampling time."""
        self.time_left.copy_(torch.where(env_mask, self._time_draw, self.time_left))

    def _count_down(self, dt: float) -> None:
        """Count the timers down by ``dt``; rows at zero go into ``resampled``."""
        self.time_left.sub_(dt)
        torch.le(self.time_left, 1e-6, out=self.resampled)

    def compute(self, dt: float) -> None:
        """Count the timers down by ``dt``, resample expired rows, then update all rows (draws first)."""
        self.draw_compute_(self.env.rng)
        self.apply_compute(dt)

    def reset(self, env_mask: torch.Tensor) -> None:
        """Resample command and timer for rows where ``env_mask`` (num_envs,) is True (draws first)."""
        self.draw_reset_(self.env.rng)
        self.apply_reset(env_mask)


@cold_path
def check_draw_protocol(cls: type[CommandTerm]) -> None:
    """``TypeError`` naming ``cls`` unless it follows the one draw protocol: ``_draw_`` and
    ``_resample_drawn`` implemented, none of `CommandTerm.REMOVED_METHODS` overridden."""
    fix = (
        "a command term implements _draw_(generator) (draw, for all rows, every random number the next "
        "resample uses, into persistent buffers) and _resample_drawn(env_mask) (the math, drawing nothing)"
    )
    overridden = [
        name
        for name in CommandTerm.REMOVED_METHODS
        if getattr(cls, name, None) is not getattr(CommandTerm, name, None)
    ]
    if overridden:
        raise TypeError(
            f"{cls.__name__} overrides {', '.join(overridden)}, which the env no longer calls: {fix}; move "
            "its draws into _draw_ and its math into _resample_drawn"
        )
    missing = [
        name for name in ("_draw_", "_resample_drawn") if getattr(cls, name) is getattr(CommandTerm, name)
    ]
    if missing:
        raise TypeError(f"{cls.__name__} does not implement {' and '.join(missing)}: {fix}")


class CommandManager(ManagerBase):
    """Owns the command terms; ``command(name)`` returns a term's current command (num_envs, D)."""

    kind = "command"

    @cold_path
    def __init__(self, cfg: dict[str, CommandTermCfg], env: ManagedEnv) -> None:
        super().__init__(env)
        self._keep_term_cfgs(cfg, CommandTermCfg)
        self._terms: dict[str, CommandTerm] = {}
        for name, term_cfg in cfg.items():
            if not (isinstance(term_cfg.cls, type) and issubclass(term_cfg.cls, CommandTerm)):
                raise ValueError(
                    f"command term {name!r}: cls must subclass CommandTerm, got {term_cfg.cls!r}"
                )
            self._terms[name] = term_cfg.cls(term_cfg, env)

    def command(self, name: str) -> torch.Tensor:
        """Return the current command of term ``name`` (num_envs, D)."""
        return self._terms[name].command

    def get_term(self, name: str) -> CommandTerm:
        """Return the command term object ``name``."""
        return self._terms[name]

    def compute(self, dt: float) -> None:
        """Advance every term by ``dt`` seconds (timers, resampling, per-step update): draws, then math."""
        self.draw_compute_()
        self.apply_compute(dt)

    def reset(self, env_mask: torch.Tensor) -> None:
        """Resample the rows where ``env_mask`` (num_envs,) is True in every term: draws, then math."""
        self.draw_reset_()
        self.apply_reset(env_mask)

    def draw_reset_(self) -> None:
        """Every draw of ``reset``, term by term, from the env's generator."""
        for term in self._terms.values():
            term.draw_reset_(self._env.rng)

    def apply_reset(self, env_mask: torch.Tensor) -> None:
        """``reset``'s math from the numbers `draw_reset_` drew; the state version moves after each term."""
        for term in self._terms.values():
            term.apply_reset(env_mask)
            self._env.state_cache.bump()

    def draw_compute_(self) -> None:
        """Every draw of ``compute``, term by term, from the env's generator."""
        for term in self._terms.values():
            term.draw_compute_(self._env.rng)

    def apply_compute(self, dt: float) -> None:
        """``compute``'s math from the numbers `draw_compute_` drew; the state version moves after each term."""
        for term in self._terms.values():
            term.apply_compute(dt)
            self._env.state_cache.bump()

    @cold_path
    def _table_header(self) -> list[str]:
        return ["index", "name", "class", "dim", "resampling_s"]

    @cold_path
    def _table_rows(self) -> list[list[Any]]:
        return [
            [i, n, callable_name(c.cls), self._terms[n].command.shape[-1], c.resampling_time_range_s]
            for i, (n, c) in enumerate(self._cfgs.items())
        ]
