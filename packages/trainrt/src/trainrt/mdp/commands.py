"""Command terms: a uniform base-velocity command with heading control and standing rows, and a gait clock.

Both draw every random number from ``env.rng`` for all rows and keep the draws of the rows being resampled
(``torch.where`` on the row mask), so shapes never depend on how many rows resample. Their draws stand apart
from their math (``_draw_``, ``_resample_drawn``), so the env can run that math compiled.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar

import torch

from trainrt.compiled import where_into
from trainrt.hotpath import cold_path
from trainrt.managers import CommandTerm, CommandTermCfg
from trainrt.mdp.math import wrap_to_pi

if TYPE_CHECKING:
    from trainrt.envs import ManagerBasedRlEnv


@cold_path
def _check_range(owner: str, name: str, value: Any) -> tuple[float, float]:
    low, high = (float(v) for v in value)
    if not (math.isfinite(low) and math.isfinite(high) and low <= high):
        raise ValueError(f"{owner}: {name} must be a finite (low, high) with low <= high, got {value!r}")
    return low, high


class UniformVelocityCommand(CommandTerm):
    """Base-velocity targets ``(vx, vy, wz)`` in the root frame (num_envs, 3), resampled on a per-row timer.

    Params:
        lin_vel_x, lin_vel_y: ranges (m/s) of the forward and lateral velocity.
        ang_vel_z: range (rad/s) of the yaw rate, also the clamp of the heading controller.
        heading: range (rad) of the target heading of heading-controlled rows.
        rel_heading_envs: fraction of resampled rows whose yaw rate follows a target heading,
            ``wz = clamp(heading_stiffness * wrap(heading_target - heading))``, recomputed every step.
        rel_standing_envs: fraction of resampled rows commanded to stand still (all zero).
        heading_stiffness: gain of the heading controller (1/s).
    """

    PARAMS: ClassVar[dict[str, Any]] = {
        "lin_vel_x": (-1.0, 1.0),
        "lin_vel_y": (-0.5, 0.5),
        "ang_vel_z": (-1.0, 1.0),
        "heading": (-math.pi, math.pi),
        "rel_heading_envs": 0.25,
        "rel_standing_envs": 0.1,
        "heading_stiffness": 0.5,
    }

    @cold_path
    def __init__(self, cfg: CommandTermCfg, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        owner = type(self).__name__
        p = self.params
        ranges = [_check_range(owner, k, p[k]) for k in ("lin_vel_x", "lin_vel_y", "ang_vel_z", "heading")]
        for key in ("rel_heading_envs", "rel_standing_envs"):
            if not 0.0 <= float(p[key]) <= 1.0:
                raise ValueError(f"{owner}: {key} must lie in [0, 1], got {p[key]!r}")
        dev = env.device
        self._low = torch.tensor([r[0] for r in ranges], device=dev)
        self._span = torch.tensor([r[1] - r[0] for r in ranges], device=dev)
        self._wz_low, self._wz_high = ranges[2]
        self._rel_heading = float(p["rel_heading_envs"])
        self._rel_standing = float(p["rel_standing_envs"])
        self._stiffness = float(p["heading_stiffness"])
        self._kind_thresholds = torch.tensor([self._rel_heading, self._rel_standing], device=dev)
        n = env.num_envs
        # The float state and the row kinds each live in one buffer (the public tensors are views of them),
        # so a resample writes each with one select instead of one per quantity.
        self._targets = torch.zeros(n, 4, device=dev)
        self._kinds = torch.zeros(n, 2, dtype=torch.bool, device=dev)
        self.vel_command_b = self._targets[:, :3]
        """Commanded ``(vx, vy, wz)`` in the root frame (num_envs, 3)."""
        self.heading_target = self._targets[:, 3]
        """Target heading of heading-controlled rows (num_envs,) rad."""
        self.is_heading_env = self._kinds[:, 0]
        """Rows whose yaw rate follows ``heading_target`` (num_envs,)."""
        self.is_standing_env = self._kinds[:, 1]
        """Rows commanded to stand still (num_envs,)."""
        self._draw = torch.zeros(n, 6, device=dev)

    @property
    def command(self) -> torch.Tensor:
        """The commanded ``(vx, vy, wz)`` (num_envs, 3)."""
        return self.vel_command_b

    def _draw_(self, generator: torch.Generator) -> None:
        """Draw the velocities, heading target and row kind of every row."""
        self._draw.uniform_(0.0, 1.0, generator=generator)

    def _resample_drawn(self, env_mask: torch.Tensor) -> None:
        """New velocities, heading target and row kind for rows where ``env_mask`` (num_envs,) is True."""
        values = self._low + self._span * self._draw[:, :4]
        kinds = self._draw[:, 4:] < self._kind_thresholds
        # standing rows observe a zero command from their first step, before any _update
        values[:, :3].masked_fill_(kinds[:, 1:], 0.0)
        rows = env_mask.unsqueeze(1)
        torch.where(rows, values, self._targets, out=self._targets)
        torch.where(rows, kinds, self._kinds, out=self._kinds)

    def _update(self) -> None:
        """Heading rows: yaw rate from the heading error; standing rows: zero command."""
        heading_error = wrap_to_pi(self.heading_target - self.env.robot.heading_w)
        wz = torch.clamp(self._stiffness * heading_error, self._wz_low, self._wz_high)
        where_into(self.is_heading_env, wz, self.vel_command_b[:, 2])
        self.vel_command_b.masked_fill_(self.is_standing_env.unsqueeze(1), 0.0)


def _foot_offsets(value: Any) -> tuple[float, ...]:
    """``value`` as a non-empty tuple of phase offsets in [0, 1); ValueError naming the bad value."""
    offsets = tuple(float(v) for v in value) if isinstance(value, (list, tuple)) else ()
    if not offsets or not all(0.0 <= v < 1.0 for v in offsets):
        raise ValueError(
            f"GaitPhaseCommand: foot_offsets must be a non-empty sequence of phases in [0, 1) (one per foot, "
            f"e.g. (0.0, 0.5) for a biped), got {value!r}"
        )
    return offsets


class GaitPhaseCommand(CommandTerm):
    """A per-row gait clock: phase in [0, 1) advancing by ``step_dt / period_s`` each step.

    The command is ``(sin 2 pi phase, cos 2 pi phase)`` (num_envs, 2). Foot ``i``'s phase is
    ``phase + foot_offsets[i]``: the default ``(0.0, 0.5)`` is a biped's alternating gait (left, right); a
    quadruped's trot is ``(0.0, 0.5, 0.5, 0.0)``. The phase is drawn uniformly when a row resets (use a
    resampling time beyond the episode length so it is never redrawn mid-episode).

    Params:
        period_s: duration of one gait cycle (s).
        foot_offsets: phase offset of each foot in [0, 1), in the gait clock's foot order (F,).
    """

    PARAMS: ClassVar[dict[str, Any]] = {"period_s": 0.8, "foot_offsets": (0.0, 0.5)}

    @cold_path
    def __init__(self, cfg: CommandTermCfg, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        p = self.params
        period = float(p["period_s"])
        if not (math.isfinite(period) and period > 0.0):
            raise ValueError(f"GaitPhaseCommand: period_s must be a positive number, got {p['period_s']!r}")
        self.period_s = period
        self.foot_offsets = _foot_offsets(p["foot_offsets"])
        """Phase offset of each foot (F,), in the gait clock's foot order."""
        self._phase_step = env.step_dt / period
        n = env.num_envs
        self.phase = torch.zeros(n, device=env.device)
        """Gait phase of the clock (num_envs,) in [0, 1): the phase of a foot with offset 0."""
        self._draw = torch.zeros(n, device=env.device)
        self._foot_offsets = torch.tensor(self.foot_offsets, device=env.device)
        self._sin_cos = torch.zeros(n, 2, device=env.device)

    @property
    def command(self) -> torch.Tensor:
        """``(sin, cos)`` of the phase angle (num_envs, 2), a persistent buffer rewritten on every read."""
        angle = 2.0 * math.pi * self.phase
        # one contiguous write (torch.compile cannot trace an op writing into a column view)
        torch.stack((torch.sin(angle), torch.cos(angle)), dim=1, out=self._sin_cos)
        return self._sin_cos

    @property
    def foot_phase(self) -> torch.Tensor:
        """Phase of each foot (num_envs, F) in [0, 1), in the gait clock's foot order."""
        return torch.remainder(self.phase.unsqueeze(1) + self._foot_offsets, 1.0)

    def _draw_(self, generator: torch.Generator) -> None:
        """Draw a uniform phase for every row."""
        self._draw.uniform_(0.0, 1.0, generator=generator)

    def _resample_drawn(self, env_mask: torch.Tensor) -> None:
        """The drawn phase for rows where ``env_mask`` (num_envs,) is True."""
        torch.where(env_mask, self._draw, self.phase, out=self.phase)

    def _update(self) -> None:
        """Advance every row's clock by one control step."""
        self.phase.add_(self._phase_step).remainder_(1.0)
