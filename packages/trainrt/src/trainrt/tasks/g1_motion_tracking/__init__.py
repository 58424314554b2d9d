"""``g1_motion_tracking``: BeyondMimic-style whole-body tracking of a reference clip by the Unitree G1."""

from trainrt.tasks.g1_motion_tracking.env_cfg import g1_motion_tracking_env_cfg

__all__ = ["g1_motion_tracking_env_cfg"]
