"""The canonical presets of ``t1_walk_flat``: the walking presets (``tasks/velocity/presets.py``), the G1
walk's learner settings, with the model's own solver iterations (the G1 walk's 5, docs/perf/tuning/0022, were
measured on the G1 only). With them the T1 walked within 5 minutes on one H100
(docs/perf/2026-12-06-h100-suite-t1-and-g1-walk.md)."""

from __future__ import annotations

from trainrt.config.schema import TrainConfig
from trainrt.tasks.velocity.presets import flashsac_walk, sac_walk


def sac_t1_walk_flat() -> TrainConfig:
    """SAC on T1 velocity tracking, 2048 envs on mjwarp."""
    return sac_walk("t1_walk_flat")


def flashsac_t1_walk_flat() -> TrainConfig:
    """FlashSAC on T1 velocity tracking, 2048 envs on mjwarp."""
    return flashsac_walk("t1_walk_flat")
