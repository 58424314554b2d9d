"""MuJoCo Warp's ray cast for a ``RayCast``: one thread per world and ray, over the geoms the pattern can see.

``mujoco_warp.rays`` tests every geom of the model against every ray, a tile of threads per ray reducing to the
nearest hit. A height scan sees one geom group (the terrain) while a humanoid brings dozens of geoms it can
never see, and a terrain grid is hundreds of heightfield blocks of which a ray meets one or two: on the rough G1
walk (2048 worlds, 187 rays, two casts per control step) that kernel took two thirds of the collector's GPU
time. Here, once, when the cast is negotiated:

- the geoms outside the pattern's groups are dropped (``candidate_geoms``);
- each remaining geom that cannot move (welded to the world, not a plane) gets a world-frame box around it
  (``static_boxes``: MuJoCo's bounding box of the geom, a millimetre wider), unless the model gives each world
  its own geometry;
- the boxes are listed in the cells of a horizontal grid they overlap (``box_grid``);

and one thread per world and ray tests the geoms without a box, and of the boxed ones those listed in the cells
its first ``max_distance`` meters cross whose box it meets (a height scan's ray: the one or two blocks under
it, not the grid's hundreds), each with MuJoCo Warp's own per-geom test (``_ray_geom_mesh``: the same
visibility, static-body and group rules, the same heightfield, mesh and primitive intersections), so the
distances within reach are the ones ``mujoco_warp.rays`` returns. After a reset only the reset worlds cast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import mujoco
import numpy as np
import torch
import warp as wp
from mujoco_warp._src.ray import _ray_geom_mesh
from mujoco_warp._src.types import MJ_MAXVAL, vec6

from simcore._src.ray_cast import NUM_GEOM_GROUPS, RayCast


def candidate_geoms(model: mujoco.MjModel, geom_groups: Sequence[int] | None) -> np.ndarray:
    """Ids of the geoms whose group a ray of ``geom_groups`` sees (every geom for None), ascending, as int32.

    MuJoCo's ray functions clamp a geom's group into 0..5 before testing it against the group mask; so does
    this filter, so a geom it drops is one ``mujoco_warp.rays`` would reject for its group."""
    if geom_groups is None:
        return np.arange(model.ngeom, dtype=np.int32)
    groups = np.clip(np.asarray(model.geom_group), 0, NUM_GEOM_GROUPS - 1)
    return np.flatnonzero(np.isin(groups, list(geom_groups))).astype(np.int32)


PER_WORLD_GEOMETRY = ("geom_pos", "geom_quat", "geom_size", "geom_dataid", "body_pos", "body_quat")
"""MuJoCo Warp model fields that place or size a geom; when any holds more than one world's values, no geom gets
a box (a world's geometry may differ from the host model's)."""

_CORNERS = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)


def static_boxes(
    model: mujoco.MjModel, geoms: np.ndarray, per_world_geometry: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(low, high, boxed)`` for ``geoms``: world-frame corners of a box around each geom that cannot move
    (welded to the world body, not a plane) and 1 in ``boxed``; 0 for the others, and for all when
    ``per_world_geometry``. The box is MuJoCo's bounding box of the geom (``geom_aabb``, in the geom's frame)
    turned into the world frame, widened by 1 mm and a millionth of its distance from the origin."""
    low, high = np.zeros((len(geoms), 3)), np.zeros((len(geoms), 3))
    boxed = np.zeros(len(geoms), dtype=np.int32)
    if per_world_geometry:
        return low, high, boxed
    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)  # static geoms sit where every world has them
    for i, geom in enumerate(int(g) for g in geoms):
        if (
            model.body_weldid[model.geom_bodyid[geom]] != 0
            or model.geom_type[geom] == mujoco.mjtGeom.mjGEOM_PLANE
        ):
            continue
        center, half = model.geom_aabb[geom, :3], model.geom_aabb[geom, 3:]
        corners = data.geom_xpos[geom] + (center + half * _CORNERS) @ data.geom_xmat[geom].reshape(3, 3).T
        margin = 1e-3 + 1e-6 * float(np.abs(corners).max())
        low[i], high[i], boxed[i] = corners.min(axis=0) - margin, corners.max(axis=0) + margin, 1
    return low, high, boxed


def has_per_world_geometry(m) -> bool:
    """Whether MuJoCo Warp model ``m`` holds more than one world's values of a field in ``PER_WORLD_GEOMETRY``."""
    return any(getattr(m, name).shape[0] > 1 for name in PER_WORLD_GEOMETRY if hasattr(m, name))


