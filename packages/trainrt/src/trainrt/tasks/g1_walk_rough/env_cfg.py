"""``g1_walk_rough``: velocity tracking for the Unitree G1 on rough ground, the rough velocity task
(``trainrt.tasks.velocity.rough_env_cfg``) with the G1's description and the flat G1 walk's gait."""

from __future__ import annotations

from trainrt.envs import EnvCfg
from trainrt.hotpath import cold_path
from trainrt.robots import G1
from trainrt.tasks.velocity.rough_env_cfg import rough_velocity_env_cfg


@cold_path
def g1_walk_rough_env_cfg() -> EnvCfg:
    """The ``g1_walk_rough`` task: ``g1_walk_flat`` on the rough terrain grid, with height scans and the
    terrain curriculum."""
    return rough_velocity_env_cfg(G1, gait_period_s=0.8, extra_bodies=("torso_link",))
