"""Event manager: ``startup`` (once, all rows), ``reset`` (rows starting an episode), ``interval`` (timers).

Reset and interval events are `EventTerm` classes with one draw protocol: ``draw_(generator)`` draws, for all
rows, every random number the next ``apply(env, env_mask)`` uses, and ``apply`` changes only the rows where
the mask is True, drawing nothing. The env makes all the draws of a step's resets and interval events first,
in a fixed order, and then runs the math, which may run compiled (``draw_reset_`` / ``apply_reset`` and so
on). Reset events write the env's reset payload (``env.reset_payload``); the env applies one reset
transaction per step afterwards. Interval events run every step with the mask of rows whose timer expired
(possibly none: shapes never change); each row's timer is drawn from ``interval_range_s`` with the env's
generator, and redrawn when it fires or the row resets. Startup events run once, at construction, and may
also be plain functions ``func(env, env_mask, **params)`` that draw as they run.

A reset or interval event that is a plain function, replaces ``EventTerm.__call__`` or lacks ``draw_`` /
``apply`` is refused when the env builds it. The manager bumps the env's state version after every event's
math (``StateCache.bump``), so a value derived from the state is never read stale after an event wrote it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.managers.base import ManagerBase, ManagerTermBase, callable_name, resolve_term, stateful_terms
from trainrt.managers.env_protocol import ManagedEnv

EVENT_MODES = ("startup", "reset", "interval")


@dataclass
class EventTermCfg:
    """One event: ``func(env, env_mask, **params)``, run in ``mode``; interval events need a time range."""

    func: Callable[..., Any] | type
    mode: str
    params: dict[str, Any] = field(default_factory=dict)
    interval_range_s: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        if self.mode not in EVENT_MODES:
            raise ValueError(f"EventTermCfg.mode must be one of {EVENT_MODES}, got {self.mode!r}")
        if self.mode == "interval":
            rng = self.interval_range_s
            if rng is None or len(rng) != 2 or not 0.0 < rng[0] <= rng[1]:
                raise ValueError(
                    f"interval events need interval_range_s=(low, high) with 0 < low <= high, got {rng}"
                )
        elif self.interval_range_s is not None:
            raise ValueError(f"interval_range_s is only valid for mode 'interval', not {self.mode!r}")


class EventTerm(ManagerTermBase):
    """Base of reset and interval events: their draws stand apart from their math.

    ``draw_(generator)`` draws, for all rows, every random number the next ``apply`` uses into persistent
    buffers; ``apply(env, env_mask)`` changes the rows where ``env_mask`` is True from them and draws nothing
    (no host logic on tensor values either, so it can run compiled). Calling the term does both.
    """

    def draw_(self, generator: torch.Generator) -> None:
        """Draw every random number of the next ``apply``, for all rows."""
        raise NotImplementedError(f"{type(self).__name__} must implement draw_")

    def apply(self, env: ManagedEnv, env_mask: torch.Tensor) -> None:
        """The event for rows where ``env_mask`` (num_envs,) is True, from the numbers ``draw_`` drew."""
        raise NotImplementedError(f"{type(self).__name__} must implement apply")

    def __call__(self, env: ManagedEnv, env_mask: torch.Tensor) -> None:
        """Draw, then apply, for rows where ``env_mask`` (num_envs,) is True."""
        self.draw_(env.rng)
        self.apply(env, env_mask)


@cold_path
def check_draw_protocol(name: str, mode: str, fn: Callable) -> None:
    """``TypeError`` naming the event and its class unless a reset or interval event follows the one draw
    protocol: an `EventTerm` implementing ``draw_`` and ``apply``, with ``__call__`` left to the base."""
    fix = (
        f"{mode} events are EventTerm classes implementing draw_(generator) (draw, for all rows, every random "
        "number the next apply uses, into persistent buffers) and apply(env, env_mask) (the math, drawing "
        "nothing)"
    )
    owner = f"event {name!r} ({callable_name(fn if not isinstance(fn, ManagerTermBase) else type(fn))})"
    if not isinstance(fn, EventTerm):
        raise TypeError(f"{owner} draws as it runs: {fix}")
    cls = type(fn)
    if cls.__call__ is not EventTerm.__call__:
        raise TypeError(
            f"{owner} overrides __call__, which the env no longer calls: {fix}; move its draws into draw_ and "
            "its math into apply"
        )
    missing = [m for m in ("draw_", "apply") if getattr(cls, m) is getattr(EventTerm, m)]
    if missing:
        raise TypeError(f"{owner} does not implement {' and '.join(missing)}: {fix}")


class _IntervalTimer:
    """Per-row countdown of one interval event (num_envs,) seconds."""

    def __init__(self, low: float, high: float, env: ManagedEnv) -> None:
        self.low, self.span = float(low), float(high - low)
        self.time_left = torch.zeros(env.num_envs, device=env.device)
        self.fired = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
        # One buffer for the reset's draw and one for the interval's: a step makes both draws before using either.
        self._draws = torch.zeros(2, env.num_envs, device=env.device)

    def draw_(self, generator: torch.Generator, at_reset: bool) -> None:
        """Draw a new interval for every row (`apply` keeps the masked ones), for the reset or the interval."""
        self._draws[int(at_reset)].uniform_(self.low, self.low + self.span, generator=generator)

    def apply(self, env_mask: torch.Tensor, at_reset: bool) -> None:
        """Take the interval `draw_` drew in rows where ``env_mask`` is True."""
        self.time_left.copy_(torch.where(env_mask, self._draws[int(at_reset)], self.time_left))

    @cold_path
    def redraw(self, env_mask: torch.Tensor, generator: torch.Generator, at_reset: bool) -> None:
        """Draw a new interval for rows where ``env_mask`` is True (the first timers, at construction)."""
        self.draw_(generator, at_reset)
        self.apply(env_mask, at_reset)


class EventManager(ManagerBase):
    """Runs startup, reset and interval events with fixed-shape row masks."""

    kind = "event"

    @cold_path
    def __init__(self, cfg: dict[str, EventTermCfg], env: ManagedEnv) -> None:
        super().__init__(env)
        self._keep_term_cfgs(cfg, EventTermCfg)
        self._by_mode: dict[str, list[tuple[str, Callable, dict[str, Any]]]] = {m: [] for m in EVENT_MODES}
        self._timers: list[_IntervalTimer] = []
        fns = []
        for name, term_cfg in cfg.items():
            fn, params = resolve_term("event", name, term_cfg, env, leading_args=2)
            if term_cfg.mode != "startup":
                check_draw_protocol(name, term_cfg.mode, fn)
            fns.append(fn)
            self._by_mode[term_cfg.mode].append((name, fn, params))
            if term_cfg.mode == "interval":
                low, high = term_cfg.interval_range_s  # type: ignore[misc]
                self._timers.append(_IntervalTimer(low, high, env))
        self._stateful = stateful_terms(fns)
        all_rows = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
        for timer in self._timers:
            timer.redraw(all_rows, env.rng, at_reset=True)

    def get_term(self, name: str) -> Callable:
        """Return the event callable ``name`` (the instance, for class terms)."""
        for terms in self._by_mode.values():
            for term_name, fn, _ in terms:
                if term_name == name:
                    return fn
        raise ValueError(f"no event term {name!r}; events: {self._term_names}")

    def mode_terms(self, mode: str) -> list[str]:
        """Names of the events of one mode."""
        return [name for name, _, _ in self._by_mode[mode]]

    @property
    def interval_time_left(self) -> list[torch.Tensor]:
        """Per-row seconds until each interval event fires, in config order: list of (num_envs,)."""
        return [timer.time_left for timer in self._timers]

    @cold_path
    def apply_startup(self) -> None:
        """Run the startup events once for all rows."""
        all_rows = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        for _, fn, params in self._by_mode["startup"]:
            fn(self._env, all_rows, **params)

    # Each operation as its draws (all rows, fixed shapes) and then its math. The env draws for the reset
    # (`draw_reset_`), runs the reset events' math, draws for the interval (`draw_interval_`), applies the reset
    # transaction, then runs the rest: no draw overwrites a buffer before its math has read it (each timer
    # keeps its reset and interval draws apart).

    def draw_reset_(self) -> None:
        """Every draw of `apply_reset`, then of `reset` (the timers)."""
        for _, fn, _ in self._by_mode["reset"]:
            fn.draw_(self._env.rng)
        for timer in self._timers:
            timer.draw_(self._env.rng, at_reset=True)

    def apply_reset(self, env_mask: torch.Tensor) -> None:
        """The reset events for rows where ``env_mask`` (num_envs,) is True, from the numbers `draw_reset_`
        drew (they fill the reset payload); the state version moves after each event."""
        for _, fn, params in self._by_mode["reset"]:
            fn.apply(self._env, env_mask, **params)
            self._env.state_cache.bump()

    def reset(self, env_mask: torch.Tensor) -> None:
        """The interval timers of rows where ``env_mask`` (num_envs,) is True take the intervals `draw_reset_`
        drew; stateful terms reset."""
        for timer in self._timers:
            timer.apply(env_mask, at_reset=True)
        super().reset(env_mask)

    def draw_interval_(self) -> None:
        """Every draw of `apply_interval`, event by event: its own, then its timer's."""
        for timer, (_, fn, _) in zip(self._timers, self._by_mode["interval"]):
            fn.draw_(self._env.rng)
            timer.draw_(self._env.rng, at_reset=False)

    def apply_interval(self, dt: float) -> None:
        """Advance the interval timers by ``dt`` seconds and run each event for the rows whose timer expired,
        from the numbers `draw_interval_` drew; the state version moves after each event."""
        env = self._env
        for timer, (_, fn, params) in zip(self._timers, self._by_mode["interval"]):
            timer.time_left.sub_(dt)
            torch.le(timer.time_left, 1e-6, out=timer.fired)
            fn.apply(env, timer.fired, **params)
            env.state_cache.bump()
            timer.apply(timer.fired, at_reset=False)

    @cold_path
    def _table_header(self) -> list[str]:
        return ["index", "name", "func", "mode", "interval_s"]

    @cold_path
    def _table_rows(self) -> list[list[Any]]:
        return [
            [i, n, callable_name(c.func), c.mode, c.interval_range_s or "-"]
            for i, (n, c) in enumerate(self._cfgs.items())
        ]
