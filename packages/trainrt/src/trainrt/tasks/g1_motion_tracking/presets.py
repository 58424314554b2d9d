"""The canonical presets of ``g1_motion_tracking``, one per algorithm, naming only what differs from the
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


def sac_g1_motion_tracking() -> TrainConfig:
    """SAC on G1 whole-body motion tracking, 2048 envs on mjwarp (tracking returns are larger: wider support)."""
    return TrainConfig(
        algo=SacAlgoSection(
            num_envs=CANONICAL_NUM_ENVS,
            max_iterations=3000,
            steps_per_iteration=STEPS_PER_ITERATION,
            params=sac_params(gamma=0.99, **support_params("g1_motion_tracking", 0.99)),
        ),
        task=TaskSection(name="g1_motion_tracking"),
        sim=gpu_sim_section(),
        training=gpu_training_section(),
    )


def flashsac_g1_motion_tracking() -> TrainConfig:
    """Canonical workload 2: FlashSAC on G1 whole-body motion tracking, 2048 envs on mjwarp."""
    return TrainConfig(
        algo=FlashSacAlgoSection(
            num_envs=CANONICAL_NUM_ENVS,
            max_iterations=3000,
            steps_per_iteration=STEPS_PER_ITERATION,
            # Unscaled rewards on a support sized to the task's returns, as SAC: the adaptive scale's max |G|
            # term, set by one fall full of penalties, flattened the critic for the whole run (adr/0017).
            params=flashsac_params(reward_scaling=False, **support_params("g1_motion_tracking", 0.99)),
        ),
        task=TaskSection(name="g1_motion_tracking"),
        # 5 solver iterations, as the walk (docs/perf/tuning/0022): tracks as well in 5 minutes and under the model's 10 on
        # CPU MuJoCo, with a shorter contact-rich step (docs/perf/2026-12-02-fused-norm-and-tracking-solver-h200.md).
        sim=gpu_sim_section(solver_iterations=5),
        training=gpu_training_section(),
    )
