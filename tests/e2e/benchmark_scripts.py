"""What the benchmark scripts' tests share: where the scripts are, how to import one, a tiny learner."""

import importlib.util
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

TINY_LEARNER = [
    "algo.num_envs=4",
    "algo.params.batch_size=16",
    "algo.params.updates_per_iteration=2",
    "algo.params.actor_hidden_dim=16",
    "algo.params.critic_hidden_dim=16",
    "algo.params.buffer_size_per_env=16",
    "algo.params.learning_starts=4",
]
"""Overrides that make a preset's learner and replay tiny enough for a CPU test."""


def load(name: str) -> ModuleType:
    """The benchmark script ``benchmarks/<name>.py`` imported as a module."""
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
