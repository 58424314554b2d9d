"""The canonical presets of ``t1_walk_flat``, one per algorithm: the ``g1_walk_flat`` presets with the task's
name (same learner schedule, networks and replay; shared builders in ``trainrt.config.presets``), except that
SAC keeps the model's solver iterations. The C51 support is sized from this task's own rewards
(``support_params``); with the G1 walk's weights it comes out the same.

Nothing here is tuned for the T1 yet: no T1 learning run exists.
"""

from __future__ import annotations

from trainrt.config.presets import (
    CANONICAL_NUM_ENVS,
    STEPS_PER_ITERATION,
    flashsac_params,
    gpu_sim_section,
    gpu_training_section,
    sac_params,
    support_params,
)
from trainrt.config.schema import (
    FlashSacAlgoSection,
    SacAlgoSection,
    TaskSection,
    TrainConfig,
)


def sac_t1_walk_flat() -> TrainConfig:
    """SAC on T1 velocity tracking, 2048 envs on mjwarp (the ``sac_g1_walk_flat`` learner settings)."""
    return TrainConfig(
        algo=SacAlgoSection(
            num_envs=CANONICAL_NUM_ENVS,
            max_iterations=3000,
            steps_per_iteration=STEPS_PER_ITERATION,
            # as sac_g1_walk_flat: cosine decay to 0.1x and 4096 replay steps per env (docs/perf/tuning/0018)
            params=sac_params(
                lr_schedule="warmup_cosine",
                lr_final_ratio=0.1,
                buffer_size_per_env=4096,
                **support_params("t1_walk_flat", 0.97),
            ),
        ),
        task=TaskSection(name="t1_walk_flat"),
        # the model's 10 solver iterations: the G1 walk's 5 (docs/perf/tuning/0022) were measured on the G1 only
        sim=gpu_sim_section(),
        training=gpu_training_section(),
    )


def flashsac_t1_walk_flat() -> TrainConfig:
    """FlashSAC on T1 velocity tracking, 2048 envs on mjwarp (the ``flashsac_g1_walk_flat`` settings)."""
    return TrainConfig(
        algo=FlashSacAlgoSection(
            num_envs=CANONICAL_NUM_ENVS,
            max_iterations=3000,
            steps_per_iteration=STEPS_PER_ITERATION,
            params=flashsac_params(gamma=0.97),
        ),
        task=TaskSection(name="t1_walk_flat"),
        sim=gpu_sim_section(),
        training=gpu_training_section(),
    )
