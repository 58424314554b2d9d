"""Robots as data: each robot a ``RobotDescription`` (``trainrt.robots.description``) that tasks take.

``ROBOTS`` maps a robot's name to its description; ``get_robot(name)`` looks one up.
``fetch_assets()`` (``python -m trainrt.robots fetch``) fetches every robot's assets, one download per wheel;
``python -m trainrt.robots path g1`` prints a robot's MJCF path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType

import simcore
from trainrt.robots.description import ArmatureGains, EffortOverStiffness, ExplicitGains, RobotDescription
from trainrt.robots.g1 import G1
from trainrt.robots.t1 import T1

ROBOTS: Mapping[str, RobotDescription] = MappingProxyType({robot.name: robot for robot in (G1, T1)})
"""Robot name -> description."""


def get_robot(name: str) -> RobotDescription:
    """The description of robot ``name``; ValueError naming the known robots."""
    if name not in ROBOTS:
        raise ValueError(f"unknown robot {name!r}; valid: {', '.join(sorted(ROBOTS))}")
    return ROBOTS[name]


def fetch_assets(robots: Iterable[RobotDescription] | None = None) -> dict[str, Path]:
    """Fetch the assets of ``robots`` (default: every robot): one ``simcore.fetch_wheel`` per wheel over the
    members of all its robots, so robots sharing a wheel share one download. Returns robot name -> cache
    folder."""
    robots = list(ROBOTS.values() if robots is None else robots)
    members: dict[simcore.PinnedWheel, dict[simcore.WheelMember, None]] = {}
    roots: dict[simcore.PinnedWheel, Path] = {}
    for robot in robots:
        members.setdefault(robot.wheel, {}).update(dict.fromkeys(robot.members))
        roots.setdefault(robot.wheel, robot.asset_root())
    fetched = {wheel: simcore.fetch_wheel(wheel, tuple(m), roots[wheel]) for wheel, m in members.items()}
    return {robot.name: fetched[robot.wheel] for robot in robots}


__all__ = [
    "G1",
    "ROBOTS",
    "T1",
    "ArmatureGains",
    "EffortOverStiffness",
    "ExplicitGains",
    "RobotDescription",
    "fetch_assets",
    "get_robot",
]
