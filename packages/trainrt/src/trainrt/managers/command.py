"""Command manager: command terms (velocity targets, motion references...) with per-row resampling timers.

Each step a term's timers count down by ``step_dt``; rows whose timer expired get a new command
(``_resample(env_mask)``) and a new timer drawn from ``resampling_time_range_s``; then ``_update()`` runs for
all rows. A reset resamples the rows that start an episode. The env resets commands before the reset events
run, so a reset event (or the term itself, through ``env.reset_payload``) can start the episode from the
freshly sampled command, e.g. the reference state of a motion clip at the sampled time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from trainrt.hotpath import cold_path
from trainrt.managers.base import ManagerBase, callable_name, merge_term_params

if TYPE_CHECKING:
    from trainrt.envs.manager_based_rl_env import ManagerBasedRlEnv


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
    """Base of command terms. Subclasses implement ``command``, ``_resample`` and optionally ``_update``.

    ``_resample(env_mask)`` must change only the rows where ``env_mask`` (num_envs,) is True and draw every
    random number from ``self.env.rng``. Parameters are declared in ``PARAMS`` and read from ``self.params``.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {}
    """Declared parameters: name -> default (``REQUIRED`` for none)."""

    @cold_path
    def __init__(self, cfg: CommandTermCfg, env: ManagerBasedRlEnv) -> None:
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

    def _resample(self, env_mask: torch.Tensor) -> None:
        """Draw new commands for rows where ``env_mask`` (num_envs,) is True."""
        raise NotImplementedError(f"{type(self).__name__} must implement _resample")

    def _update(self) -> None:
        """Per-step update for all rows after resampling (default: nothing)."""

    def _resample_rows(self, env_mask: torch.Tensor) -> None:
        self._time_draw.uniform_(self._time_low, self._time_low + self._time_span, generator=self.env.rng)
        self.time_left.copy_(torch.where(env_mask, self._time_draw, self.time_left))
        self._resample(env_mask)

    def compute(self, dt: float) -> None:
        """Count the timers down by ``dt``, resample expired rows, then update all rows."""
        self.time_left.sub_(dt)
        torch.le(self.time_left, 1e-6, out=self.resampled)
        self._resample_rows(self.resampled)
        self._update()

    def reset(self, env_mask: torch.Tensor) -> None:
        """Resample command and timer for rows where ``env_mask`` (num_envs,) is True."""
        self._resample_rows(env_mask)


class CommandManager(ManagerBase):
    """Owns the command terms; ``command(name)`` returns a term's current command (num_envs, D)."""

    kind = "command"

    @cold_path
    def __init__(self, cfg: dict[str, CommandTermCfg], env: ManagerBasedRlEnv) -> None:
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
        """Advance every term by ``dt`` seconds (timers, resampling, per-step update)."""
        for term in self._terms.values():
            term.compute(dt)

    def reset(self, env_mask: torch.Tensor) -> None:
        """Resample the rows where ``env_mask`` (num_envs,) is True in every term."""
        for term in self._terms.values():
            term.reset(env_mask)

    @cold_path
    def _table_header(self) -> list[str]:
        return ["index", "name", "class", "dim", "resampling_s"]

    @cold_path
    def _table_rows(self) -> list[list[Any]]:
        return [
            [i, n, callable_name(c.cls), self._terms[n].command.shape[-1], c.resampling_time_range_s]
            for i, (n, c) in enumerate(self._cfgs.items())
        ]
