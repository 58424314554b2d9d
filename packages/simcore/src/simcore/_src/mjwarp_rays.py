"""MuJoCo Warp's ray cast for a ``RayCast``: one thread per world and ray, over the geoms the pattern can see.

``mujoco_warp.rays`` tests every geom of the model against every ray, a tile of threads per ray reducing to the
nearest hit. A height scan sees one geom group (the terrain: a heightfield, a floor, a few meshes) while a
humanoid brings dozens of geoms it can never see, so that kernel spends nearly all its time rejecting them: on
the rough G1 walk (2048 worlds, 187 rays, two casts per control step) it took two thirds of the collector's GPU
time. Here the geoms outside the pattern's groups are dropped on the host, once, when the cast is negotiated,
and each thread tests the few that remain with MuJoCo Warp's own per-geom test (``_ray_geom_mesh``: the same
visibility, static-body and group rules, the same heightfield, mesh and primitive intersections), so the
distances are the ones ``mujoco_warp.rays`` returns.
"""

from __future__ import annotations

from collections.abc import Sequence

import mujoco
import numpy as np
import warp as wp
from mujoco_warp._src.ray import _ray_geom_mesh
from mujoco_warp._src.types import MJ_MAXVAL, vec6

from simcore._src.ray_cast import NUM_GEOM_GROUPS


def candidate_geoms(model: mujoco.MjModel, geom_groups: Sequence[int] | None) -> np.ndarray:
    """Ids of the geoms whose group a ray of ``geom_groups`` sees (every geom for None), ascending, as int32.

    MuJoCo's ray functions clamp a geom's group into 0..5 before testing it against the group mask; so does
    this filter, so a geom it drops is one ``mujoco_warp.rays`` would reject for its group."""
    if geom_groups is None:
        return np.arange(model.ngeom, dtype=np.int32)
    groups = np.clip(np.asarray(model.geom_group), 0, NUM_GEOM_GROUPS - 1)
    return np.flatnonzero(np.isin(groups, list(geom_groups))).astype(np.int32)


@wp.kernel
def cast_rays_over_geoms(
    # Model:
    nmeshface: int,
    body_weldid: wp.array(dtype=int),
    geom_type: wp.array(dtype=int),
    geom_bodyid: wp.array(dtype=int),
    geom_dataid: wp.array2d(dtype=int),
    geom_matid: wp.array2d(dtype=int),
    geom_group: wp.array(dtype=int),
    geom_size: wp.array2d(dtype=wp.vec3),
    geom_rgba: wp.array2d(dtype=wp.vec4),
    mesh_vertadr: wp.array(dtype=int),
    mesh_faceadr: wp.array(dtype=int),
    mesh_vert: wp.array(dtype=wp.vec3),
    mesh_face: wp.array(dtype=wp.vec3i),
    hfield_size: wp.array(dtype=wp.vec4),
    hfield_nrow: wp.array(dtype=int),
    hfield_ncol: wp.array(dtype=int),
    hfield_adr: wp.array(dtype=int),
    hfield_data: wp.array(dtype=float),
    mat_rgba: wp.array2d(dtype=wp.vec4),
    # Data in:
    geom_xpos_in: wp.array2d(dtype=wp.vec3),
    geom_xmat_in: wp.array2d(dtype=wp.mat33),
    # In:
    candidates: wp.array(dtype=int),
    pnt: wp.array2d(dtype=wp.vec3),
    vec: wp.array2d(dtype=wp.vec3),
    geomgroup: vec6,
    # Out:
    dist_out: wp.array2d(dtype=float),
):
    """Distance from each ray's origin to the nearest candidate geom it hits, -1 for none (``mujoco_warp.rays``'
    convention); static geoms are seen and no body is excluded (what ``RayCast`` asks of every backend)."""
    worldid, rayid = wp.tid()
    origin = pnt[worldid, rayid]
    direction = vec[worldid, rayid]
    nearest = float(MJ_MAXVAL)
    for i in range(candidates.shape[0]):
        dist, _normal = _ray_geom_mesh(
            nmeshface,
            body_weldid,
            geom_type,
            geom_bodyid,
            geom_dataid,
            geom_matid,
            geom_group,
            geom_size,
            geom_rgba,
            mesh_vertadr,
            mesh_faceadr,
            mesh_vert,
            mesh_face,
            hfield_size,
            hfield_nrow,
            hfield_ncol,
            hfield_adr,
            hfield_data,
            mat_rgba,
            geom_xpos_in,
            geom_xmat_in,
            worldid,
            origin,
            direction,
            geomgroup,
            True,
            -1,
            candidates[i],
        )
        if dist >= 0.0 and dist < nearest:
            nearest = dist
    if nearest >= MJ_MAXVAL:
        dist_out[worldid, rayid] = -1.0
    else:
        dist_out[worldid, rayid] = nearest


_MODEL_FIELDS = (
    "nmeshface", "body_weldid", "geom_type", "geom_bodyid", "geom_dataid", "geom_matid", "geom_group", "geom_size",
    "geom_rgba", "mesh_vertadr", "mesh_faceadr", "mesh_vert", "mesh_face", "hfield_size", "hfield_nrow",
    "hfield_ncol", "hfield_adr", "hfield_data", "mat_rgba",
)  # fmt: skip
"""The model's fields ``cast_rays_over_geoms`` reads, in its order."""


def launch_cast(
    m, d, candidates: wp.array, pnt: wp.array, vec: wp.array, geomgroup: vec6, dist: wp.array
) -> None:
    """Launch ``cast_rays_over_geoms`` over ``dist``'s ``(worlds, rays)`` on model ``m`` and data ``d``."""
    model = [getattr(m, name) for name in _MODEL_FIELDS]
    inputs = [*model, d.geom_xpos, d.geom_xmat, candidates, pnt, vec, geomgroup]
    wp.launch(cast_rays_over_geoms, dim=dist.shape, inputs=inputs, outputs=[dist])
