"""Observation manager: groups of terms with per-term noise, clip, scale and optional history.

Per term and step: value -> noise (if the group enables corruption) -> clip -> scale -> history stack.
A term with ``history_length = H > 0`` contributes its last ``H`` processed frames, oldest first, flattened
to ``H * D`` columns; right after a reset the history of that row is filled with the first new frame.
Every group writes into buffers allocated once, so the returned tensors are the same objects every step.

The env computes observations twice per step (once before auto-reset for the final observation, once after),
so observation terms must be pure functions of the current state: per-step state (a gait clock, a motion
time) belongs in a command term's ``_update``, which runs once per step. Because they are pure, a term that
appears in several groups with the same function and params (a critic group repeating the policy's terms) is
evaluated once per compute; each group still applies its own noise, clip, scale and history to the value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from trainrt.compiled import CompiledOnFirstCall
from trainrt.hotpath import cold_path
from trainrt.managers.base import (
    ManagerBase,
    callable_name,
    check_term_finite,
    format_table,
    resolve_term,
    stateful_terms,
)
from trainrt.managers.env_protocol import ManagedEnv
from trainrt.managers.noise import NoiseCfg


@dataclass
class ObsTermCfg:
    """One observation term: ``func(env, **params) -> (num_envs, D)`` plus its processing."""

    func: Callable[..., torch.Tensor] | type
    params: dict[str, Any] = field(default_factory=dict)
    noise: NoiseCfg | None = None
    clip: tuple[float, float] | None = None
    scale: float | Sequence[float] | torch.Tensor | None = None
    history_length: int = 0

    def __post_init__(self) -> None:
        if self.history_length < 0:
            raise ValueError(f"ObsTermCfg.history_length must be >= 0, got {self.history_length}")
        if self.clip is not None and (len(self.clip) != 2 or not self.clip[0] <= self.clip[1]):
            raise ValueError(f"ObsTermCfg.clip must be (low, high) with low <= high, got {self.clip}")
        if self.noise is not None and not isinstance(self.noise, NoiseCfg):
            raise ValueError(f"ObsTermCfg.noise must be a NoiseCfg or None, got {self.noise!r}")


@dataclass
class ObsGroupCfg:
    """A named group of observation terms, concatenated into one ``(num_envs, D)`` tensor by default."""

    terms: dict[str, ObsTermCfg]
    enable_corruption: bool = True
    concatenate: bool = True


class _ObsTerm:
    """A resolved observation term with its preallocated buffers."""

    def __init__(
        self,
        name: str,
        cfg: ObsTermCfg,
        fn: Callable,
        params: dict[str, Any],
        frame_dim: int,
        env: ManagedEnv,
    ) -> None:
        n, device = env.num_envs, env.device
        self.name = name
        self.cfg = cfg
        self.fn = fn
        self.params = params
        self.frame_dim = frame_dim
        self.history_length = cfg.history_length
        self.out_dim = frame_dim * max(cfg.history_length, 1)
        self.noise = cfg.noise
        self.noise_scratch = torch.zeros(n, frame_dim, device=device) if cfg.noise is not None else None
        self.clip = cfg.clip
        self.scale: torch.Tensor | None = None
        if cfg.scale is not None:
            scale = torch.as_tensor(cfg.scale, dtype=torch.float32, device=device)
            if scale.ndim > 1 or (scale.ndim == 1 and scale.shape[0] != frame_dim):
                raise ValueError(
                    f"observation term {name!r}: scale shape {tuple(scale.shape)} != ({frame_dim},)"
                )
            self.scale = scale
        self.history = (
            torch.zeros(n, cfg.history_length, frame_dim, device=device) if cfg.history_length > 0 else None
        )
        self.source = 0
        """Index of this term's evaluation in the manager's shared sources (set by the manager)."""
        # Set per group once the output buffers exist: `out` is the term's slice of the group output, `frame`
        # its current processed frame (the output slice itself when there is no history).
        self.out: torch.Tensor = torch.empty(0)
        self.frame: torch.Tensor = torch.empty(0)


class _ObsGroup:
    """A resolved group: its terms and output buffer(s)."""

    def __init__(self, name: str, cfg: ObsGroupCfg, terms: list[_ObsTerm], env: ManagedEnv) -> None:
        n, device = env.num_envs, env.device
        self.name = name
        self.cfg = cfg
        self.terms = terms
        self.corrupt = cfg.enable_corruption
        self.dim = sum(t.out_dim for t in terms)
        self.buffer: torch.Tensor | dict[str, torch.Tensor]
        if cfg.concatenate:
            self.buffer = torch.zeros(n, self.dim, device=device)
            start = 0
            for term in terms:
                term.out = self.buffer[:, start : start + term.out_dim]
                start += term.out_dim
        else:
            self.buffer = {t.name: torch.zeros(n, t.out_dim, device=device) for t in terms}
            for term in terms:
                term.out = self.buffer[term.name]
        for term in terms:
            term.frame = term.out if term.history is None else torch.zeros(n, term.frame_dim, device=device)
        self.writes_in_one_copy = cfg.concatenate and len(terms) > 1 and all(t.history is None for t in terms)
        """Whether the raw values of all terms go into ``buffer`` with one concatenation (then each term's
        noise, clip and scale act on its slice, in term order): one copy instead of one per term."""


class ObservationManager(ManagerBase):
    """Computes the observation groups (e.g. ``policy``, ``critic``) into persistent float32 buffers."""

    kind = "observation"

    @cold_path
    def __init__(self, cfg: dict[str, ObsGroupCfg], env: ManagedEnv) -> None:
        super().__init__(env)
        if not cfg:
            raise ValueError("observations: at least one observation group (e.g. 'policy') is required")
        self._groups: dict[str, _ObsGroup] = {}
        fns: list[Callable] = []
        for group_name, group_cfg in cfg.items():
            if not isinstance(group_cfg, ObsGroupCfg):
                raise ValueError(
                    f"observation group {group_name!r} must be an ObsGroupCfg, got {group_cfg!r}"
                )
            if not group_cfg.terms:
                raise ValueError(f"observation group {group_name!r} has no terms")
            terms = []
            for term_name, term_cfg in group_cfg.terms.items():
                fn, params = resolve_term("observation", f"{group_name}/{term_name}", term_cfg, env)
                value = fn(env, **params)
                if not isinstance(value, torch.Tensor) or value.ndim == 0 or value.shape[0] != env.num_envs:
                    shape = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
                    raise ValueError(
                        f"observation term {group_name}/{term_name} must return (num_envs, D), got {shape}"
                    )
                frame_dim = int(value.reshape(env.num_envs, -1).shape[1])
                terms.append(_ObsTerm(term_name, term_cfg, fn, params, frame_dim, env))
                fns.append(fn)
            self._groups[group_name] = _ObsGroup(group_name, group_cfg, terms, env)
        self._sources = self._share_sources([t for g in self._groups.values() for t in g.terms])
        self._term_names = [f"{g}/{t.name}" for g, grp in self._groups.items() for t in grp.terms]
        self._stateful = stateful_terms(fns)
        # Rows whose history must be refilled with the next frame (all rows before the first compute).
        self._fresh = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
        self._has_history = any(t.history is not None for g in self._groups.values() for t in g.terms)
        self._obs: dict[str, torch.Tensor | dict[str, torch.Tensor]] = {
            name: group.buffer for name, group in self._groups.items()
        }
        # Noise is drawn apart from the frames (same draws, same order), so the frames can be compiled.
        self._noisy_terms = [
            t for g in self._groups.values() if g.corrupt for t in g.terms if t.noise is not None
        ]
        self._draws_apart = all(t.noise.draws_apart for t in self._noisy_terms)
        self.compiled_frames = CompiledOnFirstCall(self._compute_frames)
        """The frames' math (`_compute_frames`), eager until `compile`."""

    @staticmethod
    @cold_path
    def _share_sources(terms: list[_ObsTerm]) -> list[tuple[Callable, dict[str, Any]]]:
        """The distinct ``(fn, params)`` evaluations of ``terms``; sets each term's ``source`` index into them.

        Terms share an evaluation when they call the same function object with equal params (stateful term
        classes are instantiated per term, so they never share).
        """
        sources: list[tuple[Callable, dict[str, Any]]] = []
        for term in terms:
            term.source = next(
                (
                    i
                    for i, (fn, params) in enumerate(sources)
                    if fn is term.fn and _same_params(params, term.params)
                ),
                len(sources),
            )
            if term.source == len(sources):
                sources.append((term.fn, term.params))
        return sources

    @property
    def group_obs_dim(self) -> dict[str, int]:
        """Flattened width of each group: ``{group: D}``."""
        return {name: group.dim for name, group in self._groups.items()}

    @property
    def group_obs_term_dim(self) -> dict[str, dict[str, int]]:
        """Width of each term's contribution (including history): ``{group: {term: D}}``."""
        return {name: {t.name: t.out_dim for t in g.terms} for name, g in self._groups.items()}

    @property
    def buffers(self) -> dict[str, torch.Tensor | dict[str, torch.Tensor]]:
        """The persistent output buffers, as returned by :meth:`compute`."""
        return self._obs

    @cold_path
    def check_outputs(self) -> None:
        """Call every term once: ``ValueError`` naming a term whose values are not finite (before noise)."""
        for group_name, group in self._groups.items():
            for term in group.terms:
                check_term_finite(
                    "observation", f"{group_name}/{term.name}", term.fn(self._env, **term.params)
                )

    def compute(self, update_history: bool = True) -> dict[str, torch.Tensor | dict[str, torch.Tensor]]:
        """Compute every group for all rows into the persistent buffers and return them.

        With ``update_history=False`` the outputs include the current frame in each history stack but the
        stored history is left untouched (used for the pre-reset final observation).
        """
        if self._draws_apart:
            for term in self._noisy_terms:
                term.noise.draw_(term.noise_scratch, self._env.rng)
            if self.compiled_frames.compiled:
                # One compiled variant per call site at most: the flag matters only with history terms, and the
                # memo starts empty (its contents are a guard; `StateCache.forget`).
                update_history = update_history and self._has_history
                self._env.state_cache.forget()
            self.compiled_frames(update_history, False)
        else:
            self._compute_frames(update_history, True)
        return self._obs

    def _compute_frames(self, update_history: bool, draw_noise: bool) -> None:
        """Every group's frames, noise, clip, scale and history into the buffers. The noise is drawn here
        when ``draw_noise``, else it was drawn into each term's ``noise_scratch`` before (no random draws
        and no host logic on tensor values then, so `compile` can fuse it)."""
        env = self._env
        fresh = self._fresh.view(-1, 1, 1)
        values: list[torch.Tensor | None] = [None] * len(self._sources)

        def value_of(term: _ObsTerm) -> torch.Tensor:
            value = values[term.source]
            if value is None:
                fn, params = self._sources[term.source]
                value = values[term.source] = fn(env, **params)
            return value.reshape(self.num_envs, -1)

        for group in self._groups.values():
            if group.writes_in_one_copy:
                torch.cat([value_of(term) for term in group.terms], dim=1, out=group.buffer)
            for term in group.terms:
                if not group.writes_in_one_copy:
                    term.frame.copy_(value_of(term))
                if group.corrupt and term.noise is not None:
                    if draw_noise:
                        term.noise.add_(term.frame, term.noise_scratch, env.rng)
                    else:
                        term.frame.add_(term.noise_scratch)
                if term.clip is not None:
                    term.frame.clamp_(term.clip[0], term.clip[1])
                if term.scale is not None:
                    term.frame.mul_(term.scale)
                if term.history is not None:
                    newest = term.frame.unsqueeze(1)
                    stacked = torch.cat((term.history[:, 1:], newest), dim=1)
                    stacked = torch.where(fresh, newest.expand_as(stacked), stacked)
                    if update_history:
                        term.history.copy_(stacked)
                    term.out.copy_(stacked.reshape(self.num_envs, -1))
        if update_history and self._has_history:
            self._fresh.zero_()

    @cold_path
    def compile(self) -> bool:
        """Compile the frames' math (`CompiledOnFirstCall`); refused, with the reason recorded, when a noise
        term cannot draw apart from its add."""
        if not self._draws_apart:
            kinds = sorted({type(t.noise).__name__ for t in self._noisy_terms if not t.noise.draws_apart})
            self.compiled_frames.uncompile(f"observation noise {', '.join(kinds)} does not implement draw_")
            return False
        return self.compiled_frames.compile()

    @cold_path
    def uncompile(self, reason: str) -> None:
        """Compute the frames eagerly again, recording ``reason``."""
        self.compiled_frames.uncompile(reason)

    def reset(self, env_mask: torch.Tensor) -> None:
        """Mark the history of rows where ``env_mask`` (num_envs,) is True for refill; reset stateful terms."""
        if self._has_history:
            self._fresh.logical_or_(env_mask)
        super().reset(env_mask)

    @property
    def active_terms(self) -> dict[str, list[str]]:  # type: ignore[override]
        """Active term names per group."""
        return {name: [t.name for t in g.terms] for name, g in self._groups.items()}

    @cold_path
    def __str__(self) -> str:
        tables = []
        for name, group in self._groups.items():
            rows = []
            for i, t in enumerate(group.terms):
                noise = type(t.noise).__name__ if (t.noise is not None and group.corrupt) else "-"
                scale = "-" if t.cfg.scale is None else t.cfg.scale
                func = callable_name(t.cfg.func)
                rows.append(
                    [i, t.name, func, t.frame_dim, t.history_length or "-", noise, t.clip or "-", scale]
                )
            title = (
                f"ObservationManager group {name!r}: {len(group.terms)} terms, dim {group.dim}"
                f"{'' if group.cfg.concatenate else ' (not concatenated)'}"
            )
            header = ["index", "name", "func", "dim", "history", "noise", "clip", "scale"]
            tables.append(format_table(title, header, rows))
        return "\n".join(tables)


def _same_params(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two term param dicts are equal (values that do not compare to a plain bool count as different)."""
    if a is b:
        return True
    if a.keys() != b.keys():
        return False
    for key, value in a.items():
        other = b[key]
        if value is other:
            continue
        try:
            same = value == other
        except Exception:  # e.g. tensors of different shapes
            return False
        if not isinstance(same, bool) or not same:
            return False
    return True
