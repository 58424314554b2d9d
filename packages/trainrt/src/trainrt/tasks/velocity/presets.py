"""The walking presets, one per algorithm, for any registration of the velocity task: what they set beyond
the defaults (the learner config classes, the schema, the shared builders in ``trainrt.config.presets``).
A robot's task passes its name and what its robot needs otherwise (``tasks/<task>/presets.py``)."""

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


def sac_walk(task: str, *, solver_iterations: int | None = None) -> TrainConfig:
    """SAC on velocity tracking for ``task``, 2048 envs on mjwarp; ``solver_iterations`` replaces the
    model's constraint-solver iteration limit."""
    return TrainConfig(
        algo=SacAlgoSection(
            num_envs=CANONICAL_NUM_ENVS,
            max_iterations=3000,  # ~49M env steps; minutes on an H200
            steps_per_iteration=STEPS_PER_ITERATION,
            # The learning rates decay (cosine to 0.1x over max_iterations): at a constant 3e-4 the walk
            # peaks and then degrades within minutes (docs/perf/2026-12-01-walk-schedule-h200.md).
            # The replay keeps 4096 steps per env (8.4M transitions, about 500 iterations): with 1024 the
            # walk peaked near iteration 1,000 and then degraded, also with the decay (docs/perf/tuning/0018).
            # The C51 support is sized from the task's own rewards.
            params=sac_params(
                lr_schedule="warmup_cosine",
                lr_final_ratio=0.1,
                buffer_size_per_env=4096,
                **support_params(task, 0.97),
            ),
        ),
        task=TaskSection(name=task),
        sim=gpu_sim_section()
        if solver_iterations is None
        else gpu_sim_section(solver_iterations=solver_iterations),
        training=gpu_training_section(),
    )


def flashsac_walk(task: str) -> TrainConfig:
    """FlashSAC on velocity tracking for ``task``, 2048 envs on mjwarp."""
    return TrainConfig(
        algo=FlashSacAlgoSection(
            num_envs=CANONICAL_NUM_ENVS,
            max_iterations=3000,
            steps_per_iteration=STEPS_PER_ITERATION,
            params=flashsac_params(gamma=0.97),
        ),
        task=TaskSection(name=task),
        sim=gpu_sim_section(),
        training=gpu_training_section(),
    )
