"""``t1_walk_flat``: Booster T1 velocity tracking on flat ground, the velocity task (``trainrt.tasks.velocity``)
registered with the T1."""

from trainrt.tasks.registry import register_task

register_task(
    "t1_walk_flat",
    summary="Booster T1 velocity tracking on flat ground",
    env_cfg="trainrt.tasks.t1_walk_flat.env_cfg:t1_walk_flat_env_cfg",
    presets={
        "sac": "trainrt.tasks.t1_walk_flat.presets:sac_t1_walk_flat",
        "flashsac": "trainrt.tasks.t1_walk_flat.presets:flashsac_t1_walk_flat",
    },
    evaluation="trainrt.tasks.velocity.evaluation:walk_evaluation",
)
