"""A robot as data: its pinned MJCF, joint order, default pose, PD gains, feet and action scale.

A ``RobotDescription`` names everything a task needs of a robot, so a task factory takes the robot and holds no
robot name of its own. simcore loads the model (``simcore.load_model``) and computes the generic pieces
(PD gains from armature, standing height); this module only says which robot and with what values.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import mujoco
import numpy as np

import simcore
from trainrt.hotpath import cold_path

if TYPE_CHECKING:
    from trainrt.envs import SceneCfg

FETCH_COMMAND = "uv run python -m trainrt.robots fetch"
"""The command that fetches every robot's assets (``make setup`` runs it)."""

FLOOR_BELOW_TERRAIN_M = 1.0
"""With terrain heightfields, the floor lies this far under their lowest point: it catches a robot that leaves
the terrain and never fills its pits."""


@dataclass(frozen=True)
class ArmatureGains:
    """PD gains from each joint's armature (``simcore.pd_gains_from_armature``): kp = I w^2, kd = 2 zeta I w;
    the effort limit is the MJCF's actuator force or control range."""

    natural_frequency_hz: float = 10.0
    damping_ratio: float = 2.0

    def resolve(self, model: mujoco.MjModel, joint_names: tuple[str, ...]) -> simcore.PdGains:
        """The gains of ``model``'s actuators (in ``joint_names`` order, which the actuators follow)."""
        return simcore.pd_gains_from_armature(model, self.natural_frequency_hz, self.damping_ratio)


@dataclass(frozen=True, eq=False)
class ExplicitGains:
    """PD gains given per joint: each map is ``{joint name regex: value}``, the first full match wins, and
    every joint must match a pattern of every map."""

    kp: Mapping[str, float]
    kd: Mapping[str, float]
    effort_limit: Mapping[str, float]

    def resolve(self, model: mujoco.MjModel, joint_names: tuple[str, ...]) -> simcore.PdGains:
        """The gains of ``joint_names`` (the actuator order) from the pattern maps (``model`` is unused)."""
        values = {
            what: [_first_match(patterns, name, what) for name in joint_names]
            for what, patterns in (("kp", self.kp), ("kd", self.kd), ("effort_limit", self.effort_limit))
        }
        return simcore.PdGains(**{k: np.asarray(v) for k, v in values.items()})


def _first_match(patterns: Mapping[str, float], name: str, what: str) -> float:
    """The value of the first pattern of ``patterns`` that fully matches joint ``name``; ValueError if none."""
    for pattern, value in patterns.items():
        if re.fullmatch(pattern, name):
            return float(value)
    raise ValueError(f"ExplicitGains.{what}: no pattern of {list(patterns)} matches joint {name!r}; add one")


@dataclass(frozen=True)
class EffortOverStiffness:
    """Action scale per joint = ``factor * effort_limit / kp`` (rad per unit action): an action of 1 asks
    for ``factor`` of the joint's peak torque as static PD error, so strong and weak joints get comparable
    authority (mjlab's G1 convention, factor 0.25)."""

    factor: float = 0.25


