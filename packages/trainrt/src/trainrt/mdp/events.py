"""Event terms: ``term(env, env_mask, **params)``, changing only rows where ``env_mask`` (num_envs,) is True.

Reset events compose on the env's reset payload (``env.reset_payload``), which holds the default state (or
what a command term wrote there) when they run; the env applies it in one reset transaction. Interval events
write the live state (``backend.qvel``) with ``torch.where`` on the mask. Startup events write per-world
model fields once. Every draw comes from ``env.rng``, for all rows, so shapes never depend on the mask. The
reset and interval events are ``EventTerm``s: their draws (``draw_``) stand apart from their math (``apply``).

Range dicts use the keys ``x, y, z`` (linear, m or m/s) and ``roll, pitch, yaw`` (angular, rad or rad/s);
missing keys mean ``(0, 0)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import mujoco
import torch

from trainrt.compiled import where_into
from trainrt.hotpath import cold_path
from trainrt.managers import REQUIRED, EventTerm, ManagerTermBase
from trainrt.mdp.math import quat_apply_inverse, quat_from_euler_xyz, quat_mul, quat_normalize
from trainrt.mdp.name_matching import match_names
from trainrt.mdp.state_layout import robot_state_layout

if TYPE_CHECKING:
    from trainrt.envs import ManagerBasedRlEnv

RANGE_KEYS = ("x", "y", "z", "roll", "pitch", "yaw")


@cold_path
def range_bounds(owner: str, ranges: Mapping[str, Sequence[float]], device: torch.device) -> torch.Tensor:
    """Bounds ``(2, 6)`` (low row, high row) of a range dict over ``RANGE_KEYS``; ValueError for bad entries."""
    unknown = sorted(set(ranges) - set(RANGE_KEYS))
    if unknown:
        raise ValueError(f"{owner}: unknown range keys {unknown}; valid: {list(RANGE_KEYS)}")
    bounds = []
    for key in RANGE_KEYS:
        low, high = (float(v) for v in ranges.get(key, (0.0, 0.0)))
        if not (math.isfinite(low) and math.isfinite(high) and low <= high):
            raise ValueError(
                f"{owner}: range {key!r} must be finite (low, high) with low <= high, got {ranges[key]}"
            )
        bounds.append((low, high))
    return torch.tensor(bounds, device=device).T.contiguous()


class ResetRootStateUniform(EventTerm):
    """Offset the root pose and set the root velocity of reset rows, uniformly within ranges.

    Position offsets add to the payload's root position; the orientation becomes ``q(roll, pitch, yaw) * q``;
    the root velocity becomes the sampled world-frame linear and angular velocity.

    Params:
        pose_range: ``{x, y, z, roll, pitch, yaw}`` offsets.
        velocity_range: ``{x, y, z, roll, pitch, yaw}`` world-frame velocities.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {"pose_range": {}, "velocity_range": {}}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        self.layout = robot_state_layout(env)
        name = type(self).__name__
        self.pose_bounds = range_bounds(name, self.params["pose_range"], env.device)
        self.velocity_bounds = range_bounds(name, self.params["velocity_range"], env.device)
        # Pose and velocity bounds side by side: one multiply and one add map all 12 draws; the span is the
        # same float32 difference the per-call subtraction gave.
        bounds = torch.cat((self.pose_bounds, self.velocity_bounds), dim=1)
        self._low, self._span = bounds[0], bounds[1] - bounds[0]
        self._draw = torch.zeros(env.num_envs, 12, device=env.device)

    def draw_(self, generator: torch.Generator) -> None:
        """Draw the pose offsets and velocities of every row."""
        self._draw.uniform_(0.0, 1.0, generator=generator)

    def apply(self, env: ManagerBasedRlEnv, env_mask: torch.Tensor) -> None:
        """Write the payload's root pose and velocity for rows where ``env_mask`` is True."""
        lay, qpos, qvel = self.layout, env.reset_payload["qpos"], env.reset_payload["qvel"]
        draw = self._low + self._span * self._draw
        pose, vel = draw[:, :6], draw[:, 6:]
        pos = qpos[:, lay.root_pos].to(torch.float32) + pose[:, :3]
        delta = quat_from_euler_xyz(pose[:, 3], pose[:, 4], pose[:, 5])
        quat = quat_normalize(quat_mul(delta, qpos[:, lay.root_quat].to(torch.float32)))
        ang_vel_b = quat_apply_inverse(quat, vel[:, 3:])
        rows = env_mask.unsqueeze(1)
        # Each select writes the payload in place (a float32 value widens exactly to a float64 payload).
        where_into(rows, pos, qpos[:, lay.root_pos])
        where_into(rows, quat, qpos[:, lay.root_quat])
        where_into(rows, vel[:, :3], qvel[:, lay.root_lin_vel])
        where_into(rows, ang_vel_b, qvel[:, lay.root_ang_vel])


