"""One heightfield for a whole grid of terrain tiles, and where each tile's spawn point lies.

Layout (the heightfield's own: ``heights[r, c]``, rows along y, columns along x, ``horizontal_scale`` apart):
a flat border of ``border_cells`` samples, then ``num_rows`` x ``num_cols`` tiles of ``tile_cells`` samples a
side, then the border again and one closing sample. Tile row ``i`` (its difficulty level) runs along y, tile
column ``j`` (its terrain type) along x. A tile's sample ``(a, b)`` lies ``(b, a) * horizontal_scale`` from its
corner, so its first row and column are its edge and its sample ``(tile_cells // 2, tile_cells // 2)`` its
centre. The field is centred on the world origin at height 0.

Tile functions are small pure functions ``fn(cfg, difficulty, cells, horizontal_scale, generator)`` returning
``(cells, cells)`` float32 heights in meters, registered by their cfg's ``kind`` in ``TERRAIN_FUNCTIONS``. The
generator rounds their heights to ``vertical_scale``. Every random draw comes from one ``torch.Generator``
seeded with ``cfg.seed`` (0 when None), in a fixed order (rows, then columns), so a seed gives one terrain.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

import simcore
from trainrt.terrain.cfg import (
    DiscreteBoxesCfg,
    FlatCfg,
    PyramidSlopeCfg,
    PyramidStairsCfg,
    RandomRoughCfg,
    SubTerrainCfg,
    TerrainGridCfg,
)

TileFn = Callable[[SubTerrainCfg, float, int, float, torch.Generator], torch.Tensor]


def _lerp(value_range: tuple[float, float], difficulty: float) -> float:
    return value_range[0] + difficulty * (value_range[1] - value_range[0])


def _edge_distance_cells(cells: int) -> torch.Tensor:
    """``(cells, cells)`` int: each sample's distance in samples to the nearest tile edge (Chebyshev rings)."""
    idx = torch.arange(cells)
    to_edge = torch.minimum(idx, cells - idx)
    return torch.minimum(to_edge[:, None], to_edge[None, :])


def flat_tile(cfg: FlatCfg, difficulty: float, cells: int, hs: float, gen: torch.Generator) -> torch.Tensor:
    """Flat ground: zeros at every difficulty."""
    return torch.zeros(cells, cells)


def random_rough_tile(
    cfg: RandomRoughCfg, difficulty: float, cells: int, hs: float, gen: torch.Generator
) -> torch.Tensor:
    """Uniform noise: every sample ``noise_range[0] + k * noise_step`` for a uniform ``k``, within the range.

    The difficulty does not change it (Isaac Lab's random uniform terrain neither).
    """
    low, high = cfg.noise_range
    levels = math.floor((high - low) / cfg.noise_step + 1e-9) + 1
    k = torch.randint(0, levels, (cells, cells), generator=gen)
    return (low + k.to(torch.float64) * cfg.noise_step).to(torch.float32)


def pyramid_slope_tile(
    cfg: PyramidSlopeCfg, difficulty: float, cells: int, hs: float, gen: torch.Generator
) -> torch.Tensor:
    """A pyramid of slope ``lerp(slope_range, difficulty)`` rising from 0 at the tile's edge.

    The height at distance ``e`` from the edge is ``slope * min(e, (size - platform_width) / 2)``: a flat
    top ``platform_width`` wide at ``slope * (size - platform_width) / 2`` (``slope * size / 2`` without a
    platform). ``inverted``: the same pit, negative.
    """
    slope = _lerp(cfg.slope_range, difficulty)
    size = cells * hs
    run = max(0.0, (size - cfg.platform_width) / 2)
    dist = _edge_distance_cells(cells).to(torch.float64) * hs
    heights = slope * torch.clamp(dist, max=run)
    return (-heights if cfg.inverted else heights).to(torch.float32)


def pyramid_stairs_tile(
    cfg: PyramidStairsCfg, difficulty: float, cells: int, hs: float, gen: torch.Generator
) -> torch.Tensor:
    """Square rings of steps ``step_width`` wide, each ``lerp(step_height_range, difficulty)`` higher.

    The outer ring (at the tile's edge) is at 0; the steps stop where a flat centre at least
    ``platform_width`` wide remains. ``inverted``: the steps go down.
    """
    step_height = _lerp(cfg.step_height_range, difficulty)
    size = cells * hs
    max_steps = max(0, math.floor((size - cfg.platform_width) / 2 / cfg.step_width + 1e-9))
    step_cells = cfg.step_width / hs
    ring = torch.floor(_edge_distance_cells(cells).to(torch.float64) / step_cells + 1e-9)
    heights = step_height * torch.clamp(ring, max=max_steps)
    return (-heights if cfg.inverted else heights).to(torch.float32)


def discrete_boxes_tile(
    cfg: DiscreteBoxesCfg, difficulty: float, cells: int, hs: float, gen: torch.Generator
) -> torch.Tensor:
    """``num_boxes`` square boxes at random places, each raised or sunk by ``lerp(height_range, difficulty)``.

    Sides from ``width_range`` (at least one sample); later boxes overwrite earlier ones; the centre square
    ``platform_width`` wide stays at 0.
    """
    height = _lerp(cfg.height_range, difficulty)
    heights = torch.zeros(cells, cells)
    for _ in range(cfg.num_boxes):
        width = _lerp(cfg.width_range, float(torch.rand((), generator=gen)))
        side = min(cells, max(1, round(width / hs)))
        r0, c0 = (int(v) for v in torch.randint(0, cells - side + 1, (2,), generator=gen))
        sign = 1.0 if int(torch.randint(0, 2, (), generator=gen)) else -1.0
        heights[r0 : r0 + side, c0 : c0 + side] = sign * height
    half = cfg.platform_width / 2 / hs
    centre = cells // 2
    lo, hi = max(0, math.floor(centre - half)), min(cells, math.ceil(centre + half) + 1)
    heights[lo:hi, lo:hi] = 0.0
    return heights