GRID_MAX_CELLS_PER_SIDE = 64
"""The box grid's cells per side at most: its cell is never smaller than 1/64 of the boxes' span."""


def box_grid(
    low: np.ndarray, high: np.ndarray, boxed: np.ndarray
) -> tuple[tuple[float, float, float, int, int], np.ndarray, np.ndarray, np.ndarray]:
    """A uniform grid over the horizontal extent of the boxed geoms, so that a ray tests only the boxes of the
    cells its reach crosses: ``(layout, cell_start, cell_items, unboxed)``.

    ``layout`` is ``(x0, y0, cell, nx, ny)``: the grid's corner, its square cell's side (the median of the boxes'
    larger horizontal sides, at least 1/``GRID_MAX_CELLS_PER_SIDE`` of the span) and its cells along x and y.
    Cell ``(cx, cy)`` (index ``cy * nx + cx``) lists in ``cell_items[cell_start[c]:cell_start[c + 1]]`` every
    boxed geom (an index into ``low``) whose box overlaps it horizontally; a geom that spans cells is listed in
    each. ``unboxed`` lists the geoms without a box (moving geoms, planes): every ray tests them."""
    unboxed = np.flatnonzero(boxed == 0).astype(np.int32)
    ids = np.flatnonzero(boxed)
    if len(ids) == 0:
        return (0.0, 0.0, 1.0, 1, 1), np.zeros(2, dtype=np.int32), np.zeros(0, dtype=np.int32), unboxed
    lo, hi = low[ids, :2], high[ids, :2]
    corner, span = lo.min(axis=0), hi.max(axis=0) - lo.min(axis=0)
    cell = max(float(np.median((hi - lo).max(axis=1))), float(span.max()) / GRID_MAX_CELLS_PER_SIDE, 1e-3)
    nx, ny = (max(1, int(np.ceil(extent / cell))) for extent in span)
    first = np.clip(np.floor((lo - corner) / cell).astype(int), 0, [nx - 1, ny - 1])
    last = np.clip(np.floor((hi - corner) / cell).astype(int), 0, [nx - 1, ny - 1])
    lists: list[list[int]] = [[] for _ in range(nx * ny)]
    for geom, (cx0, cy0), (cx1, cy1) in zip(ids, first, last):
        for cy in range(cy0, cy1 + 1):
            for cx in range(cx0, cx1 + 1):
                lists[cy * nx + cx].append(int(geom))
    start = np.zeros(nx * ny + 1, dtype=np.int32)
    start[1:] = np.cumsum([len(items) for items in lists])
    items = np.array([g for cell_items in lists for g in cell_items], dtype=np.int32)
    return (float(corner[0]), float(corner[1]), cell, nx, ny), start, items, unboxed


@wp.func
def _ray_meets_box(origin: wp.vec3, direction: wp.vec3, low: wp.vec3, high: wp.vec3) -> bool:
    """Whether the ray from ``origin`` along ``direction`` (forward only) passes through the box."""
    # Warp reassigns a variable in a loop only when it was made with its type's constructor
    near = float(0.0)  # noqa: UP018
    far = float(MJ_MAXVAL)
    meets = bool(True)  # noqa: UP018
    for axis in range(3):
        if wp.abs(direction[axis]) < 1.0e-12:
            if origin[axis] < low[axis] or origin[axis] > high[axis]:
                meets = False
        else:
            t1 = (low[axis] - origin[axis]) / direction[axis]
            t2 = (high[axis] - origin[axis]) / direction[axis]
            near = wp.max(near, wp.min(t1, t2))
            far = wp.min(far, wp.max(t1, t2))
    return meets and near <= far


