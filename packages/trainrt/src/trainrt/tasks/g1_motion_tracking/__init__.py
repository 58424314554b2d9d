"""``g1_motion_tracking``: BeyondMimic-style whole-body tracking of a reference clip by the Unitree G1, the
tracking task (``trainrt.tasks.tracking``) registered with the G1."""

from trainrt.tasks.registry import register_task

register_task(
    "g1_motion_tracking",
    summary="BeyondMimic-style whole-body tracking of a reference clip by the Unitree G1",
    env_cfg="trainrt.tasks.g1_motion_tracking.env_cfg:g1_motion_tracking_env_cfg",
    presets={
        "sac": "trainrt.tasks.g1_motion_tracking.presets:sac_g1_motion_tracking",
        "flashsac": "trainrt.tasks.g1_motion_tracking.presets:flashsac_g1_motion_tracking",
    },
    evaluation="trainrt.tasks.tracking.evaluation:tracking_evaluation",
)