TERRAIN_FUNCTIONS: dict[str, TileFn] = {
    FlatCfg.kind: flat_tile,
    RandomRoughCfg.kind: random_rough_tile,
    PyramidSlopeCfg.kind: pyramid_slope_tile,
    PyramidStairsCfg.kind: pyramid_stairs_tile,
    DiscreteBoxesCfg.kind: discrete_boxes_tile,
}
"""Terrain type table: a type cfg's ``kind`` -> the tile function that draws it."""


@dataclass(frozen=True)
class GeneratedTerrain:
    """A generated grid.

    Attributes:
        heights: ``(nrow, ncol)`` float32 heights in meters (``cfg.shape``), on the CPU.
        origins: ``(num_rows, num_cols, 3)`` float32 world spawn points: each tile's centre sample, on its
            surface.
        difficulties: ``(num_rows,)`` float32 difficulty each row was drawn at.
        column_types: terrain type name of each column.
        heightfield: the ``simcore.Heightfield`` to load into the scene (centred on the world origin).
        cfg: the grid cfg it came from.
    """

    heights: torch.Tensor
    origins: torch.Tensor
    difficulties: torch.Tensor
    column_types: tuple[str, ...]
    heightfield: simcore.Heightfield
    cfg: TerrainGridCfg


def column_types(cfg: TerrainGridCfg) -> tuple[str, ...]:
    """Each column's type: column ``j`` takes the first type whose cumulative share reaches ``(j + 0.5) / n``."""
    names = list(cfg.types)
    total = sum(cfg.types[n].proportion for n in names)
    cumulative, acc = [], 0.0
    for name in names:
        acc += cfg.types[name].proportion / total
        cumulative.append(acc)
    out = []
    for j in range(cfg.num_cols):
        at = (j + 0.5) / cfg.num_cols
        k = next((i for i, c in enumerate(cumulative) if c >= at), None)
        if k is None:  # rounding at the top: the last type with a positive proportion
            k = max(i for i, n in enumerate(names) if cfg.types[n].proportion > 0)
        out.append(names[k])
    return tuple(out)


def row_difficulties(cfg: TerrainGridCfg, gen: torch.Generator) -> torch.Tensor:
    """Row ``i``'s difficulty: ``(i + u) / num_rows`` with ``u`` uniform in [0, 1) (jitter on), else
    ``i / (num_rows - 1)`` (0 to 1; a single row at 1), mapped into ``cfg.difficulty_range``."""
    i = torch.arange(cfg.num_rows, dtype=torch.float32)
    if cfg.difficulty_jitter:
        unit = (i + torch.rand(cfg.num_rows, generator=gen)) / cfg.num_rows
    elif cfg.num_rows == 1:
        unit = torch.ones(1)
    else:
        unit = i / (cfg.num_rows - 1)
    low, high = cfg.difficulty_range
    return low + unit * (high - low)


def generate_terrain(
    cfg: TerrainGridCfg, name: str = "terrain", friction: float | None = None
) -> GeneratedTerrain:
    """Draw every tile of ``cfg`` into one heightfield; see the module docstring for the layout."""
    gen = torch.Generator().manual_seed(0 if cfg.seed is None else cfg.seed)
    tile, border, hs = cfg.tile_cells, cfg.border_cells, cfg.horizontal_scale
    nrow, ncol = cfg.shape
    heights = torch.zeros(nrow, ncol, dtype=torch.float32)
    types = column_types(cfg)
    difficulties = row_difficulties(cfg, gen)
    for i in range(cfg.num_rows):
        difficulty = float(difficulties[i])
        for j, type_name in enumerate(types):
            type_cfg = cfg.types[type_name]
            fn = TERRAIN_FUNCTIONS.get(type_cfg.kind)
            if fn is None:
                raise ValueError(
                    f"terrain type {type_name!r} has kind {type_cfg.kind!r}, which TERRAIN_FUNCTIONS lacks; "
                    f"known: {sorted(TERRAIN_FUNCTIONS)}"
                )
            block = fn(type_cfg, difficulty, tile, hs, gen)
            if tuple(block.shape) != (tile, tile) or not bool(torch.isfinite(block).all()):
                raise ValueError(
                    f"tile function for {type_cfg.kind!r} must return finite ({tile}, {tile}) heights"
                )
            r0, c0 = border + i * tile, border + j * tile
            heights[r0 : r0 + tile, c0 : c0 + tile] = block
    heights = (torch.round(heights.double() / cfg.vertical_scale) * cfg.vertical_scale).float()
    half_x, half_y = (ncol - 1) * hs / 2, (nrow - 1) * hs / 2
    rows = border + torch.arange(cfg.num_rows) * tile + tile // 2
    cols = border + torch.arange(cfg.num_cols) * tile + tile // 2
    origins = torch.stack(
        (
            (cols.double() * hs - half_x)[None, :].expand(cfg.num_rows, -1),
            (rows.double() * hs - half_y)[:, None].expand(-1, cfg.num_cols),
            heights[rows[:, None], cols[None, :]].double(),
        ),
        dim=-1,
    ).float()
    field = simcore.Heightfield(
        heights.numpy(), half_extent=(half_x, half_y), pos=(0.0, 0.0, 0.0), name=name, friction=friction
    )
    return GeneratedTerrain(heights, origins, difficulties.float(), types, field, cfg)
