"""Velocity tracking on flat ground for any legged robot (``velocity.env_cfg.velocity_env_cfg``) and its
evaluation (``velocity.evaluation``), the same on rough ground (``velocity.rough_env_cfg``: terrain grid, level
curriculum, height scans; ``velocity.rough_evaluation``: each terrain type at its middle level); tasks register
them with a robot (``g1_walk_flat``, ``g1_walk_rough``). Registers nothing."""
