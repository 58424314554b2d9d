"""Terrain: tile types as cfgs, a generator that draws a grid of them into one heightfield, and a curriculum.

``TerrainGridCfg`` -> ``generate_terrain`` -> ``GeneratedTerrain`` (heights, tile origins, ``simcore.Heightfield``)
-> ``TerrainCurriculum`` (per-env level and column). In an env (``SceneCfg.terrain``): ``scene.TerrainScene``
(the grid from the run seed, in the model, every env on its tile) and the terms of ``terrain.mdp``
(``TerrainLevels``, ``HeightScan``, ``RootHeightAboveTerrain``, ``terrain_out_of_bounds``). A new type: a cfg
dataclass with a ``kind``, a tile function and an entry in ``TERRAIN_FUNCTIONS`` (docs/extending.md, "A new
terrain type"). A static mesh in every world (the scene a motion clip needs): ``TerrainMeshCfg`` in
``SceneCfg.terrain_meshes``.
"""

from trainrt.terrain.cfg import (
    MAX_HEIGHTFIELD_CELLS,
    DiscreteBoxesCfg,
    FlatCfg,
    PyramidSlopeCfg,
    PyramidStairsCfg,
    RandomRoughCfg,
    SubTerrainCfg,
    TerrainGridCfg,
    TerrainMeshCfg,
    grid_with_changes,
)
from trainrt.terrain.curriculum import TerrainCurriculum
from trainrt.terrain.generator import (
    TERRAIN_FUNCTIONS,
    GeneratedTerrain,
    column_types,
    discrete_boxes_tile,
    flat_tile,
    generate_terrain,
    pyramid_slope_tile,
    pyramid_stairs_tile,
    random_rough_tile,
    row_difficulties,
)

__all__ = [
    "MAX_HEIGHTFIELD_CELLS",
    "TERRAIN_FUNCTIONS",
    "DiscreteBoxesCfg",
    "FlatCfg",
    "GeneratedTerrain",
    "PyramidSlopeCfg",
    "PyramidStairsCfg",
    "RandomRoughCfg",
    "SubTerrainCfg",
    "TerrainCurriculum",
    "TerrainGridCfg",
    "TerrainMeshCfg",
    "column_types",
    "discrete_boxes_tile",
    "flat_tile",
    "generate_terrain",
    "grid_with_changes",
    "pyramid_slope_tile",
    "pyramid_stairs_tile",
    "random_rough_tile",
    "row_difficulties",
]