@dataclass(frozen=True, eq=False, repr=False)
class RobotDescription:
    """One robot, as data. Methods that load or compute are cached (the description is immutable).

    Attributes:
        name: the robot's short name (``"g1"``, ``"t1"``), its key in ``trainrt.robots.ROBOTS``.
        wheel: the pinned wheel its files come from.
        members: the wheel's files this robot needs and where they land in the asset cache.
        mjcf: the MJCF path relative to the asset cache folder.
        root_body: the free-floating root body (the base the velocity terms read).
        joint_names: the actuated joints in actuator order, the order of ``ctrl``, ``qpos[7:]`` and actions (J,).
        default_joint_pos: joint name -> radians of the default standing pose; joints not listed are 0.
        gains: how the PD servo gains come about (``ArmatureGains`` or ``ExplicitGains``).
        feet: the foot bodies in gait-clock order (any number: 2 for a biped, 4 for a quadruped) (F,).
        foot_geoms: regex of the sole collision geoms (friction randomization).
        gait_offsets: phase offset of each foot in the gait clock (``GaitPhaseCommand.foot_offsets``) (F,).
        action_scale: rad per unit action: one number for every joint (the T1's 0.25), or
            ``EffortOverStiffness`` (the G1's).
        self_collision_pairs: robot-robot contacts the scene enables (``simcore.load_model``'s pairs of body
            regexes).
        joint_groups: named groups of joint regexes that tasks refer to (``"hip"``, ``"waist"``, ``"arms"``).
        sole_clearance: gap (m) between the lowest sole point and the floor in the default standing pose.
        motions: the folder of the robot's motion clips relative to the asset cache, or None.
        default_motion: the file name of the clip (in ``motions``) that tracking uses when given none, or None.
    """

    name: str
    wheel: simcore.PinnedWheel
    members: tuple[simcore.WheelMember, ...]
    mjcf: str
    root_body: str
    joint_names: tuple[str, ...]
    default_joint_pos: Mapping[str, float]
    gains: ArmatureGains | ExplicitGains
    feet: tuple[str, ...]
    foot_geoms: str
    gait_offsets: tuple[float, ...]
    action_scale: float | EffortOverStiffness
    self_collision_pairs: tuple[tuple[str, str], ...] = ()
    joint_groups: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    sole_clearance: float = 0.002
    motions: str | None = None
    default_motion: str | None = None
    _computed: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def __repr__(self) -> str:
        return f"RobotDescription({self.name!r}, mjcf={self.mjcf!r})"

    def __post_init__(self) -> None:
        if len(self.gait_offsets) != len(self.feet):
            raise ValueError(
                f"robot {self.name!r}: gait_offsets {self.gait_offsets} must give one phase per foot of "
                f"{self.feet}"
            )
        unknown = [name for name in self.default_joint_pos if name not in self.joint_names]
        if unknown:
            raise ValueError(f"robot {self.name!r}: default_joint_pos names joints it lacks: {unknown}")

    def _once(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, run on the first call for ``key`` and kept (the description never changes)."""
        if key not in self._computed:
            self._computed[key] = compute()
        return self._computed[key]

    def asset_root(self) -> Path:
        """The asset cache folder of the robot's wheel (``simcore.asset_dir``)."""
        return simcore.asset_dir(self.wheel)

    def mjcf_path(self) -> Path:
        """The robot's MJCF file; FileNotFoundError naming the fetch command when it is not fetched."""
        path = self.asset_root() / self.mjcf
        if not path.is_file():
            raise FileNotFoundError(
                f"{self.name} model not found at {path}; run `make setup` (or `{FETCH_COMMAND}`) to fetch it."
            )
        return path

    @cold_path
    def fetch(self) -> Path:
        """Fetch, verify and extract the robot's files once (``simcore.fetch_wheel``); returns the cache folder."""
        return simcore.fetch_wheel(self.wheel, self.members, self.asset_root())

    @cold_path
    def model(
        self,
        self_collision: bool = False,
        heightfields: tuple[simcore.Heightfield, ...] = (),
        terrain_meshes: tuple[simcore.TerrainMesh, ...] = (),
    ) -> mujoco.MjModel:
        """A new headless model with a floor and PD position servos on every joint, with the
        ``self_collision_pairs`` contacts when ``self_collision`` (a fresh model per call: callers change it).
        With ``heightfields`` or ``terrain_meshes`` they are the ground, and the floor lies
        ``FLOOR_BELOW_TERRAIN_M`` under their lowest point (a floor at height 0 would fill the terrain's pits
        and double the contacts of a mesh's own ground)."""
        pairs = self.self_collision_pairs if self_collision else ()
        lows = [f.pos[2] + float(f.heights.min()) for f in heightfields]
        lows += [float(m.world_vertices()[:, 2].min()) for m in terrain_meshes]
        floor = min(lows, default=FLOOR_BELOW_TERRAIN_M)
        model = simcore.load_model(
            self.mjcf_path(),
            headless=True,
            pd=self.pd_gains(),
            self_collision_pairs=pairs,
            heightfields=tuple(heightfields),
            terrain_meshes=tuple(terrain_meshes),
            floor_height=floor - FLOOR_BELOW_TERRAIN_M,
        )
        self._check_joint_names(model)
        return model

    def _check_joint_names(self, model: mujoco.MjModel) -> None:
        """ValueError naming ``joint_names``, what is wrong and the valid names unless ``joint_names`` lists
        the joints of ``model``'s actuators in actuator order."""
        driven = [
            mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, model.actuator_trnid[i, 0])
            for i in range(model.nu)
        ]
        names = list(self.joint_names)
        if names == driven:
            return
        unknown = [n for n in names if n not in driven]
        missing = [n for n in driven if n not in names]
        if unknown or missing:
            problem = f"it names {unknown} that no actuator drives" if unknown else ""
            problem += (" and" if unknown and missing else "") + (f" it lacks {missing}" if missing else "")
        else:
            index = next(i for i, (a, b) in enumerate(zip(names, driven)) if a != b)
            problem = f"entry {index} is {names[index]!r}, but actuator {index} drives {driven[index]!r}"
        raise ValueError(
            f"robot {self.name!r}: RobotDescription.joint_names does not match the actuators of {self.mjcf}: "
            f"{problem.strip()}; valid (the actuated joints in actuator order): {driven}"
        )

    @cold_path
    def scene_model(
        self,
        heightfields: tuple[simcore.Heightfield, ...] = (),
        terrain_meshes: tuple[simcore.TerrainMesh, ...] = (),
    ) -> mujoco.MjModel:
        """The model the robot's tasks simulate: ``model(self_collision=True)`` (a ``SceneCfg.model_factory``;
        a scene with terrain passes its ``heightfields`` and ``terrain_meshes``)."""
        return self.model(self_collision=True, heightfields=heightfields, terrain_meshes=terrain_meshes)

    @cold_path
    def pd_gains(self) -> simcore.PdGains:
        """The PD servo gains of every actuator (J,), from ``gains`` over the MJCF as written (computed once)."""
        return self._once("pd_gains", self._pd_gains)

    def _pd_gains(self) -> simcore.PdGains:
        model = simcore.load_model(self.mjcf_path(), headless=True)
        self._check_joint_names(model)  # before the gains, whose patterns match joint_names
        return self.gains.resolve(model, self.joint_names)

    @cold_path
    def standing_root_height(self) -> float:
        """Root height (m) at which the default pose's soles rest ``sole_clearance`` above flat ground
        (computed once)."""
        return self._once(
            "standing_root_height",
            lambda: simcore.standing_root_height(
                self.model(), self.default_joint_pos, self.feet, self.sole_clearance
            ),
        )

    @cold_path
    def default_qpos(self, model: mujoco.MjModel) -> np.ndarray:
        """The default standing qpos of ``model`` (nq,): default joint positions, identity orientation, the
        root at ``standing_root_height()``."""
        return simcore.pose_qpos(model, self.default_joint_pos, self.standing_root_height())

    @cold_path
    def action_scales(self) -> dict[str, float]:
        """Joint name -> action scale (rad per unit action), from ``action_scale`` (computed once)."""
        return dict(self._once("action_scales", self._action_scales))

    def _action_scales(self) -> dict[str, float]:
        if not isinstance(self.action_scale, EffortOverStiffness):
            return {name: float(self.action_scale) for name in self.joint_names}
        gains = self.pd_gains()
        factor = self.action_scale.factor
        return {
            name: float(factor * effort / kp)
            for name, kp, effort in zip(self.joint_names, gains.kp, gains.effort_limit)
        }

    @cold_path
    def scene(self, bodies: tuple[str, ...], contact_bodies: tuple[str, ...] | None = None) -> SceneCfg:
        """The robot's scene (headless model, floor, PD servos, ``self_collision_pairs`` contacts) reading
        ``bodies`` and ``contact_bodies`` (default: the feet), the feet as foot bodies, and, with self-collision pairs, the
        self-collision count (``simcore.SELF_COLLISION_SENSOR``); it starts in the default standing pose."""
        from trainrt.envs import SceneCfg

        return SceneCfg(
            # one bound-method object for every scene, so two configs of one robot share their factory
            model_factory=self._once("scene_model_factory", lambda: self.scene_model),
            bodies=tuple(bodies),
            sensors=(simcore.SELF_COLLISION_SENSOR,) if self.self_collision_pairs else (),
            contact_bodies=tuple(self.feet if contact_bodies is None else contact_bodies),
            foot_bodies=tuple(self.feet),
            init_root_height=self.standing_root_height(),
            default_joint_pos=dict(self.default_joint_pos),
        )

    def motions_dir(self) -> Path:
        """The folder of the robot's motion clips; ValueError for a robot without clips."""
        if self.motions is None:
            raise ValueError(f"robot {self.name!r} has no motion clips among its assets")
        return self.asset_root() / self.motions

    def motion_files(self) -> tuple[Path, ...]:
        """The robot's motion clips (``.npz``), sorted; empty when none are fetched."""
        folder = self.motions_dir()
        return tuple(sorted(folder.glob("*.npz"))) if folder.is_dir() else ()
