"""``t1_walk_flat``: velocity tracking for the Booster T1 on flat ground, the shared velocity task
(``trainrt.tasks.velocity``) with the T1's description.

Everything robot-specific comes from ``trainrt.robots.T1`` (feet, joint groups, standing height as the
``base_height_l2`` target, uniform 0.25 rad action scale, sole geoms, self-collision pairs); the reward weights,
commands, events and terminations are the G1 walk's, since holosoma uses identical reward weights for its G1
and T1 presets (holosoma/config_values/loco/t1/reward.py and loco/g1/reward.py). The T1 differs in its gait
clock: a 1.0 s cycle, holosoma's ``LocomotionGait`` default, which its T1 command preset keeps
(holosoma/config_values/loco/t1/command.py:10-12, holosoma/managers/command/terms/locomotion.py:126); the
G1 walk uses 0.8 s. Not taken from holosoma's T1 presets: its wider command ranges (lin_vel_y +-1 m/s,
loco/t1/command.py:16-21) and stronger pushes (up to 1.0 m/s, loco/t1/randomization.py:9-15), which the G1
walk does not use either.
"""

from __future__ import annotations

from trainrt.envs import EnvCfg
from trainrt.hotpath import cold_path
from trainrt.robots import T1
from trainrt.tasks.velocity.env_cfg import velocity_env_cfg

T1_GAIT_PERIOD_S = 1.0
"""One gait cycle (s): holosoma ``LocomotionGait``'s default ``gait_period``, unchanged by its T1 preset."""


@cold_path
def t1_walk_flat_env_cfg() -> EnvCfg:
    """The ``t1_walk_flat`` task: the velocity task with the T1 and a 1.0 s gait cycle (the Trunk is its root,
    so no extra body is read)."""
    return velocity_env_cfg(T1, gait_period_s=T1_GAIT_PERIOD_S)