class ResetJointsAroundDefault(EventTerm):
    """Offset the joint positions and set the joint velocities of reset rows, uniformly within ranges.

    Positions add ``U(position_range)`` to the payload's joint positions (the default pose unless a command
    wrote them) and are clamped to the joint limits; velocities become ``U(velocity_range)``.

    Params:
        position_range: ``(low, high)`` offset in rad.
        velocity_range: ``(low, high)`` in rad/s.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {"position_range": (0.0, 0.0), "velocity_range": (0.0, 0.0)}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        self.layout = robot_state_layout(env)
        ranges = []
        for key in ("position_range", "velocity_range"):
            low, high = (float(v) for v in self.params[key])
            if not low <= high:
                raise ValueError(f"ResetJointsAroundDefault: {key} must be (low, high) with low <= high")
            ranges.append((low, high))
        self.position_range, self.velocity_range = ranges
        # (2, 1) columns of low and span for the position and velocity draws: one multiply and one add map
        # both, with the same float32 factors the per-range scalars gave.
        self._low = torch.tensor([[r[0]] for r in ranges], device=env.device)
        self._span = torch.tensor([[r[1] - r[0]] for r in ranges], device=env.device)
        limits = env.robot.joint_pos_limits
        self.lower, self.upper = limits[:, 0], limits[:, 1]
        self._draw = torch.zeros(env.num_envs, 2, env.robot.num_joints, device=env.device)

    def draw_(self, generator: torch.Generator) -> None:
        """Draw the joint offsets and velocities of every row."""
        self._draw.uniform_(0.0, 1.0, generator=generator)

    def apply(self, env: ManagerBasedRlEnv, env_mask: torch.Tensor) -> None:
        """Write the payload's joint positions and velocities for rows where ``env_mask`` is True."""
        lay, qpos, qvel = self.layout, env.reset_payload["qpos"], env.reset_payload["qvel"]
        draw = self._low + self._span * self._draw
        offset, velocity = draw[:, 0], draw[:, 1]
        q = torch.clamp(qpos[:, lay.joint_pos].to(torch.float32) + offset, self.lower, self.upper)
        rows = env_mask.unsqueeze(1)
        where_into(rows, q, qpos[:, lay.joint_pos])
        where_into(rows, velocity, qvel[:, lay.joint_vel])


class PushByVelocity(EventTerm):
    """Kick the root of the masked rows: add a uniform velocity change to the live ``backend.qvel``.

    Linear components (``x, y, z``) are world frame; angular ones (``roll, pitch, yaw``) are root frame (the
    free joint's convention). Body velocities in the read plan catch up at the next physics step.

    Params:
        velocity_range: ``{x, y, z, roll, pitch, yaw}`` velocity changes.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {"velocity_range": {}}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        self.layout = robot_state_layout(env)
        self.bounds = range_bounds(type(self).__name__, self.params["velocity_range"], env.device)
        self._span = self.bounds[1] - self.bounds[0]
        self._draw = torch.zeros(env.num_envs, 6, device=env.device)
        self._root = slice(self.layout.root_lin_vel.start, self.layout.root_ang_vel.stop)

    def draw_(self, generator: torch.Generator) -> None:
        """Draw the velocity change of every row."""
        self._draw.uniform_(0.0, 1.0, generator=generator)

    def apply(self, env: ManagerBasedRlEnv, env_mask: torch.Tensor) -> None:
        """Add the kick to the root velocity of rows where ``env_mask`` is True."""
        qvel = env.backend.qvel
        kick = self.bounds[0] + self._span * self._draw
        root = qvel[:, self._root]
        where_into(env_mask.unsqueeze(1), root + kick.to(qvel.dtype), root)


class RandomizeGeomFriction(ManagerTermBase):
    """Startup: draw the sliding friction of ``geom_names`` per world (shared by those geoms in a world).

    Writes ``backend.model_fields["geom_friction"][:, geoms, 0]`` for the masked worlds. MuJoCo combines two
    geoms' friction by taking the larger, so the floor's friction is the lower bound of the result.

    Params:
        geom_names: geom patterns (exact names or regexes).
        friction_range: ``(low, high)`` sliding friction coefficient.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {"geom_names": REQUIRED, "friction_range": (1.0, 1.0)}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        if getattr(cfg, "mode", "startup") != "startup":
            raise ValueError(
                "RandomizeGeomFriction runs at startup only (model fields change outside resets)"
            )
        fields = env.backend.model_fields
        if "geom_friction" not in fields:
            raise ValueError(
                f"RandomizeGeomFriction needs the per-world field 'geom_friction'; backend fields: {sorted(fields)}"
            )
        model = env.backend.mj_model
        names = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(model.ngeom)]
        ids = match_names(self.params["geom_names"], names, "geom")
        self.geom_ids = torch.tensor(ids, dtype=torch.long, device=env.device)
        low, high = (float(v) for v in self.params["friction_range"])
        if not 0.0 <= low <= high:
            raise ValueError(
                f"RandomizeGeomFriction: friction_range must be 0 <= low <= high, got {(low, high)}"
            )
        self.friction_range = (low, high)
        self._draw = torch.zeros(env.num_envs, 1, device=env.device)

    def __call__(self, env: ManagerBasedRlEnv, env_mask: torch.Tensor) -> None:
        """Draw and write the friction of the selected geoms in worlds where ``env_mask`` is True."""
        friction = env.backend.model_fields["geom_friction"]
        self._draw.uniform_(*self.friction_range, generator=env.rng)
        current = friction[:, self.geom_ids, 0]
        new = self._draw.to(friction.dtype).expand_as(current)
        friction[:, self.geom_ids, 0] = torch.where(env_mask.unsqueeze(1), new, current)
