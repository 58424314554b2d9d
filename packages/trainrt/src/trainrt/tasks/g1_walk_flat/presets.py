"""The canonical presets of ``g1_walk_flat``, one per algorithm, naming only what differs from the
defaults (the learner config classes, the schema, the shared builders in ``trainrt.config.presets``)."""

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


def sac_g1_walk_flat() -> TrainConfig:
    """Canonical workload 1: SAC on G1 velocity tracking, 2048 envs on mjwarp."""
    return TrainConfig(
        algo=SacAlgoSection(
            num_envs=CANONICAL_NUM_ENVS,
            max_iterations=3000,  # ~49M env steps; minutes on an H200
            steps_per_iteration=STEPS_PER_ITERATION,
            # The learning rates decay (cosine to 0.1x over max_iterations): at a constant 3e-4 the walk
            # peaks and then degrades within minutes (docs/perf/2026-12-01-walk-schedule-h200.md).
            # The replay keeps 4096 steps per env (8.4M transitions, about 500 iterations): with 1024 the
            # walk peaked near iteration 1,000 and then degraded, also with the decay (docs/perf/tuning/0018).
            params=sac_params(
                lr_schedule="warmup_cosine",
                lr_final_ratio=0.1,
                buffer_size_per_env=4096,
                **support_params("g1_walk_flat", 0.97),
            ),
        ),
        task=TaskSection(name="g1_walk_flat"),
        # The constraint solver stops after 5 iterations instead of the model's 10: the walk learns as well
        # in 5 minutes, the policy walks as well under 10 iterations on CPU MuJoCo, and a contact-rich
        # control step costs about 0.82x (docs/perf/tuning/0022).
        sim=gpu_sim_section(solver_iterations=5),
        training=gpu_training_section(),
    )


def flashsac_g1_walk_flat() -> TrainConfig:
    """FlashSAC on G1 velocity tracking, 2048 envs on mjwarp."""
    return TrainConfig(
        algo=FlashSacAlgoSection(
            num_envs=CANONICAL_NUM_ENVS,
            max_iterations=3000,
            steps_per_iteration=STEPS_PER_ITERATION,
            params=flashsac_params(gamma=0.97),
        ),
        task=TaskSection(name="g1_walk_flat"),
        sim=gpu_sim_section(),
        training=gpu_training_section(),
    )
