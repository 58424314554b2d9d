"""A ray caster on the CPU: the renderer that needs no GL library at all.

One ray per pixel from the camera. The posed model (robot meshes, floor, terrain heightfields) is hit by
MuJoCo's own ray casts (``mj_multiRay``, with surface normals); decoration primitives (arrows) are
intersected here in NumPy, each in its own frame over the screen rectangle its bounding sphere can cover.
Shading is a head light plus a sky light, the checkered floor of ``trainrt.viz.visual`` (the same squares and
greys as the OpenGL renderers' floor material) with distance fog, a soft contact shadow under the robot, and
the translucent ghost blended over the solid scene. Modest resolutions (up to ~640x480) render at a few
frames per second on a CPU core; it exists so that a CPU-only machine (and CI) can make real videos.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from trainrt.hotpath import cold_path
from trainrt.viz.scene import (
    GEOM_BOX,
    GEOM_CAPSULE,
    GEOM_CYLINDER,
    GEOM_ELLIPSOID,
    GEOM_PLANE,
    GEOM_SPHERE,
    FollowCamera,
    FrameScene,
    GeomBatch,
    ModelLayer,
)
from trainrt.viz.visual import FLOOR_CHECKER_M, FLOOR_MATERIAL, FLOOR_RGB1, FLOOR_RGB2

_EPS = 1e-6
_NEAR = 0.05
_SKY_TOP = np.array([0.55, 0.68, 0.85])
_SKY_HORIZON = np.array([0.86, 0.90, 0.95])
_SUN = np.array([0.35, 0.25, 1.0]) / np.linalg.norm([0.35, 0.25, 1.0])
_CHECKER_M = FLOOR_CHECKER_M
_RAY_CUTOFF_M = 200.0
_FOG_START_M, _FOG_SPAN_M = 6.0, 18.0


def _sphere_hit(o: np.ndarray, d: np.ndarray, radius: float) -> tuple[np.ndarray, np.ndarray]:
    """Nearest positive hit distance (N,) (inf for a miss) and local normal (N, 3) of a sphere at the origin."""
    b = d @ o
    c = float(o @ o) - radius * radius
    disc = b * b - c
    with np.errstate(invalid="ignore"):
        t = -b - np.sqrt(disc)
    t = np.where((disc >= 0.0) & (t > _EPS), t, np.inf)
    normal = (o[None] + np.where(np.isfinite(t), t, 0.0)[:, None] * d) / radius
    return t, normal


def _side_hit(o: np.ndarray, d: np.ndarray, radius: float, half: float) -> tuple[np.ndarray, np.ndarray]:
    """Nearest hit (N,) and normal (N, 3) of the side of a z-axis cylinder of ``radius`` with |z| <= ``half``."""
    a = d[:, 0] ** 2 + d[:, 1] ** 2
    b = o[0] * d[:, 0] + o[1] * d[:, 1]
    c = o[0] ** 2 + o[1] ** 2 - radius * radius
    disc = b * b - a * c
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (-b - np.sqrt(disc)) / a
    z = o[2] + t * d[:, 2]
    t = np.where((disc >= 0.0) & (a > _EPS) & (t > _EPS) & (np.abs(z) <= half), t, np.inf)
    tt = np.where(np.isfinite(t), t, 0.0)
    normal = np.stack([o[0] + tt * d[:, 0], o[1] + tt * d[:, 1], np.zeros_like(tt)], axis=1) / radius
    return t, normal


def _nearest(*hits: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Per ray, the nearest of several (distance (N,), normal (N, 3)) hits."""
    t, normal = hits[0]
    t, normal = t.copy(), normal.copy()
    for t_other, n_other in hits[1:]:
        closer = t_other < t
        t = np.where(closer, t_other, t)
        normal = np.where(closer[:, None], n_other, normal)
    return t, normal


