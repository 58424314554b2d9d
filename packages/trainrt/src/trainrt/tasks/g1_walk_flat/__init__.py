"""``g1_walk_flat``: Unitree G1 velocity tracking on flat ground, the velocity task (``trainrt.tasks.velocity``)
registered with the G1."""

from trainrt.tasks.registry import register_task

register_task(
    "g1_walk_flat",
    summary="Unitree G1 velocity tracking on flat ground",
    env_cfg="trainrt.tasks.g1_walk_flat.env_cfg:g1_walk_flat_env_cfg",
    presets={
        "sac": "trainrt.tasks.g1_walk_flat.presets:sac_g1_walk_flat",
        "flashsac": "trainrt.tasks.g1_walk_flat.presets:flashsac_g1_walk_flat",
    },
    evaluation="trainrt.tasks.velocity.evaluation:walk_evaluation",
)
