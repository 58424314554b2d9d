"""Terrain in an env: the grid drawn from the run seed, its heightfield in the model, each env's tile.

``ManagerBasedRlEnv`` builds a ``TerrainScene`` when ``SceneCfg.terrain`` is set, in two steps: before the
backend exists, ``TerrainScene(cfg, seed)`` draws the grid (``generate_terrain``, one seeded
``torch.Generator``) and ``make_scene_backend`` loads the scene's model with the heightfield (the factory's
``heightfields=`` keyword, e.g. ``RobotDescription.scene_model``); once the backend runs, ``attach(env)``
gives every env a tile through a ``TerrainCurriculum`` (column: terrain type, row: difficulty level).

``SceneCfg.terrain_meshes`` take the same path: ``scene_model`` reads their files into ``simcore.TerrainMesh``
and passes them as the factory's ``terrain_meshes=``, and the backend must declare what the model needs
(``Capability.HEIGHTFIELD``, ``Capability.COLLISION_MESH``): one scene path for every kind of terrain.

Resets start each env on its tile: ``place(qpos)`` adds its tile's origin (the centre's surface point) to the
root position of the default reset payload, which the reset events then offset as on flat ground. Only the
small per-tile table and the per-env levels and columns stay on the env (they are its state; the heights
themselves are in the model).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import mujoco
import torch

import simcore
from trainrt.hotpath import cold_path
from trainrt.terrain.cfg import TerrainGridCfg, TerrainMeshCfg
from trainrt.terrain.curriculum import TerrainCurriculum
from trainrt.terrain.generator import generate_terrain

if TYPE_CHECKING:
    from trainrt.managers import ManagedEnv


class SceneParts(Protocol):
    """What building a scene reads from ``trainrt.envs.SceneCfg`` (named here so that the terrain, which the env
    imports, does not import the env's config)."""

    model_factory: Callable[..., mujoco.MjModel]
    terrain_meshes: tuple[TerrainMeshCfg, ...]


TERRAIN_GEOM_NAME = "terrain"
"""Name of the terrain's heightfield geom in the model."""


class TerrainScene:
    """A generated terrain grid and the tile of every env.

    Attributes:
        cfg: the grid cfg, with the seed it was drawn with.
        column_types: the terrain type of each column.
        difficulties: ``(num_rows,)`` the difficulty each level was drawn at.
        half_extent: ``(hx, hy)`` half sizes of the heightfield, meters (it is centred on the world origin).
        curriculum: each env's level and column (after ``attach``).
    """

    @cold_path
    def __init__(self, cfg: TerrainGridCfg, seed: int) -> None:
        if not isinstance(cfg, TerrainGridCfg):
            raise ValueError(f"SceneCfg.terrain must be a trainrt.terrain.TerrainGridCfg, got {cfg!r}")
        if cfg.seed is None:
            cfg = dataclasses.replace(cfg, seed=int(seed))
        generated = generate_terrain(cfg, name=TERRAIN_GEOM_NAME)
        self.cfg = cfg
        self.column_types = generated.column_types
        self.difficulties = generated.difficulties
        self.half_extent = generated.heightfield.half_extent
        self._origins = generated.origins
        self._heightfield: simcore.Heightfield | None = generated.heightfield
        self.curriculum: TerrainCurriculum | None = None
        self._root_pos: slice | None = None

    @cold_path
    def take_heightfield(self) -> simcore.Heightfield:
        """The grid's heightfield, handed over once (to ``scene_model``): the heights then live in the model
        only."""
        field, self._heightfield = self._heightfield, None
        if field is None:
            raise ValueError("TerrainScene.take_heightfield runs once per scene")
        return field

    @cold_path
    def attach(self, env: ManagedEnv) -> None:
        """Give every env of ``env`` a tile (levels drawn from a generator seeded with the run seed)."""
        from trainrt.mdp.state_layout import robot_state_layout

        self._root_pos = robot_state_layout(env).root_pos
        self.curriculum = TerrainCurriculum(
            self._origins,
            tile_size=self.cfg.tile_cells * self.cfg.horizontal_scale,
            num_envs=env.num_envs,
            max_init_level=self.cfg.max_init_level,
            device=env.device,
            generator=torch.Generator().manual_seed(env.seed),
        )

    @property
    def num_levels(self) -> int:
        """Difficulty levels (the grid's rows)."""
        return self.cfg.num_rows

    @property
    def tile_size(self) -> float:
        """A tile's side, meters."""
        return self.cfg.tile_cells * self.cfg.horizontal_scale

    def place(self, qpos: torch.Tensor) -> None:
        """Add each env's tile origin to the root position columns of ``qpos`` (num_envs, nq), in place."""
        root = qpos[:, self._root_pos]
        root.add_(self.curriculum.origins().to(qpos.dtype))

    @cold_path
    def columns_of(self, terrain_type: str) -> list[int]:
        """The columns of ``terrain_type``; ValueError naming the grid's types when it has none."""
        columns = [j for j, name in enumerate(self.column_types) if name == terrain_type]
        if not columns:
            raise ValueError(
                f"the terrain has no column of type {terrain_type!r}; its types: {sorted(set(self.column_types))}"
            )
        return columns

    @cold_path
    def assign_tiles(self, levels: torch.Tensor, columns: torch.Tensor) -> None:
        """Put the envs on the given ``(num_envs,)`` levels and columns (e.g. an evaluation's fixed tiles);
        ValueError for an index out of the grid. Their next reset starts them there."""
        curriculum = self.curriculum
        for name, value, count in (
            ("level", levels, self.num_levels),
            ("column", columns, self.cfg.num_cols),
        ):
            if tuple(value.shape) != (curriculum.num_envs,):
                raise ValueError(f"{name}s must be ({curriculum.num_envs},), got {tuple(value.shape)}")
            if bool((value < 0).any()) or bool((value >= count).any()):
                raise ValueError(f"{name}s must lie in [0, {count - 1}], got {value.tolist()}")
        curriculum.levels.copy_(levels)
        curriculum.columns.copy_(columns)

    @cold_path
    def describe(self) -> dict[str, Any]:
        """The grid in a few facts (for summaries and evaluations)."""
        return {
            "num_levels": self.num_levels,
            "num_cols": self.cfg.num_cols,
            "tile_size": self.tile_size,
            "difficulty_range": list(self.cfg.difficulty_range),
            "column_types": list(self.column_types),
            "seed": self.cfg.seed,
        }


MISSING_MESH_FIX = (
    "fetch the assets it comes with (`make setup`, or `uv run python -m trainrt.robots fetch`) or give the "
    "path of an existing OBJ file"
)
"""What to do about a terrain mesh file that does not exist."""


@cold_path
def load_terrain_meshes(cfgs: tuple[TerrainMeshCfg, ...]) -> tuple[simcore.TerrainMesh, ...]:
    """The meshes of ``SceneCfg.terrain_meshes``, read from their OBJ files (text; nothing in them runs).

    FileNotFoundError naming a missing file and the fix; ValueError naming a file that cannot be read or a
    piece that cannot collide (not closed, not convex)."""
    meshes = []
    for cfg in cfgs:
        try:
            meshes.append(simcore.TerrainMesh.from_obj(cfg.file, pos=cfg.pos, quat=cfg.quat, name=cfg.name))
        except FileNotFoundError as err:
            raise FileNotFoundError(f"SceneCfg.terrain_meshes: {err}; {MISSING_MESH_FIX}") from None
        except ValueError as err:
            raise ValueError(f"SceneCfg.terrain_meshes: {err}") from None
    return tuple(meshes)


@cold_path
def scene_model(
    scene: SceneParts, terrain: TerrainScene | None
) -> tuple[mujoco.MjModel, tuple[simcore.Capability, ...]]:
    """The scene's model with its terrain (``terrain``'s heightfield, ``scene.terrain_meshes``) and the
    capabilities a backend needs to simulate it."""
    factory: Callable[..., mujoco.MjModel] = scene.model_factory
    kwargs: dict[str, Any] = {}
    needs: list[simcore.Capability] = []
    if terrain is not None:
        kwargs["heightfields"] = (terrain.take_heightfield(),)
        needs.append(simcore.Capability.HEIGHTFIELD)
    if scene.terrain_meshes:
        kwargs["terrain_meshes"] = load_terrain_meshes(scene.terrain_meshes)
        needs.append(simcore.Capability.COLLISION_MESH)
    try:
        return factory(**kwargs), tuple(needs)
    except TypeError as err:
        keyword = next((k for k in kwargs if k in str(err)), None)
        if keyword is None:
            raise
        what, given, loader = {
            "heightfields": ("terrain", "heightfields=(simcore.Heightfield, ...)", "heightfields=..."),
            "terrain_meshes": (
                "terrain_meshes",
                "terrain_meshes=(simcore.TerrainMesh, ...)",
                "terrain_meshes=...",
            ),
        }[keyword]
        raise ValueError(
            f"SceneCfg.{what} needs a model_factory that takes {given} and loads them with "
            f"simcore.load_model({loader}) (e.g. RobotDescription.scene_model); {factory!r} does not: {err}"
        ) from None


@cold_path
def make_scene_backend(
    sim: str, scene: SceneParts, terrain: TerrainScene | None, config: simcore.SimConfig
) -> simcore.SimBackend:
    """The backend ``sim`` over ``scene_model(scene, terrain)``; NotImplementedError naming the capability
    when the backend cannot simulate the scene's terrain."""
    model, needs = scene_model(scene, terrain)
    try:
        return simcore.make_backend(sim, model, config, require=needs)
    except NotImplementedError as err:
        what = " and ".join(
            name
            for name, present in (
                ("scene.terrain", terrain is not None),
                ("scene.terrain_meshes", scene.terrain_meshes),
            )
            if present
        )
        declared = " and ".join(f"Capability.{c.name}" for c in needs)
        raise NotImplementedError(
            f"{what or 'the scene'} needs a backend that declares {declared}: {err}; use a backend that "
            "declares it (mujoco, mjwarp) or a task without terrain"
        ) from None
