"""The canonical preset of ``g1_walk_rough``: the SAC walking preset (``tasks/velocity/presets.py``) with the
model's own solver iterations (the G1 flat walk's 5, docs/perf/tuning/0022, were measured on flat ground only)."""

from __future__ import annotations

from trainrt.config.schema import TrainConfig
from trainrt.tasks.velocity.presets import sac_walk


def sac_g1_walk_rough() -> TrainConfig:
    """SAC on G1 velocity tracking on rough ground, 2048 envs on mjwarp."""
    return sac_walk("g1_walk_rough")
