"""``g1_walk_rough``: Unitree G1 velocity tracking on rough ground, the rough velocity task
(``trainrt.tasks.velocity.rough_env_cfg``: terrain grid, level curriculum, height scans) registered with the G1."""

from trainrt.tasks.registry import register_task

register_task(
    "g1_walk_rough",
    summary="Unitree G1 velocity tracking on rough ground (terrain curriculum, height scans)",
    env_cfg="trainrt.tasks.g1_walk_rough.env_cfg:g1_walk_rough_env_cfg",
    presets={"sac": "trainrt.tasks.g1_walk_rough.presets:sac_g1_walk_rough"},
    evaluation="trainrt.tasks.velocity.rough_evaluation:rough_walk_evaluation",
)
