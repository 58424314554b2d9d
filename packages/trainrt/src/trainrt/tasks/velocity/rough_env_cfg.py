"""Velocity tracking on rough ground for any legged robot: the flat walk (``velocity_env_cfg``) on a grid of
terrain tiles with a level curriculum and height scans (``g1_walk_rough`` is its G1 registration).

What changes from the flat walk, after Isaac Lab's rough velocity tasks and mjlab's velocity terrain:

- ``scene.terrain``: ``ROUGH_TERRAIN``, 10 difficulty levels by 20 columns of 8 m tiles (flat, random rough,
  pyramid slopes up and down, pyramid stairs up and down, boxes), drawn from the run seed; each env starts
  on its tile, at a level in ``[0, 5]`` (Isaac Lab's and mjlab's ``max_init_terrain_level``).
- ``height_scan`` in the policy and the critic: a 1.6 m x 1.0 m grid of downward rays 0.1 m apart around
  the root (Isaac Lab's G1 rough scanner), ``root z - ground z - 0.5`` clipped to +-1 m, the policy's with
  mjlab's +-0.1 m noise.
- ``terrain_levels`` curriculum: an env moves up a level when it walked over half a tile, down when it walked
  less than half its command's distance (``trainrt.terrain.mdp.TerrainLevels``).
- ``scene.nconmax``: ``ROUGH_NCONMAX`` contacts per world (rough ground touches more than a plane).
- Heights over the ground instead of world heights: the ``base_height_l2`` reward's target and the
  ``base_too_low`` termination read the root's height over the ground under it
  (``RootHeightAboveTerrain``); an env that walks to the grid's edge ends as a time-out
  (``terrain_out_of_bounds``).
"""

from __future__ import annotations

from trainrt.envs import EnvCfg
from trainrt.hotpath import cold_path
from trainrt.managers import (
    CurriculumTermCfg,
    ObsTermCfg,
    RewardTermCfg,
    TerminationTermCfg,
    UniformNoiseCfg,
)
from trainrt.robots import RobotDescription
from trainrt.tasks.velocity.env_cfg import TWIST, velocity_env_cfg
from trainrt.terrain import TerrainGridCfg
from trainrt.terrain.mdp import HeightScan, RootHeightAboveTerrain, TerrainLevels, terrain_out_of_bounds

ROUGH_TERRAIN = TerrainGridCfg(max_init_level=5)
"""The rough walk's grid: ``TerrainGridCfg``'s defaults (10 levels by 20 columns of 8 m tiles, every terrain
type, a 10 m flat border), the run seed, first levels in [0, 5]."""

HEIGHT_SCAN_PARAMS = {"size": (1.6, 1.0), "resolution": 0.1, "offset": 0.5, "clip": (-1.0, 1.0)}
"""The height scan around the root (Isaac Lab's G1 rough scanner's grid; its offset and clip)."""

ROUGH_NCONMAX = 96
"""Contacts per world on the terrain (the G1 model's default is 48): a G1 flailing under random actions on the
top level of every type overflowed 48 and 64 in some worlds on CPU MuJoCo and never 96 (14 worlds, 300
steps). MuJoCo Warp pools the contacts of all worlds, so a rare world above it borrows from the others;
``sim.nconmax`` overrides it and overflow is reported as on flat ground."""

BASE_TOO_LOW_M = 0.3
"""The flat walk's ``base_too_low`` height, here over the ground under the root."""


@cold_path
def rough_velocity_env_cfg(
    robot: RobotDescription, *, terrain: TerrainGridCfg = ROUGH_TERRAIN, **flat: object
) -> EnvCfg:
    """The velocity task of ``robot`` on ``terrain`` (see the module docstring); ``flat`` goes to
    ``velocity_env_cfg`` (gait period, extra bodies, action scale multiple)."""
    cfg = velocity_env_cfg(robot, **flat)
    cfg.scene.terrain = terrain
    cfg.scene.nconmax = ROUGH_NCONMAX
    cfg.observations["policy"].terms["height_scan"] = ObsTermCfg(
        HeightScan, params=dict(HEIGHT_SCAN_PARAMS), noise=UniformNoiseCfg(-0.1, 0.1)
    )
    cfg.observations["critic"].terms["height_scan"] = ObsTermCfg(HeightScan, params=dict(HEIGHT_SCAN_PARAMS))
    height = cfg.rewards["base_height_l2"]
    cfg.rewards["base_height_l2"] = RewardTermCfg(
        RootHeightAboveTerrain, weight=height.weight, params={"target_height": robot.standing_root_height()}
    )
    cfg.terminations["base_too_low"] = TerminationTermCfg(
        RootHeightAboveTerrain, params={"minimum_height": BASE_TOO_LOW_M}
    )
    cfg.terminations["out_of_terrain"] = TerminationTermCfg(terrain_out_of_bounds, time_out=True)
    cfg.curriculum["terrain_levels"] = CurriculumTermCfg(TerrainLevels, params={"command_name": TWIST})
    return cfg
