"""``g1_walk_flat``: Unitree G1 velocity tracking on flat ground (config factory; terms live in ``trainrt.mdp``)."""

from trainrt.tasks.g1_walk_flat.env_cfg import g1_walk_flat_env_cfg

__all__ = ["g1_walk_flat_env_cfg"]
