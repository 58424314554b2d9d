"""Whole-body motion tracking for any robot whose clip names its joints (``tracking.env_cfg.motion_tracking_env_cfg``),
its command (``tracking.command``), its terms (``tracking.mdp``) and its evaluation (``tracking.evaluation``);
tasks register it with a robot and a clip (``g1_motion_tracking``). Registers nothing."""
