"""The scene a motion clip needs: one table, ``CLIP_SCENES``, from a clip's file name to the terrain meshes it
was recorded on.

A clip recorded on flat ground needs nothing and is not listed. A clip recorded on terrain (the G1's
``motion_crawl_slope.npz`` climbs a slope onto a platform) lists its meshes: each a ``TerrainMeshCfg`` whose
``file`` lies in the clip's folder (the asset fetch puts it there) and whose ``pos``/``quat`` place it as the
clip's world expects, so the clip's root poses (heights included) stand on it as recorded. A tracking task
puts them in every world (``SceneCfg.terrain_meshes``) when it tracks the clip.

The clip files themselves carry no scene (their fields are arrays: ``trainrt.motion.loader``), so the table is
the only place a scene is named; an entry is checked against its clip by a test (the clip's lowest bodies rest
on the mesh's surface at its first and last frames).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from trainrt.hotpath import cold_path
from trainrt.terrain.cfg import TerrainMeshCfg

CLIP_SCENES: dict[str, tuple[TerrainMeshCfg, ...]] = {
    # holosoma's crawl clip: from flat ground (root at y = -1.95 m) up a 12.6 degree plank and onto a 0.41 m
    # platform (root at y = 0.79 m). The OBJ holds the plank, the platform and a 14.8 m square ground slab
    # (top at z = 0), in the clip's world frame: it is placed at the origin, unrotated.
    "motion_crawl_slope.npz": (TerrainMeshCfg("terrain_slope.obj", name="crawl_slope"),),
}
"""Clip file name -> the terrain meshes it needs (their ``file`` relative to the clip's folder)."""


@cold_path
def clip_scene(clip_path: str | Path) -> tuple[TerrainMeshCfg, ...]:
    """The terrain meshes the clip at ``clip_path`` needs (``CLIP_SCENES`` by its file name), each ``file``
    made the path beside the clip; () for a clip that needs none. FileNotFoundError naming a missing mesh file,
    the clip and the fix."""
    clip_path = Path(clip_path)
    meshes = []
    for cfg in CLIP_SCENES.get(clip_path.name, ()):
        path = (clip_path.parent / cfg.file).resolve()
        if not path.is_file():
            from trainrt.robots.description import FETCH_COMMAND

            raise FileNotFoundError(
                f"motion clip {clip_path.name} needs its scene's mesh {path} (trainrt.motion.scenes.CLIP_SCENES), "
                f"which does not exist: fetch the robot's assets again (`make setup`, or `{FETCH_COMMAND}`), or, "
                f"for a copy of the clip, put {cfg.file} beside it"
            )
        meshes.append(dataclasses.replace(cfg, file=str(path)))
    return tuple(meshes)


@cold_path
def needs_scene(motion_file: str | Path | None) -> bool:
    """Whether the clip ``motion_file`` (a path or a clip name; None: a robot's default clip) is listed in
    ``CLIP_SCENES``."""
    return motion_file is not None and Path(motion_file).name in CLIP_SCENES
