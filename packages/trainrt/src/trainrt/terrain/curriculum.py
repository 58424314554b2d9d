"""A terrain curriculum: each env's difficulty level (tile row) and terrain column, moved on episode ends.

The rule is Isaac Lab's and mjlab's ``terrain_levels_vel``: at the end of an episode an env moves up a level
when it walked farther than half a tile side (it crossed to the tile's edge) and down a level when it walked
less than half of the distance its command asked for (``|v_cmd| * episode length``); otherwise it stays.
Levels are clamped to ``[0, num_levels - 1]`` at both ends: an env that masters the top level stays there
(Isaac Lab sends it to a random level instead; clamping keeps the rule deterministic and sync free). The
column (terrain type) never changes.

State is two fixed ``(num_envs,)`` int64 tensors on the env device, updated in place with ``torch.where``
on fixed-width boolean masks: ``update`` and ``origins`` never synchronize with the device.
"""

from __future__ import annotations

import torch

from trainrt.hotpath import cold_path


class TerrainCurriculum:
    """Per-env terrain level and column over a generated grid's tile origins.

    Args:
        origins: ``(num_levels, num_cols, 3)`` tile spawn points (``GeneratedTerrain.origins``).
        tile_size: a tile's side, meters (moving up needs more than half of it).
        num_envs: number of envs.
        max_init_level: initial levels are uniform in ``[0, max_init_level]`` (clamped to the top level).
        device: the env device.
        generator: a seeded ``torch.Generator`` (on the CPU) for the initial levels; None seeds one with 0.

    Columns are spread evenly: env ``k`` gets column ``floor(k * num_cols / num_envs)``.
    """

    @cold_path
    def __init__(
        self,
        origins: torch.Tensor,
        tile_size: float,
        num_envs: int,
        max_init_level: int = 0,
        device: torch.device | str = "cpu",
        generator: torch.Generator | None = None,
    ) -> None:
        if origins.ndim != 3 or origins.shape[-1] != 3:
            raise ValueError(f"origins must be (num_levels, num_cols, 3), got {tuple(origins.shape)}")
        if not (tile_size > 0):
            raise ValueError(f"tile_size must be > 0, got {tile_size!r}")
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs!r}")
        if max_init_level < 0:
            raise ValueError(f"max_init_level must be >= 0, got {max_init_level!r}")
        self.num_levels, self.num_cols = int(origins.shape[0]), int(origins.shape[1])
        self.num_envs, self.tile_size = num_envs, float(tile_size)
        self.device = torch.device(device)
        self.table = origins.to(device=self.device, dtype=torch.float32).clone()
        if generator is None:
            generator = torch.Generator().manual_seed(0)
        top = min(max_init_level, self.num_levels - 1)
        self.levels = torch.randint(0, top + 1, (num_envs,), generator=generator).to(self.device)
        self.columns = torch.div(torch.arange(num_envs) * self.num_cols, num_envs, rounding_mode="floor").to(
            self.device
        )

    def update(
        self, env_mask: torch.Tensor, walked_distance: torch.Tensor, commanded_distance: torch.Tensor
    ) -> None:
        """Move the envs of ``env_mask`` up or down a level (see the module docstring); others stay.

        Args:
            env_mask: ``(num_envs,)`` bool, the envs whose episodes end now.
            walked_distance: ``(num_envs,)`` distance each env's base got from its spawn origin, meters.
            commanded_distance: ``(num_envs,)`` distance its command asked for over the episode, meters.
        """
        up = walked_distance > 0.5 * self.tile_size
        down = (walked_distance < 0.5 * commanded_distance) & ~up
        step = up.long() - down.long()
        moved = torch.clamp(self.levels + step, 0, self.num_levels - 1)
        self.levels.copy_(torch.where(env_mask, moved, self.levels))

    def origins(
        self, env_mask: torch.Tensor | None = None, fallback: torch.Tensor | None = None
    ) -> torch.Tensor:
        """``(num_envs, 3)`` each env's spawn origin (its level's and column's tile centre).

        With ``env_mask``, rows outside it take ``fallback`` (``(num_envs, 3)``; zeros when None).
        """
        out = self.table[self.levels, self.columns]
        if env_mask is None:
            return out
        if fallback is None:
            fallback = torch.zeros_like(out)
        return torch.where(env_mask[:, None], out, fallback)

    def level_distribution(self) -> torch.Tensor:
        """``(num_levels,)`` float32: the fraction of envs at each level (sums to 1)."""
        return torch.nn.functional.one_hot(self.levels, self.num_levels).float().mean(dim=0)

    def mean_level(self) -> torch.Tensor:
        """0-d float32 tensor: the mean level over envs (a tensor: reading it is the caller's sync)."""
        return self.levels.float().mean()