@wp.func
def _cell_range(a: float, b: float, corner: float, cell: float, count: int) -> wp.vec2i:
    """The first and last cell (of ``count`` from ``corner``) under the segment from ``a`` to ``b`` along one
    axis, a millimetre wider each way (the host lists boxes and the device finds cells in other precisions);
    first > last when none."""
    first = int(wp.floor((wp.min(a, b) - 1.0e-3 - corner) / cell))
    last = int(wp.floor((wp.max(a, b) + 1.0e-3 - corner) / cell))
    if last < 0 or first >= count:
        return wp.vec2i(0, -1)
    return wp.vec2i(wp.max(first, 0), wp.min(last, count - 1))


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
    box_low: wp.array(dtype=wp.vec3),
    box_high: wp.array(dtype=wp.vec3),
    unboxed: wp.array(dtype=int),
    grid_corner: wp.vec2,
    grid_cell: float,
    grid_nx: int,
    grid_ny: int,
    cell_start: wp.array(dtype=int),
    cell_items: wp.array(dtype=int),
    reach: float,
    pnt: wp.array2d(dtype=wp.vec3),
    vec: wp.array2d(dtype=wp.vec3),
    geomgroup: vec6,
    rows: wp.array(dtype=wp.bool),
    # Out:
    dist_out: wp.array2d(dtype=float),
):
    """Distance from each ray's origin to the nearest candidate geom it hits, -1 for none (``mujoco_warp.rays``'
    convention); static geoms are seen and no body is excluded (what ``RayCast`` asks of every backend). Worlds
    where ``rows`` is false keep their distances.

    Tested: every unboxed candidate, then the boxed ones listed in the grid cells that the ray's first ``reach``
    meters cross horizontally (``box_grid``), each only where the ray meets its box. A geom met only farther than
    ``reach`` may go untested: the ray's hit there is a miss to the ``RayCast`` anyway."""
    worldid, rayid = wp.tid()
    if not rows[worldid]:
        return
    origin = pnt[worldid, rayid]
    direction = vec[worldid, rayid]
    end = origin + reach * direction
    xs = _cell_range(origin[0], end[0], grid_corner[0], grid_cell, grid_nx)  # the cells under the ray's reach
    ys = _cell_range(origin[1], end[1], grid_corner[1], grid_cell, grid_ny)
    width = xs[1] - xs[0] + 1
    cells = width * (ys[1] - ys[0] + 1)
    if width <= 0 or ys[1] < ys[0] or not (wp.isfinite(origin) and wp.isfinite(end)):
        cells = 0
    nearest = float(MJ_MAXVAL)
    for slot in range(cells + 1):  # slot 0: the unboxed candidates; then one slot per cell
        begin = int(0)  # noqa: UP018, RUF046 (Warp: reassigned below)
        stop = int(unboxed.shape[0])
        if slot > 0:
            cellid = (ys[0] + (slot - 1) // width) * grid_nx + xs[0] + (slot - 1) % width
            begin = cell_start[cellid]
            stop = cell_start[cellid + 1]
        for k in range(begin, stop):
            i = int(0)  # noqa: UP018, RUF046
            if slot == 0:
                i = unboxed[k]
            else:
                i = cell_items[k]
                if not _ray_meets_box(origin, direction, box_low[i], box_high[i]):
                    continue
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


def ray_cast_launch(
    model: mujoco.MjModel, m, d, cast: RayCast, dist: wp.array
) -> Callable[[torch.Tensor | None], None]:
    """The launch of ``cast_rays_over_geoms`` that casts ``cast``'s rays on MuJoCo Warp model ``m`` (of host model
    ``model``) and data ``d`` into ``dist`` ``(worlds, rays)``: its candidates and their boxes are found and its
    arguments gathered here, once, on the current Warp device; the launch reads ``cast``'s origin and direction
    tensors in place, and casts every world (``rows`` None) or the worlds a ``(worlds,)`` bool tensor selects."""
    groups = cast.pattern.geom_groups
    candidates = candidate_geoms(model, groups)
    low, high, boxed = static_boxes(model, candidates, has_per_world_geometry(m))
    (x0, y0, cell, nx, ny), cell_start, cell_items, unboxed = box_grid(low, high, boxed)
    inputs = [
        *(getattr(m, name) for name in _MODEL_FIELDS),
        d.geom_xpos,
        d.geom_xmat,
        wp.array(candidates, dtype=int),
        wp.array(low, dtype=wp.vec3),
        wp.array(high, dtype=wp.vec3),
        wp.array(unboxed, dtype=int),
        wp.vec2(x0, y0),
        cell,
        nx,
        ny,
        wp.array(cell_start, dtype=int),
        wp.array(cell_items, dtype=int),
        float(cast.pattern.max_distance),
        wp.from_torch(cast.origin_w, dtype=wp.vec3),
        wp.from_torch(cast.direction_w, dtype=wp.vec3),
        vec6(*([-1] * NUM_GEOM_GROUPS if groups is None else [int(v) for v in cast.geomgroup])),
    ]
    every_world = wp.ones(dist.shape[0], dtype=wp.bool)
    outputs = [dist]

    def launch(rows: torch.Tensor | None) -> None:
        selected = every_world if rows is None else wp.from_torch(rows, dtype=wp.bool)
        wp.launch(cast_rays_over_geoms, dim=dist.shape, inputs=[*inputs, selected], outputs=outputs)

    return launch
