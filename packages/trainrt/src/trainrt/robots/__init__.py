"""Robots as data: each robot a ``RobotDescription`` (``trainrt.robots.description``) that tasks take.

``ROBOTS`` maps a robot's name to its description; ``get_robot(name)`` looks one up.
``python -m trainrt.robots fetch`` fetches every robot's assets; ``python -m trainrt.robots path g1`` prints
a robot's MJCF path.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from trainrt.robots.description import ArmatureGains, EffortOverStiffness, ExplicitGains, RobotDescription
from trainrt.robots.g1 import G1

ROBOTS: Mapping[str, RobotDescription] = MappingProxyType({robot.name: robot for robot in (G1,)})
"""Robot name -> description."""


def get_robot(name: str) -> RobotDescription:
    """The description of robot ``name``; ValueError naming the known robots."""
    if name not in ROBOTS:
        raise ValueError(f"unknown robot {name!r}; valid: {', '.join(sorted(ROBOTS))}")
    return ROBOTS[name]


__all__ = [
    "G1",
    "ROBOTS",
    "ArmatureGains",
    "EffortOverStiffness",
    "ExplicitGains",
    "RobotDescription",
    "get_robot",
]
