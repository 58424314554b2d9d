"""Ray casts: a fixed pattern of rays per world, attached to a body, cast after every step into fixed tensors.

``RayPattern`` says where the rays start (offsets from a body frame), where they point and which geoms they
see; ``SimBackend.ray_cast(body, pattern)`` negotiates a ``RayCast`` once, and step/forward/reset refresh it
like a read plan. The backend casts the rays (CPU: ``mujoco.mj_ray`` per ray at the host boundary; mjwarp:
``mujoco_warp.rays`` into preallocated arrays, no host sync, graph-safe); the pose math around it is torch.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import mujoco
import numpy as np
import torch

from simcore._src.model import TERRAIN_GEOM_GROUP
from simcore._src.read_plan import DerivedState

ALIGNMENTS = ("yaw", "full", "world")

NUM_GEOM_GROUPS = 6  # MuJoCo's mjNGROUP: ray casts filter geoms by these groups


@dataclass(frozen=True, eq=False)
class RayPattern:
    """Rays attached to a body frame: origins, directions, range and the geoms they see.

    Attributes:
        offsets: ray origins relative to the body frame origin, meters, ``(num_rays, 3)``.
        directions: ray directions, ``(num_rays, 3)`` or one ``(3,)`` for all (normalized here).
        max_distance: rays hit nothing farther than this, meters (> 0). A miss reads ``max_distance``.
        alignment: how the body's orientation moves the rays. ``"yaw"`` (default, a height scan): offsets
            turn with the body's heading only and directions stay in the world frame, so a tilting base
            still scans straight down; ``"full"``: offsets and directions turn with the body's full
            orientation; ``"world"``: offsets and directions are world-frame, only the position follows.
        geom_groups: geom groups the rays see (0-5); default ``TERRAIN_GEOM_GROUP`` only, where
            ``load_model`` puts the floor, heightfields and other world-body geoms, so rays never see the
            robot. None sees every group. Invisible geoms (rgba alpha 0) are never seen (MuJoCo's rule).
    """

    offsets: np.ndarray
    directions: np.ndarray = (0.0, 0.0, -1.0)
    max_distance: float = 10.0
    alignment: Literal["yaw", "full", "world"] = "yaw"
    geom_groups: tuple[int, ...] | None = (TERRAIN_GEOM_GROUP,)

    def __post_init__(self) -> None:
        try:
            offsets = np.array(self.offsets, dtype=np.float64)
            directions = np.array(self.directions, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("RayPattern offsets and directions must be arrays of numbers") from None
        if offsets.ndim != 2 or offsets.shape[1] != 3 or offsets.shape[0] < 1:
            raise ValueError(
                f"RayPattern.offsets must be (num_rays, 3) with num_rays >= 1, got {offsets.shape}"
            )
        if directions.shape == (3,):
            directions = np.broadcast_to(directions, offsets.shape).copy()
        if directions.shape != offsets.shape:
            raise ValueError(
                f"RayPattern.directions must be (3,) or {offsets.shape} like the offsets, got {directions.shape}"
            )
        if not (np.isfinite(offsets).all() and np.isfinite(directions).all()):
            raise ValueError("RayPattern offsets and directions must be finite")
        norms = np.linalg.norm(directions, axis=1, keepdims=True)
        if (norms < 1e-9).any():
            raise ValueError("RayPattern.directions must be non-zero vectors")
        directions = directions / norms
        for array in (offsets, directions):
            array.flags.writeable = False
        object.__setattr__(self, "offsets", offsets)
        object.__setattr__(self, "directions", directions)
        if isinstance(self.max_distance, bool) or not (
            isinstance(self.max_distance, (int, float))
            and math.isfinite(self.max_distance)
            and self.max_distance > 0
        ):
            raise ValueError(f"RayPattern.max_distance must be a positive number, got {self.max_distance!r}")
        object.__setattr__(self, "max_distance", float(self.max_distance))
        if self.alignment not in ALIGNMENTS:
            raise ValueError(
                f"RayPattern.alignment must be one of {list(ALIGNMENTS)}, got {self.alignment!r}"
            )
        if self.geom_groups is not None:
            if isinstance(self.geom_groups, int):
                object.__setattr__(self, "geom_groups", (self.geom_groups,))
            groups = tuple(self.geom_groups)
            if not groups or not all(
                isinstance(g, int) and not isinstance(g, bool) and 0 <= g < NUM_GEOM_GROUPS for g in groups
            ):
                raise ValueError(
                    f"RayPattern.geom_groups must be a non-empty tuple of ints in 0..5 or None, got {groups!r}"
                )
            object.__setattr__(self, "geom_groups", tuple(sorted(set(groups))))

    @property
    def num_rays(self) -> int:
        """Number of rays R."""
        return int(self.offsets.shape[0])

    @classmethod
    def grid(
        cls,
        size: Sequence[float],
        resolution: float,
        height: float = 0.0,
        direction: Sequence[float] = (0.0, 0.0, -1.0),
        **kwargs,
    ) -> RayPattern:
        """A regular grid of parallel rays: ``size = (length_x, width_y)`` meters centered on the body, one ray
        every ``resolution`` meters, origins ``height`` above the body origin (along z of the aligned frame),
        all pointing along ``direction`` (default straight down). Rays run over x fastest, then y:
        ``ray = iy * nx + ix``. Other keywords go to ``RayPattern``."""
        size = tuple(float(v) for v in size)
        if len(size) != 2 or not all(math.isfinite(v) and v >= 0 for v in size):
            raise ValueError(f"grid size must be two non-negative numbers (x, y), got {size!r}")
        if not (math.isfinite(resolution) and resolution > 0):
            raise ValueError(f"grid resolution must be a positive number, got {resolution!r}")
        counts = [math.floor(extent / resolution + 1e-9) + 1 for extent in size]
        xs, ys = (np.linspace(-extent / 2, extent / 2, n) for extent, n in zip(size, counts))
        gx, gy = np.meshgrid(xs, ys, indexing="xy")
        offsets = np.stack([gx.ravel(), gy.ravel(), np.full(gx.size, float(height))], axis=1)
        return cls(offsets=offsets, directions=direction, **kwargs)


RayCaster = Callable[[torch.Tensor | None], None]
"""Backend work that casts ``origin_w``/``direction_w`` of a RayCast into its raw distances (-1 for a miss):
``caster(None)`` casts every row; ``caster(rows)``, rows a ``(num_envs,)`` bool tensor, only the rows set there
(the others keep the distances of the last cast: after a reset their pose has not changed)."""


class RayCast:
    """A negotiated ray pattern on one body; the backend refreshes it after every step/forward/reset.

    Attributes:
        body_name: the body the rays follow.
        pattern: the ``RayPattern``.
        num_rays: R.
        origin_w: ray origins, world frame                        (num_envs, R, 3)
        direction_w: unit ray directions, world frame             (num_envs, R, 3)
        distance: distance to the nearest seen surface along each ray; ``pattern.max_distance`` on a miss
            (nothing within range), never NaN                      (num_envs, R)
        hit: whether the ray hit a surface within range           (num_envs, R)
        hit_pos_w: hit point, world frame; on a miss the ray's end at ``max_distance`` (non-finite only where
            the body pose itself is, e.g. a blown-up world; ``distance`` is finite even then)
                                                                   (num_envs, R, 3)
        hit_height: world z of ``hit_pos_w`` (a height scan)      (num_envs, R)
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        derived: DerivedState,
        body: str,
        pattern: RayPattern,
    ) -> None:
        if not isinstance(pattern, RayPattern):
            raise ValueError(f"pattern must be a simcore.RayPattern, got {type(pattern).__name__}")
        if not isinstance(body, str):
            raise ValueError(f"body must be a body name, got {body!r}")
        body_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, body)
        if body_id < 0:
            valid = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(model.nbody)]
            raise ValueError(f"unknown body name {body!r}; valid: {[v for v in valid if v]}")
        if pattern.geom_groups is not None:
            seen = np.isin(model.geom_group, pattern.geom_groups) & (model.geom_rgba[:, 3] > 0)
            if not seen.any():
                raise ValueError(
                    f"no visible geom lies in geom groups {list(pattern.geom_groups)}: these rays would never "
                    "hit anything; load the model with simcore.load_model (terrain in TERRAIN_GEOM_GROUP) or pass "
                    "RayPattern(geom_groups=...)"
                )
        self.body_name = body
        self.pattern = pattern
        self.num_rays = pattern.num_rays
        self._derived = derived
        self._body_id = body_id
        xpos = derived.xpos
        n, r, dtype, device = xpos.shape[0], pattern.num_rays, xpos.dtype, xpos.device
        self._offsets = torch.tensor(np.array(pattern.offsets), dtype=dtype, device=device)
        self._directions = torch.tensor(np.array(pattern.directions), dtype=dtype, device=device)
        self.origin_w = torch.zeros((n, r, 3), dtype=dtype, device=device)
        self.direction_w = torch.zeros((n, r, 3), dtype=dtype, device=device)
        self.distance = torch.full((n, r), pattern.max_distance, dtype=dtype, device=device)
        self._miss = torch.full((n, r), pattern.max_distance, dtype=dtype, device=device)
        self.hit = torch.zeros((n, r), dtype=torch.bool, device=device)
        self.hit_pos_w = torch.zeros((n, r, 3), dtype=dtype, device=device)
        self.hit_height = torch.zeros((n, r), dtype=dtype, device=device)
        self._raw: torch.Tensor | None = None
        self._cast: RayCaster | None = None

    @property
    def geomgroup(self) -> np.ndarray:
        """The ``(6,)`` uint8 group mask MuJoCo's ray functions take (all ones when every group is seen)."""
        mask = np.zeros(NUM_GEOM_GROUPS, dtype=np.uint8)
        mask[list(self.pattern.geom_groups) if self.pattern.geom_groups is not None else slice(None)] = 1
        return mask

    def _bind(self, cast: RayCaster, raw: torch.Tensor) -> None:
        """The backend's casting work and the ``(num_envs, R)`` tensor it writes raw distances into."""
        self._cast, self._raw = cast, raw

    def _refresh(self, rows: torch.Tensor | None = None) -> None:
        """Place the rays from the body pose, cast them, and fill the outputs (fixed-shape torch ops; the cast
        is the backend's: no host sync on device backends). ``rows`` (a reset's ``(num_envs,)`` bool mask): cast
        only those rows; every other row's pose is unchanged since the last cast, so its distances are too, and
        the outputs are recomputed from them to the same bits."""
        d = self._derived
        pos = d.xpos[:, self._body_id]  # (N, 3)
        quat = d.xquat[:, self._body_id]  # (N, 4) wxyz
        offsets = self._offsets.unsqueeze(0)  # (1, R, 3)
        directions = self._directions.unsqueeze(0).expand_as(self.direction_w)
        alignment = self.pattern.alignment
        if alignment == "full":
            offsets = _rotate(quat.unsqueeze(1), offsets)
            directions = _rotate(quat.unsqueeze(1), directions)
        elif alignment == "yaw":
            w, x, y, z = quat.unbind(-1)
            yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z)).unsqueeze(1)  # (N, 1)
            cos, sin = torch.cos(yaw), torch.sin(yaw)
            ox, oy, oz = offsets.unbind(-1)
            offsets = torch.stack((cos * ox - sin * oy, sin * ox + cos * oy, oz.expand_as(cos * ox)), dim=-1)
        torch.add(pos.unsqueeze(1), offsets, out=self.origin_w)
        self.direction_w.copy_(directions)
        self._cast(rows)
        raw = self._raw
        max_distance = self.pattern.max_distance
        torch.logical_and(raw >= 0, raw <= max_distance, out=self.hit)
        torch.where(self.hit, raw, self._miss, out=self.distance)
        torch.addcmul(self.origin_w, self.direction_w, self.distance.unsqueeze(-1), out=self.hit_pos_w)
        self.hit_height.copy_(self.hit_pos_w[..., 2])


def _rotate(quat: torch.Tensor, vec: torch.Tensor) -> torch.Tensor:
    """Rotate ``vec`` (..., 3) by unit quaternions ``quat`` (..., 4) wxyz (broadcasting)."""
    u, vec = torch.broadcast_tensors(quat[..., 1:], vec)
    uv = torch.linalg.cross(u, vec, dim=-1)
    return vec + 2.0 * (quat[..., :1] * uv + torch.linalg.cross(u, uv, dim=-1))
