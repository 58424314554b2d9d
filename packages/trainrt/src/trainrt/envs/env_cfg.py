"""Configs of the manager-based RL env: the scene (model + what to read) and the term dicts of each manager."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import mujoco

from trainrt.managers import (
    ActionTermCfg,
    CommandTermCfg,
    CurriculumTermCfg,
    EventTermCfg,
    MetricTermCfg,
    ObsGroupCfg,
    RewardTermCfg,
    TerminationTermCfg,
)
from trainrt.terrain.cfg import TerrainGridCfg, TerrainMeshCfg


@dataclass
class SceneCfg:
    """The simulated scene: a model factory and the bodies, sensors and contact bodies terms read.

    ``foot_bodies`` not already in ``bodies`` are appended to the read plan, so terms find them with
    ``env.robot.body_ids(env.cfg.scene.foot_bodies)``.

    ``terrain`` (a ``trainrt.terrain.TerrainGridCfg``, default None: the model's own ground) makes the env draw
    that grid of terrain tiles from its run seed, load it into the model as a heightfield (``model_factory``
    then takes ``heightfields=``) and start every env on its tile (``trainrt.terrain.scene``).

    ``terrain_meshes`` (``trainrt.terrain.TerrainMeshCfg``, default none) puts static colliding meshes in every
    world, read from their files when the env is built (``model_factory`` then takes ``terrain_meshes=``);
    a tracking task sets it from the scene its clip needs (``trainrt.motion.scenes``).
    """

    model_factory: Callable[[], mujoco.MjModel]
    bodies: tuple[str, ...] = ()
    sensors: tuple[str, ...] = ()
    contact_bodies: tuple[str, ...] = ()
    foot_bodies: tuple[str, ...] = ()
    nconmax: int | None = None
    njmax: int | None = None
    init_root_height: float | None = None
    default_joint_pos: dict[str, float] = field(default_factory=dict)
    terrain: TerrainGridCfg | None = None
    terrain_meshes: tuple[TerrainMeshCfg, ...] = ()

    def __post_init__(self) -> None:
        if not callable(self.model_factory):
            raise ValueError(f"SceneCfg.model_factory must be callable, got {self.model_factory!r}")
        if self.terrain is not None and not isinstance(self.terrain, TerrainGridCfg):
            raise ValueError(
                f"SceneCfg.terrain must be a trainrt.terrain.TerrainGridCfg or None, got {self.terrain!r}"
            )
        self.terrain_meshes = tuple(self.terrain_meshes)
        wrong = [m for m in self.terrain_meshes if not isinstance(m, TerrainMeshCfg)]
        if wrong:
            raise ValueError(
                f"SceneCfg.terrain_meshes must hold trainrt.terrain.TerrainMeshCfg, got {wrong[0]!r}"
            )
        for name in ("bodies", "sensors", "contact_bodies", "foot_bodies"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise ValueError(f"SceneCfg.{name} must be a tuple of names, got the string {value!r}")
            setattr(self, name, tuple(value))

    @property
    def plan_bodies(self) -> tuple[str, ...]:
        """Bodies of the read plan: ``bodies`` then the ``foot_bodies`` not already listed."""
        return self.bodies + tuple(b for b in self.foot_bodies if b not in self.bodies)


@dataclass
class EnvCfg:
    """Everything a ``ManagerBasedRlEnv`` needs besides backend, size, device and seed."""

    scene: SceneCfg
    decimation: int = 4
    episode_length_s: float = 20.0
    actions: dict[str, ActionTermCfg] = field(default_factory=dict)
    observations: dict[str, ObsGroupCfg] = field(default_factory=dict)
    rewards: dict[str, RewardTermCfg] = field(default_factory=dict)
    terminations: dict[str, TerminationTermCfg] = field(default_factory=dict)
    events: dict[str, EventTermCfg] = field(default_factory=dict)
    commands: dict[str, CommandTermCfg] = field(default_factory=dict)
    curriculum: dict[str, CurriculumTermCfg] = field(default_factory=dict)
    metrics: dict[str, MetricTermCfg] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.scene, SceneCfg):
            raise ValueError(f"EnvCfg.scene must be a SceneCfg, got {self.scene!r}")
        if int(self.decimation) != self.decimation or self.decimation < 1:
            raise ValueError(f"EnvCfg.decimation must be an integer >= 1, got {self.decimation}")
        if not self.episode_length_s > 0:
            raise ValueError(f"EnvCfg.episode_length_s must be > 0, got {self.episode_length_s}")
