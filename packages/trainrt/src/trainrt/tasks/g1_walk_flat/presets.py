"""The canonical presets of ``g1_walk_flat``: the walking presets (``tasks/velocity/presets.py``) with the
G1's solver iterations."""

from __future__ import annotations

from trainrt.config.schema import TrainConfig
from trainrt.tasks.velocity.presets import flashsac_walk, sac_walk


def sac_g1_walk_flat() -> TrainConfig:
    """Canonical workload 1: SAC on G1 velocity tracking, 2048 envs on mjwarp."""
    # The constraint solver stops after 5 iterations instead of the model's 10: the walk learns as well in 5
    # minutes, the policy walks as well under 10 iterations on CPU MuJoCo, and a contact-rich control step
    # costs about 0.82x (docs/perf/tuning/0022).
    return sac_walk("g1_walk_flat", solver_iterations=5)


def flashsac_g1_walk_flat() -> TrainConfig:
    """FlashSAC on G1 velocity tracking, 2048 envs on mjwarp."""
    return flashsac_walk("g1_walk_flat")
