"""Terrain types as config dataclasses and the grid of tiles they fill.

One ``TerrainGridCfg`` describes a single heightfield: ``num_rows`` difficulty levels by ``num_cols`` columns
of square tiles, each column given to one terrain type by proportion, surrounded by a flat border. Each type
cfg names the tile function that draws it (``TERRAIN_FUNCTIONS`` in ``generator.py``) through ``kind``.
Every field is checked when the cfg is built; a message names the field and the valid range.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

MAX_HEIGHTFIELD_CELLS = 4_194_304
"""The most samples one generated heightfield may hold (2048 x 2048): a larger grid is refused at config time."""


def _finite(owner: str, name: str, value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value)):
        raise ValueError(f"{owner}.{name} must be a finite number, got {value!r}")


def _positive(owner: str, name: str, value: float) -> None:
    _finite(owner, name, value)
    if value <= 0:
        raise ValueError(f"{owner}.{name} must be > 0, got {value!r}")


def _non_negative(owner: str, name: str, value: float) -> None:
    _finite(owner, name, value)
    if value < 0:
        raise ValueError(f"{owner}.{name} must be >= 0, got {value!r}")


def _range(owner: str, name: str, value: tuple[float, float], *, low: float | None = None) -> None:
    if not (isinstance(value, tuple | list) and len(value) == 2):
        raise ValueError(f"{owner}.{name} must be a (min, max) pair, got {value!r}")
    for v in value:
        _finite(owner, name, v)
    if value[0] > value[1]:
        raise ValueError(f"{owner}.{name} must have min <= max, got {value!r}")
    if low is not None and value[0] < low:
        raise ValueError(f"{owner}.{name} must lie in [{low}, inf), got {value!r}")


@dataclass(frozen=True)
class SubTerrainCfg:
    """Base of every terrain type: ``proportion`` is its share of the grid's columns (>= 0)."""

    kind: ClassVar[str] = ""
    proportion: float = 1.0

    def __post_init__(self) -> None:
        _non_negative(type(self).__name__, "proportion", self.proportion)


@dataclass(frozen=True)
class FlatCfg(SubTerrainCfg):
    """Flat ground at height 0."""

    kind: ClassVar[str] = "flat"


@dataclass(frozen=True)
class RandomRoughCfg(SubTerrainCfg):
    """Uniform noise: each sample a height from ``noise_range`` (m) in multiples of ``noise_step`` (m).

    Like Isaac Lab's random uniform terrain, the noise does not grow with the difficulty.
    """

    kind: ClassVar[str] = "random_rough"
    noise_range: tuple[float, float] = (-0.02, 0.02)
    noise_step: float = 0.01

    def __post_init__(self) -> None:
        super().__post_init__()
        _range(type(self).__name__, "noise_range", self.noise_range)
        _positive(type(self).__name__, "noise_step", self.noise_step)


@dataclass(frozen=True)
class PyramidSlopeCfg(SubTerrainCfg):
    """A four-sided pyramid rising from the tile's edges (``inverted``: a pit) to a flat centre platform.

    The slope (rise over run) is ``slope_range[0] + difficulty * (slope_range[1] - slope_range[0])``.
    """

    kind: ClassVar[str] = "pyramid_slope"
    slope_range: tuple[float, float] = (0.0, 0.4)
    platform_width: float = 1.0
    inverted: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _range(type(self).__name__, "slope_range", self.slope_range, low=0.0)
        _non_negative(type(self).__name__, "platform_width", self.platform_width)


@dataclass(frozen=True)
class PyramidStairsCfg(SubTerrainCfg):
    """Square rings of steps ``step_width`` wide rising from the tile's edges (``inverted``: going down).

    The step height is ``step_height_range[0] + difficulty * (step_height_range[1] - step_height_range[0])``;
    the steps stop at a flat centre platform at least ``platform_width`` wide.
    """

    kind: ClassVar[str] = "pyramid_stairs"
    step_height_range: tuple[float, float] = (0.05, 0.2)
    step_width: float = 0.3
    platform_width: float = 1.0
    inverted: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        _range(type(self).__name__, "step_height_range", self.step_height_range, low=0.0)
        _positive(type(self).__name__, "step_width", self.step_width)
        _non_negative(type(self).__name__, "platform_width", self.platform_width)


@dataclass(frozen=True)
class DiscreteBoxesCfg(SubTerrainCfg):
    """``num_boxes`` axis-aligned boxes, raised or sunk by the obstacle height, around a flat centre platform.

    The obstacle height is ``height_range[0] + difficulty * (height_range[1] - height_range[0])``; each box's
    side is drawn from ``width_range`` (m) and its sign (raised or sunk) at random.
    """

    kind: ClassVar[str] = "discrete_boxes"
    height_range: tuple[float, float] = (0.02, 0.15)
    width_range: tuple[float, float] = (0.4, 1.0)
    num_boxes: int = 20
    platform_width: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        _range(type(self).__name__, "height_range", self.height_range, low=0.0)
        _range(type(self).__name__, "width_range", self.width_range)
        _positive(type(self).__name__, "width_range[0]", self.width_range[0])
        if not (isinstance(self.num_boxes, int) and self.num_boxes >= 0):
            raise ValueError(f"DiscreteBoxesCfg.num_boxes must be an int >= 0, got {self.num_boxes!r}")
        _non_negative(type(self).__name__, "platform_width", self.platform_width)


