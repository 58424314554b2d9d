"""Overrides for seconds-long training runs on the CPU, shared by the runner tests."""

TINY_RUN = [
    "algo.num_envs=2",
    "algo.max_iterations=2",
    "algo.steps_per_iteration=2",
    "algo.params.batch_size=8",
    "algo.params.updates_per_iteration=1",
    "algo.params.buffer_size_per_env=16",
    "algo.params.learning_starts=2",
    "training.checkpoint_every=1",
]