def _local_hit(kind: int, size: np.ndarray, o: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Hit distance (N,) and local normal (N, 3) of one geom, for rays from ``o`` (3,) along ``d`` (N, 3)."""
    if kind == GEOM_SPHERE:
        return _sphere_hit(o, d, float(size[0]))
    if kind == GEOM_CAPSULE:
        r, h = float(size[0]), float(size[1])
        offset = np.array([0.0, 0.0, h])
        return _nearest(_side_hit(o, d, r, h), _sphere_hit(o - offset, d, r), _sphere_hit(o + offset, d, r))
    if kind == GEOM_CYLINDER:
        r, h = float(size[0]), float(size[1])
        hits = [_side_hit(o, d, r, h)]
        for sign in (1.0, -1.0):
            with np.errstate(invalid="ignore", divide="ignore"):
                t = (sign * h - o[2]) / d[:, 2]
            x, y = o[0] + t * d[:, 0], o[1] + t * d[:, 1]
            t = np.where((t > _EPS) & (x * x + y * y <= r * r), t, np.inf)
            hits.append((t, np.broadcast_to(np.array([0.0, 0.0, sign]), d.shape)))
        return _nearest(*hits)
    if kind == GEOM_ELLIPSOID:
        scale = 1.0 / np.asarray(size[:3], dtype=np.float64)
        ds = d * scale
        length = np.linalg.norm(ds, axis=1)
        t_unit, n_unit = _sphere_hit(o * scale, ds / length[:, None], 1.0)
        normal = n_unit * scale
        return t_unit / length, normal / np.linalg.norm(normal, axis=1, keepdims=True)
    if kind == GEOM_BOX:
        half = np.asarray(size[:3], dtype=np.float64)
        with np.errstate(invalid="ignore", divide="ignore"):
            t1 = (-half - o) / d
            t2 = (half - o) / d
        t_near = np.nan_to_num(np.minimum(t1, t2), nan=-np.inf)
        t_far = np.nan_to_num(np.maximum(t1, t2), nan=np.inf)
        entry = t_near.max(axis=1)
        leave = t_far.min(axis=1)
        t = np.where((entry <= leave) & (entry > _EPS), entry, np.inf)
        axis = t_near.argmax(axis=1)
        normal = np.zeros_like(d)
        normal[np.arange(len(d)), axis] = -np.sign(d[np.arange(len(d)), axis])
        return t, normal
    raise NotImplementedError(f"software renderer: geom type {kind} is not drawn")


@cold_path
def sky_gradient(height: int, width: int) -> np.ndarray:
    """A horizon-to-zenith sky (height, width, 3) uint8 for frames of a level camera (top row is zenith)."""
    mix = np.linspace(1.0, 0.0, height)[:, None, None] ** 1.5
    sky = _SKY_HORIZON * (1.0 - mix) + _SKY_TOP * mix
    return (np.broadcast_to(sky, (height, width, 3)) * 255.0 + 0.5).astype(np.uint8)


class SoftwareRenderer:
    """Ray-casts ``FrameScene`` frames to ``(height, width, 3)`` uint8 images with NumPy.

    Args:
        width, height: image size in pixels.
        camera: the follow camera.
    """

    name = "software"

    @cold_path
    def __init__(self, width: int, height: int, camera: FollowCamera) -> None:
        self.width, self.height, self.camera = int(width), int(height), camera
        th = math.tan(math.radians(camera.fovy) / 2.0)
        self._half_extent = (th * self.width / self.height, th)
        xs = ((np.arange(self.width) + 0.5) / self.width * 2.0 - 1.0) * self._half_extent[0]
        ys = (1.0 - (np.arange(self.height) + 0.5) / self.height * 2.0) * self._half_extent[1]
        self._xs, self._ys = xs, ys

    def _rays(self, forward: np.ndarray, right: np.ndarray, up: np.ndarray) -> np.ndarray:
        """Unit ray directions (H, W, 3) in the world frame."""
        rays = forward + self._xs[None, :, None] * right + self._ys[:, None, None] * up
        return rays / np.linalg.norm(rays, axis=2, keepdims=True)

    def _screen_rect(self, centre_cam: np.ndarray, radius: float) -> tuple[int, int, int, int] | None:
        """Pixel rectangle (row0, row1, col0, col1) that a sphere in camera coordinates can cover."""
        x, y, z = centre_cam
        if z + radius <= _NEAR:
            return None  # behind the camera
        if z - radius <= _NEAR:
            return 0, self.height, 0, self.width
        zs = (z - radius, z + radius)
        us = [(x + sx * radius) / zz / self._half_extent[0] for sx in (-1, 1) for zz in zs]
        vs = [(y + sy * radius) / zz / self._half_extent[1] for sy in (-1, 1) for zz in zs]
        col0 = math.floor((min(us) + 1.0) / 2.0 * self.width) - 1
        col1 = math.ceil((max(us) + 1.0) / 2.0 * self.width) + 1
        row0 = math.floor((1.0 - max(vs)) / 2.0 * self.height) - 1
        row1 = math.ceil((1.0 - min(vs)) / 2.0 * self.height) + 1
        col0, col1 = max(col0, 0), min(col1, self.width)
        row0, row1 = max(row0, 0), min(row1, self.height)
        if col0 >= col1 or row0 >= row1:
            return None
        return row0, row1, col0, col1

    def _cast(
        self,
        geoms: GeomBatch,
        rays: np.ndarray,
        cam_pos: np.ndarray,
        basis: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Nearest hit per pixel: distance (H, W), world normal (H, W, 3), rgba (H, W, 4), hit point (H, W, 3)."""
        h, w = self.height, self.width
        depth = np.full((h, w), np.inf)
        normal = np.zeros((h, w, 3))
        rgba = np.zeros((h, w, 4))
        for g in range(len(geoms)):
            kind, size, pos, mat = int(geoms.kinds[g]), geoms.sizes[g], geoms.pos[g], geoms.mats[g]
            if kind == GEOM_PLANE:
                rect: tuple[int, int, int, int] | None = (0, h, 0, w)
            else:
                radius = {
                    GEOM_SPHERE: size[0],
                    GEOM_CAPSULE: size[0] + size[1],
                    GEOM_CYLINDER: math.hypot(size[0], size[1]),
                }.get(kind, float(np.linalg.norm(size[:3])))
                rect = self._screen_rect(basis @ (pos - cam_pos), float(radius))
            if rect is None:
                continue
            r0, r1, c0, c1 = rect
            d_world = rays[r0:r1, c0:c1].reshape(-1, 3)
            o_local = mat.T @ (cam_pos - pos)
            d_local = d_world @ mat
            colour = np.broadcast_to(geoms.rgba[g], (len(d_world), 4))
            if kind == GEOM_PLANE:
                with np.errstate(invalid="ignore", divide="ignore"):
                    t = -o_local[2] / d_local[:, 2]
                t = np.where((o_local[2] > 0.0) & (t > _EPS), t, np.inf)
                if size[0] > 0 and size[1] > 0:
                    px = o_local[0] + t * d_local[:, 0]
                    py = o_local[1] + t * d_local[:, 1]
                    t = np.where((np.abs(px) <= size[0]) & (np.abs(py) <= size[1]), t, np.inf)
                n_local = np.broadcast_to(np.array([0.0, 0.0, 1.0]), d_local.shape)
                tt = np.where(np.isfinite(t), t, 0.0)
                px = o_local[0] + tt * d_local[:, 0]
                py = o_local[1] + tt * d_local[:, 1]
                checker = (np.floor(px / _CHECKER_M) + np.floor(py / _CHECKER_M)) % 2
                shade = np.where(checker > 0, 1.12, 0.88)
                colour = colour * np.concatenate([np.repeat(shade[:, None], 3, 1), np.ones((len(t), 1))], 1)
            else:
                t, n_local = _local_hit(kind, size, o_local, d_local)
            sub_depth = depth[r0:r1, c0:c1].reshape(-1)
            closer = t < sub_depth
            if not closer.any():
                continue
            sub_depth = np.where(closer, t, sub_depth)
            depth[r0:r1, c0:c1] = sub_depth.reshape(r1 - r0, c1 - c0)
            n_world = n_local @ mat.T
            sub_n = normal[r0:r1, c0:c1].reshape(-1, 3)
            normal[r0:r1, c0:c1] = np.where(closer[:, None], n_world, sub_n).reshape(r1 - r0, c1 - c0, 3)
            sub_c = rgba[r0:r1, c0:c1].reshape(-1, 4)
            rgba[r0:r1, c0:c1] = np.where(closer[:, None], colour, sub_c).reshape(r1 - r0, c1 - c0, 4)
        hit = cam_pos + np.where(np.isfinite(depth), depth, 0.0)[..., None] * rays
        return depth, normal, rgba, hit

    def _cast_model(
        self, layer: ModelLayer, rays: np.ndarray, cam_pos: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """MuJoCo's ray casts into a posed model: distance (H, W), normal (H, W, 3), rgba (H, W, 4), and
        whether the hit is floor or terrain (H, W)."""
        h, w = self.height, self.width
        n = h * w
        geomid = np.zeros(n, dtype=np.int32)
        dist = np.zeros(n)
        normal = np.zeros(3 * n)
        flat = np.ascontiguousarray(rays.reshape(-1), dtype=np.float64)
        mujoco.mj_multiRay(
            layer.model, layer.data, cam_pos.astype(np.float64), flat, layer.ray_groups,
            int(layer.static), -1, geomid, dist, normal, n, _RAY_CUTOFF_M,
        )  # fmt: skip
        hit = geomid >= 0
        depth = np.where(hit, dist, np.inf).reshape(h, w)
        normal = normal.reshape(h, w, 3)
        facing = np.where((normal * rays).sum(axis=2, keepdims=True) > 0.0, -1.0, 1.0)
        normal = normal * facing  # faces seen from behind (open meshes) are lit as seen from the front
        ids = np.where(hit, geomid, 0)
        rgba = np.where(hit[:, None], layer.rgba[ids], 0.0).reshape(h, w, 4)
        m = layer.model
        floor = self._floor_geoms(m)
        on_floor = (hit & floor[ids]).reshape(h, w)
        if on_floor.any():
            point = cam_pos + np.where(np.isfinite(depth), depth, 0.0)[..., None] * rays
            checker = (np.floor(point[..., 0] / _CHECKER_M) + np.floor(point[..., 1] / _CHECKER_M)) % 2
            tiles = np.where(checker[..., None] > 0, np.array(FLOOR_RGB1), np.array(FLOOR_RGB2))
            rgba[..., :3] = np.where(on_floor[..., None], tiles, rgba[..., :3])
        return depth, normal, rgba, on_floor

    @staticmethod
    def _floor_geoms(model: mujoco.MjModel) -> np.ndarray:
        """Per geom (ngeom,): whether it wears the floor material (floor and terrain of a render model)."""
        material = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_MATERIAL, FLOOR_MATERIAL)
        if material < 0:
            return np.zeros(model.ngeom, dtype=bool)
        return np.asarray(model.geom_matid == material)

    def _shade(self, normal: np.ndarray, rgba: np.ndarray, forward: np.ndarray) -> np.ndarray:
        """Lit colour (H, W, 3) from a head light and a sky light."""
        head = np.clip(-(normal @ forward), 0.0, 1.0)
        sun = np.clip(normal @ _SUN, 0.0, 1.0)
        light = 0.30 + 0.40 * head + 0.45 * sun
        return np.clip(rgba[..., :3] * light[..., None], 0.0, 1.0)

    @cold_path
    def render(self, scene: FrameScene) -> np.ndarray:
        """The image (height, width, 3) uint8 of ``scene``."""
        cam_pos, forward, right, up = self.camera.frame(np.asarray(scene.lookat, dtype=np.float64))
        basis = np.stack([right, up, forward])
        rays = self._rays(forward, right, up)
        depth, normal, rgba, hit = self._cast(scene.solid, rays, cam_pos, basis)
        on_floor = np.zeros(depth.shape, dtype=bool)
        if scene.model is not None:
            m_depth, m_normal, m_rgba, on_floor = self._cast_model(scene.model, rays, cam_pos)
            closer = m_depth < depth
            depth = np.where(closer, m_depth, depth)
            normal = np.where(closer[..., None], m_normal, normal)
            rgba = np.where(closer[..., None], m_rgba, rgba)
            on_floor &= closer
        else:
            on_floor = (np.abs(hit[..., 2]) < 1e-3) & np.isfinite(depth)
        hit = cam_pos + np.where(np.isfinite(depth), depth, 0.0)[..., None] * rays
        sky_mix = np.clip(rays[..., 2:3] * 2.5, 0.0, 1.0)
        sky = _SKY_HORIZON * (1.0 - sky_mix) + _SKY_TOP * sky_mix
        colour = self._shade(normal, rgba, forward)
        if len(scene.shadow_xy):
            darkness = np.zeros(depth.shape)
            for xy in scene.shadow_xy:
                dist2 = (hit[..., 0] - xy[0]) ** 2 + (hit[..., 1] - xy[1]) ** 2
                darkness = np.maximum(darkness, 0.45 * np.exp(-dist2 / 0.08))
            colour = colour * (1.0 - np.where(on_floor, darkness, 0.0))[..., None]
        fog = np.clip((depth - _FOG_START_M) / _FOG_SPAN_M, 0.0, 1.0)[..., None]
        image = np.where(np.isfinite(depth)[..., None], colour * (1.0 - fog) + sky * fog, sky)
        for ghost in (scene.ghost_model, scene.ghost if len(scene.ghost) else None):
            if ghost is None:
                continue
            if isinstance(ghost, GeomBatch):
                g_depth, g_normal, g_rgba, _ = self._cast(ghost, rays, cam_pos, basis)
            else:
                g_depth, g_normal, g_rgba, _ = self._cast_model(ghost, rays, cam_pos)
            g_colour = self._shade(g_normal, g_rgba, forward)
            alpha = np.where(g_depth < depth, g_rgba[..., 3], 0.0)[..., None]
            image = image * (1.0 - alpha) + g_colour * alpha
        return (np.clip(image, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)

    def close(self) -> None:
        """Nothing to release."""