def _default_types() -> dict[str, SubTerrainCfg]:
    return {
        "flat": FlatCfg(proportion=0.1),
        "rough": RandomRoughCfg(proportion=0.2),
        "slope_up": PyramidSlopeCfg(proportion=0.1),
        "slope_down": PyramidSlopeCfg(proportion=0.1, inverted=True),
        "stairs_up": PyramidStairsCfg(proportion=0.2),
        "stairs_down": PyramidStairsCfg(proportion=0.2, inverted=True),
        "boxes": DiscreteBoxesCfg(proportion=0.1),
    }


@dataclass(frozen=True)
class TerrainGridCfg:
    """A grid of square tiles in one heightfield.

    Attributes:
        size: side of a tile, meters (rounded to whole cells of ``horizontal_scale``).
        num_rows: difficulty levels (>= 1): row ``i`` is drawn at difficulty ``(i + u) / num_rows``, ``u``
            uniform in [0, 1) (``difficulty_jitter=False``: ``i / (num_rows - 1)``, the top row at 1), mapped
            into ``difficulty_range``.
        num_cols: columns (>= 1), shared among ``types`` by proportion.
        horizontal_scale: meters between heightfield samples.
        vertical_scale: heights are rounded to multiples of this, meters.
        border_width: flat border around the grid, meters (>= 0).
        types: terrain name -> type cfg; proportions >= 0 with a positive sum.
        seed: seed of the ``torch.Generator`` every random draw uses: one seed, one terrain. None (default):
            an env draws its terrain with its run seed (``ManagerBasedRlEnv.seed``); ``generate_terrain``
            alone with 0.
        max_init_level: an env's first level is uniform in ``[0, max_init_level]`` (``TerrainCurriculum``);
            at most ``num_rows - 1``.
        difficulty_range: ``(low, high)`` in [0, 1]: the rows' difficulties span this range instead of
            [0, 1] (a row at ``d`` is drawn at ``low + d * (high - low)``), as Isaac Lab's generator's. An
            evaluation uses ``level_difficulties`` here to draw every row like one level of the training grid.
    """

    size: float = 8.0
    num_rows: int = 10
    num_cols: int = 20
    horizontal_scale: float = 0.1
    vertical_scale: float = 0.005
    border_width: float = 10.0
    types: dict[str, SubTerrainCfg] = field(default_factory=_default_types)
    seed: int | None = None
    difficulty_jitter: bool = True
    max_init_level: int = 0
    difficulty_range: tuple[float, float] = (0.0, 1.0)

    @property
    def tile_cells(self) -> int:
        """Samples along a tile's side."""
        return round(self.size / self.horizontal_scale)

    @property
    def border_cells(self) -> int:
        """Samples of flat border on each side."""
        return round(self.border_width / self.horizontal_scale)

    def level_difficulties(self, level: int) -> tuple[float, float]:
        """The ``(low, high)`` difficulties row ``level`` is drawn between (one value without jitter): as a
        ``difficulty_range``, it makes every row of a grid like that level."""
        if not (isinstance(level, int) and 0 <= level < self.num_rows):
            raise ValueError(f"level must be an int in [0, {self.num_rows - 1}], got {level!r}")
        low, high = self.difficulty_range
        if self.difficulty_jitter:
            ends = (level / self.num_rows, (level + 1) / self.num_rows)
        else:
            ends = (1.0, 1.0) if self.num_rows == 1 else (level / (self.num_rows - 1),) * 2
        return (low + ends[0] * (high - low), low + ends[1] * (high - low))

    @property
    def shape(self) -> tuple[int, int]:
        """The heightfield's ``(nrow, ncol)``: rows along y (tile rows), columns along x (tile columns)."""
        n_rows = self.num_rows * self.tile_cells + 2 * self.border_cells + 1
        n_cols = self.num_cols * self.tile_cells + 2 * self.border_cells + 1
        return n_rows, n_cols

    def __post_init__(self) -> None:
        for name in ("num_rows", "num_cols"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ValueError(f"TerrainGridCfg.{name} must be an int >= 1, got {value!r}")
        for name in ("size", "horizontal_scale", "vertical_scale"):
            _positive("TerrainGridCfg", name, getattr(self, name))
        _non_negative("TerrainGridCfg", "border_width", self.border_width)
        if self.tile_cells < 4:
            raise ValueError(
                f"TerrainGridCfg.size must span at least 4 cells of horizontal_scale, got size={self.size} "
                f"with horizontal_scale={self.horizontal_scale}"
            )
        if self.seed is not None and (not isinstance(self.seed, int) or isinstance(self.seed, bool)):
            raise ValueError(f"TerrainGridCfg.seed must be an int or None (the run seed), got {self.seed!r}")
        _range("TerrainGridCfg", "difficulty_range", self.difficulty_range)
        if not 0.0 <= self.difficulty_range[0] <= self.difficulty_range[1] <= 1.0:
            raise ValueError(
                f"TerrainGridCfg.difficulty_range must lie in [0, 1] (1 is each type's hardest), "
                f"got {self.difficulty_range!r}"
            )
        level = self.max_init_level
        if not (isinstance(level, int) and not isinstance(level, bool) and 0 <= level < self.num_rows):
            raise ValueError(
                f"TerrainGridCfg.max_init_level must be an int in [0, num_rows - 1] = [0, {self.num_rows - 1}], "
                f"got {level!r}"
            )
        if not self.types:
            raise ValueError("TerrainGridCfg.types must name at least one terrain type")
        for name, cfg in self.types.items():
            if not isinstance(cfg, SubTerrainCfg) or not cfg.kind:
                raise ValueError(
                    f"TerrainGridCfg.types[{name!r}] must be a terrain type cfg (FlatCfg, ...), got {cfg!r}"
                )
        if not sum(cfg.proportion for cfg in self.types.values()) > 0:
            raise ValueError("TerrainGridCfg.types: the proportions must sum to > 0")
        rows, cols = self.shape
        if rows * cols > MAX_HEIGHTFIELD_CELLS:
            raise ValueError(
                f"TerrainGridCfg makes a {rows} x {cols} heightfield ({rows * cols} cells), over the limit of "
                f"MAX_HEIGHTFIELD_CELLS = {MAX_HEIGHTFIELD_CELLS}: use fewer or smaller tiles, a narrower border "
                "or a coarser horizontal_scale"
            )


@dataclass(frozen=True)
class TerrainMeshCfg:
    """A static mesh in every world (``SceneCfg.terrain_meshes``), e.g. the slope a motion clip was recorded on.

    ``file`` is a Wavefront OBJ file (read as text when the env is built, into ``simcore.TerrainMesh``: one
    colliding geom per closed convex piece); ``pos`` and ``quat`` (wxyz) place its frame in the world;
    ``name`` prefixes its geoms (``<name>_<piece>``).
    """

    file: str
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    name: str = "scene_mesh"

    def __post_init__(self) -> None:
        if not isinstance(self.file, str) or not self.file:
            raise ValueError(f"TerrainMeshCfg.file must be a path, got {self.file!r}")
        for name, size in (("pos", 3), ("quat", 4)):
            value = getattr(self, name)
            if not (isinstance(value, tuple | list) and len(value) == size):
                raise ValueError(f"TerrainMeshCfg.{name} must be {size} numbers, got {value!r}")
            for v in value:
                _finite("TerrainMeshCfg", name, v)


def _changed(where: str, cfg: Any, changes: Mapping[str, Any]) -> Any:
    """``cfg`` (a frozen cfg dataclass) with ``changes`` to its fields; a list given for a tuple field becomes a
    tuple. ValueError naming ``where`` and the valid fields for an unknown one, or the cfg's own message."""
    if not isinstance(changes, Mapping):
        raise ValueError(f"{where}: expected a mapping of field names to values, got {changes!r}")
    names = [f.name for f in dataclasses.fields(cfg)]
    unknown = sorted(set(changes) - set(names))
    if unknown:
        raise ValueError(f"{where}: unknown fields {unknown}; valid fields: {sorted(names)}")
    update = {
        name: tuple(value) if isinstance(value, list) and isinstance(getattr(cfg, name), tuple) else value
        for name, value in changes.items()
    }
    try:
        return dataclasses.replace(cfg, **update)
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def grid_with_changes(
    cfg: TerrainGridCfg, changes: Mapping[str, Any], where: str = "task.terrain"
) -> TerrainGridCfg:
    """``cfg`` with ``changes``: ``TerrainGridCfg`` fields by name, and under ``types`` each terrain type's fields
    by type name (``{"num_rows": 5, "types": {"stairs_up": {"proportion": 0.0}}}``). Types cannot be added or
    removed here (a proportion of 0 leaves one out). Every change is checked as the cfg's own fields are:
    ValueError naming ``where``, the field and what is valid."""
    if not isinstance(changes, Mapping):
        raise ValueError(f"{where}: expected a mapping of TerrainGridCfg fields to values, got {changes!r}")
    type_changes = changes.get("types", {})
    if not isinstance(type_changes, Mapping):
        raise ValueError(
            f"{where}.types: expected a mapping of terrain type names to changes, got {type_changes!r}"
        )
    unknown = sorted(set(type_changes) - set(cfg.types))
    if unknown:
        raise ValueError(f"{where}.types: unknown terrain types {unknown}; this grid has {sorted(cfg.types)}")
    types = {
        name: _changed(f"{where}.types.{name}", type_cfg, type_changes[name])
        if name in type_changes
        else type_cfg
        for name, type_cfg in cfg.types.items()
    }
    return _changed(where, cfg, {**changes, "types": types})
