"""``g1_walk_flat``: velocity tracking for the Unitree G1 on flat ground, the shared velocity task
(``trainrt.tasks.velocity``) with the G1's description."""

from __future__ import annotations

from trainrt.envs import EnvCfg
from trainrt.hotpath import cold_path
from trainrt.robots import G1
from trainrt.tasks.velocity.env_cfg import velocity_env_cfg


@cold_path
def g1_walk_flat_env_cfg() -> EnvCfg:
    """The ``g1_walk_flat`` task: the velocity task with the G1, a 0.8 s gait cycle, and the torso read."""
    return velocity_env_cfg(G1, gait_period_s=0.8, extra_bodies=("torso_link",))
