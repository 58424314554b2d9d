"""Terms for terrain: the curriculum's level update, height scans, heights above the ground, leaving the grid.

``TerrainLevels`` (a curriculum term) moves each finished env's level by how far it walked against its
command (``TerrainCurriculum``) and reports the mean level and the fraction of envs at each level
(``Curriculum/<name>/mean_level``, ``.../level_<i>``: the console, TensorBoard and ``run_summary.json``'s
``episode_statistics``). It needs ``SceneCfg.terrain``.

``HeightScan`` (an observation term) casts a grid of rays straight down around a body (``simcore``'s
``ray_cast``, ``Capability.RAY_CAST``) and reports the ground's height under each ray relative to the body,
clipped. ``RootHeightAboveTerrain`` is the root's height over the ground under it (the mean of a few rays),
for rewards, terminations and metrics that must not read a world height on uneven ground. Both work on any
terrain the rays see (the floor, a heightfield, an MJCF's own steps), and share one negotiated ray cast per
pattern, so a policy and a critic term with the same params cast once.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import mujoco
import torch

import simcore
from trainrt.hotpath import cold_path
from trainrt.managers import ManagerTermBase

if TYPE_CHECKING:
    from trainrt.envs import ManagerBasedRlEnv

_RAY_CASTS: weakref.WeakKeyDictionary[Any, dict[tuple, simcore.RayCast]] = weakref.WeakKeyDictionary()
"""Backend -> negotiated ray casts by (body, pattern geometry): terms with the same rays share one cast."""


@cold_path
def root_body_name(env: ManagerBasedRlEnv) -> str:
    """The body of the model's free joint (the robot's root); ValueError without one."""
    model = env.backend.mj_model
    free = [j for j in range(model.njnt) if int(model.jnt_type[j]) == mujoco.mjtJoint.mjJNT_FREE.value]
    if not free:
        raise ValueError("the model has no free joint: name the scanned body with params['body_name']")
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, int(model.jnt_bodyid[free[0]]))


@cold_path
def shared_ray_cast(
    owner: str, env: ManagerBasedRlEnv, body: str, pattern: simcore.RayPattern
) -> simcore.RayCast:
    """``env.backend.ray_cast(body, pattern)``, negotiated once per backend for equal rays.

    NotImplementedError naming ``owner`` and ``Capability.RAY_CAST`` when the backend cannot cast rays."""
    backend = env.backend
    if simcore.Capability.RAY_CAST not in backend.declared_capabilities:
        declared = sorted(c.name for c in backend.declared_capabilities)
        raise NotImplementedError(
            f"{owner} casts rays: it needs a backend that declares Capability.RAY_CAST; backend "
            f"{backend.name!r} declares {declared}; use a backend that declares it (mujoco, mjwarp) or drop the term"
        )
    key = (
        body,
        pattern.offsets.tobytes(),
        pattern.directions.tobytes(),
        pattern.max_distance,
        pattern.alignment,
        pattern.geom_groups,
    )
    casts = _RAY_CASTS.setdefault(backend, {})
    if key not in casts:
        casts[key] = backend.ray_cast(body, pattern)
    return casts[key]


def _pair(owner: str, name: str, value: Sequence[float], *, positive: bool = False) -> tuple[float, float]:
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"{owner}: params[{name!r}] must be two numbers, got {value!r}") from None
    if positive and not (low >= 0 and high >= 0):
        raise ValueError(f"{owner}: params[{name!r}] must be two numbers >= 0, got {value!r}")
    if not positive and low > high:
        raise ValueError(f"{owner}: params[{name!r}] must be (low, high) with low <= high, got {value!r}")
    return low, high


def _ray_grid(params: Mapping[str, Any], size: tuple[float, float]) -> tuple[float, simcore.RayPattern]:
    """The ray height (``params["ray_height"]``, meters above the body) and a grid of rays straight down from
    it over ``size`` meters, ``params["resolution"]`` apart and at most ``params["max_distance"]`` long."""
    ray_height = float(params["ray_height"])
    pattern = simcore.RayPattern.grid(
        size, float(params["resolution"]), height=ray_height, max_distance=params["max_distance"]
    )
    return ray_height, pattern


class HeightScan(ManagerTermBase):
    """The ground's height under a grid of rays around a body, relative to it: ``(num_envs, R)``.

    Each value is ``body_z - ground_z - offset``, clipped to ``clip``: about ``body height - offset`` on flat
    ground, larger over a dip, smaller before a step up. Rays start ``ray_height`` above the body, point
    straight down and turn with its heading only (``RayPattern.grid``, ``alignment="yaw"``; ray ``iy * nx + ix``,
    x fastest); a ray that hits nothing within ``max_distance`` reads the clip's top.

    Params:
        body_name: the scanned body (default None: the robot's root).
        size: ``(length_x, width_y)`` of the grid, meters.
        resolution: meters between rays.
        offset: subtracted from every value (meters), so flat ground reads near 0.
        clip: ``(low, high)`` bounds of the values, meters.
        ray_height: ray origins above the body, meters (above any step the scan should see).
        max_distance: longest ray, meters.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {
        "body_name": None,
        "size": (1.6, 1.0),
        "resolution": 0.1,
        "offset": 0.5,
        "clip": (-1.0, 1.0),
        "ray_height": 2.0,
        "max_distance": 10.0,
    }

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        owner = type(self).__name__
        p = self.params
        body = p["body_name"] if p["body_name"] is not None else root_body_name(env)
        self.size = _pair(owner, "size", p["size"], positive=True)
        self.clip = _pair(owner, "clip", p["clip"])
        try:
            self.offset = float(p["offset"])
            self.ray_height, pattern = _ray_grid(p, self.size)
        except (TypeError, ValueError) as err:
            raise ValueError(f"{owner}: {err}") from None
        self.rays = shared_ray_cast(f"observation term {owner}", env, body, pattern)
        self.body_name = body

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """``(num_envs, R)`` float32 clipped heights of the body over the ground under each ray."""
        rays = self.rays
        body_z = rays.origin_w[..., 2] - self.ray_height
        relative = body_z - rays.hit_height - self.offset
        return torch.clamp(relative, self.clip[0], self.clip[1]).to(torch.float32)


class RootHeightAboveTerrain(ManagerTermBase):
    """The root's height over the ground under it, ``(num_envs,)``: root z minus the mean ground height of a
    small grid of rays around it (``footprint`` meters a side, ``resolution`` apart; one ray when 0).

    As a termination (``minimum_height`` set) it is True where the root is lower than ``minimum_height`` over
    the ground (a fall on any terrain). ``target_height`` set: the squared error to it (a reward).

    Params:
        footprint: side of the square of rays, meters.
        resolution: meters between rays.
        minimum_height: None, or the height under which the term reports True (a termination).
        target_height: None, or the height whose squared error the term reports (a reward).
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {
        "footprint": 0.2,
        "resolution": 0.1,
        "minimum_height": None,
        "target_height": None,
        "ray_height": 2.0,
        "max_distance": 10.0,
    }

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        owner = type(self).__name__
        p = self.params
        if p["minimum_height"] is not None and p["target_height"] is not None:
            raise ValueError(
                f"{owner}: set minimum_height (a termination) or target_height (a reward), not both"
            )
        side = float(p["footprint"])
        self.ray_height, pattern = _ray_grid(p, (side, side))
        self.rays = shared_ray_cast(f"term {owner}", env, root_body_name(env), pattern)
        self.minimum = None if p["minimum_height"] is None else float(p["minimum_height"])
        self.target = None if p["target_height"] is None else float(p["target_height"])

    def height(self) -> torch.Tensor:
        """``(num_envs,)`` float32 root height over the mean ground height under it."""
        rays = self.rays
        root_z = rays.origin_w[:, 0, 2] - self.ray_height
        return (root_z - rays.hit_height.mean(dim=1)).to(torch.float32)

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        height = self.height()
        if self.minimum is not None:
            return height < self.minimum
        if self.target is not None:
            return torch.square(height - self.target)
        return height


class TerrainLevels(ManagerTermBase):
    """Curriculum: at each episode end, move the env a level up when it walked more than half a tile from its
    tile's centre, down when it walked less than half of what its command asked for over an episode
    (``TerrainCurriculum.update``). Rows whose episode has not started (``episode_length_buf == 0``, e.g. the
    first reset) stay. Reports ``mean_level``, ``mean_level/<type>`` (the mean level of the envs on each
    terrain type's columns, 0 where no env is: which ground holds the robots back) and ``level_<i>`` (the
    fraction of envs at level ``i``).

    Params:
        command_name: the velocity command (its first two columns are the commanded planar velocity).
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {"command_name": "twist"}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        if getattr(env, "terrain", None) is None:
            raise ValueError(
                "curriculum term TerrainLevels needs a terrain: set SceneCfg.terrain (a TerrainGridCfg)"
            )
        self.command_name = str(self.params["command_name"])
        if self.command_name not in env.cfg.commands:
            raise ValueError(
                f"TerrainLevels: params['command_name'] {self.command_name!r} is not a command of the task; "
                f"valid: {sorted(env.cfg.commands)}"
            )
        self.curriculum = env.terrain.curriculum
        self.episode_s = env.max_episode_length * env.step_dt
        self._levels = [f"level_{i}" for i in range(self.curriculum.num_levels)]
        names = list(dict.fromkeys(env.terrain.column_types))  # the types that have columns, in column order
        self._types = [f"mean_level/{name}" for name in names]
        device = self.curriculum.levels.device
        self._type_of_column = torch.tensor(
            [names.index(t) for t in env.terrain.column_types], dtype=torch.long, device=device
        )
        self._type_ids = torch.arange(len(names), device=device)

    def __call__(self, env: ManagerBasedRlEnv, env_mask: torch.Tensor) -> dict[str, torch.Tensor]:
        curriculum = self.curriculum
        started = torch.logical_and(env_mask, env.episode_length_buf > 0)
        origin = curriculum.origins()
        walked = torch.linalg.vector_norm(env.robot.root_pos_w[:, :2] - origin[:, :2], dim=1)
        command = env.command_manager.command(self.command_name)[:, :2]
        commanded = torch.linalg.vector_norm(command, dim=1) * self.episode_s
        curriculum.update(started, walked, commanded)
        shares = curriculum.level_distribution()
        on_type = (self._type_of_column[curriculum.columns][None, :] == self._type_ids[:, None]).float()
        per_type = (on_type @ curriculum.levels.float()) / on_type.sum(dim=1).clamp(min=1.0)
        return {
            "mean_level": curriculum.mean_level(),
            **dict(zip(self._types, per_type.unbind(0))),
            **dict(zip(self._levels, shares.unbind(0))),
        }


def terrain_out_of_bounds(env: ManagerBasedRlEnv, margin: float = 1.0) -> torch.Tensor:
    """``(num_envs,)`` True where the root is within ``margin`` meters of the terrain's edge (or beyond): an
    env that walked off the grid ends (a time-out, not a failure, in the rough walk). Needs ``SceneCfg.terrain``."""
    if env.terrain is None:
        raise ValueError(
            "termination terrain_out_of_bounds needs a terrain: set SceneCfg.terrain (a TerrainGridCfg)"
        )
    hx, hy = env.terrain.half_extent
    pos = env.robot.root_pos_w
    return torch.logical_or(pos[:, 0].abs() > hx - margin, pos[:, 1].abs() > hy - margin)
