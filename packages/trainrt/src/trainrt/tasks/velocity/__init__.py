"""Velocity tracking on flat ground for any legged robot (``velocity.env_cfg.velocity_env_cfg``) and its
evaluation (``velocity.evaluation``); tasks register it with a robot (``g1_walk_flat``). Registers nothing."""
