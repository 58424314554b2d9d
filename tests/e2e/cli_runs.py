"""What the CLI end-to-end tests share: the tiny CPU run's overrides and the ``trainrt`` subprocess call."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

TINY = [
    "algo.num_envs=2",
    "algo.max_iterations=2",
    "algo.steps_per_iteration=2",
    "algo.params.batch_size=8",
    "algo.params.buffer_size_per_env=16",
    "algo.params.learning_starts=2",
    "algo.params.actor_hidden_dim=8",
    "algo.params.critic_hidden_dim=8",
    "training.checkpoint_every=1",
    "training.final_eval=false",
    "training.export_onnx=false",
]
"""Overrides of a seconds-long run: 2 envs, 2 iterations, tiny networks, a checkpoint every iteration."""
FLASHSAC_TINY = ["algo.params.actor_num_blocks=1", "algo.params.critic_num_blocks=1"]


def tiny_overrides(iterations: int) -> list[str]:
    """``TINY`` with ``algo.max_iterations`` set to ``iterations``."""
    return [f"algo.max_iterations={iterations}" if o.startswith("algo.max_iterations=") else o for o in TINY]


def trainrt(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """Run ``python -m trainrt`` with ``args``; returns the completed process."""
    return subprocess.run(
        [sys.executable, "-m", "trainrt", *args], capture_output=True, text=True, timeout=timeout, check=False
    )


def train(
    run_dir: Path, algo: str, task: str, sim: str, *extra: str, iterations: int = 2
) -> subprocess.CompletedProcess:
    """Train a tiny run of ``iterations`` iterations into ``run_dir`` (CPU demo preset, ``extra`` overrides last)."""
    overrides = [
        *tiny_overrides(iterations),
        *(FLASHSAC_TINY if algo == "flashsac" else []),
        f"training.run_dir={run_dir}",
        *extra,
    ]
    return trainrt("train", "--algo", algo, "--task", task, "--sim", sim, "--preset", "cpu-demo", *overrides)
