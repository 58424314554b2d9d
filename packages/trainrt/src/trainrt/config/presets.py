"""Presets: the shared builders of the per-(algo, task) factories, ``preset`` and a small CPU demo.

Each task registers one factory per algorithm with every hyperparameter written out
(``trainrt/tasks/<task>/presets.py``, ``trainrt.tasks.registry``); this module owns what they share.

The canonical workloads (docs/performance.md) are ``sac_g1_walk_flat`` and ``flashsac_g1_motion_tracking``
at 2048 envs on mjwarp; their throughput runs use these presets unchanged except for
``algo.max_iterations=160``, ``training.final_eval=false`` and ``training.export_onnx=false``.

How an iteration is cut (all GPU presets): 8 vector env steps (16,384 env steps at 2048 envs), then the
learner schedule of the reference configurations this runtime is measured against (``REFERENCE_SCHEDULES``):
SAC does 8 updates of 8192 transitions per vector step (64 per iteration) with the actor every 4th update
and tau 0.125 (holosoma FastSAC's G1 settings); FlashSAC does 4 updates of 2048 per vector step (32 per
iteration) with the actor every 2nd update and tau 0.05. Eight steps per iteration amortize the
iteration-boundary synchronization and logging; the collector replays K=4 steps per graph launch, and
all updates of an iteration replay as one learner graph.

``cpu_demo_preset`` shrinks everything so a machine without a GPU shows training progress in minutes; the
CLI announces when it is used. It is a demonstration, not a measurement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from trainrt.algos import FlashSacConfig, SacConfig
from trainrt.config.schema import (
    ALGO_NAMES,
    TrainConfig,
    TrainingSection,
)

CANONICAL_NUM_ENVS = 2048
STEPS_PER_ITERATION = 8
_COLLECTOR_STEPS_PER_REPLAY = 4

REFERENCE_SCHEDULES: dict[str, dict[str, object]] = {
    "sac": {
        "updates_per_iteration": 8 * STEPS_PER_ITERATION,
        "batch_size": 8192,
        "actor_update_period": 4,
        "tau": 0.125,
    },
    "flashsac": {
        "updates_per_iteration": 4 * STEPS_PER_ITERATION,
        "batch_size": 2048,
        "actor_update_period": 2,
        "tau": 0.05,
    },
}
"""Learner schedules per iteration of 8 vector steps: the work the presets (and speed comparisons) do."""


def gpu_training_section(**changes: object) -> TrainingSection:
    """The training section shared by the GPU presets (``changes`` override single fields)."""
    fields: dict[str, object] = {
        "seed": 0,
        "run_dir": None,
        "final_eval": True,
        "play_steps": 250,
        "export_onnx": True,
        "cuda_graph": True,
        "collector_steps_per_replay": _COLLECTOR_STEPS_PER_REPLAY,
        "checkpoint_every": 500,
        "resume": None,
        "tail_window": 100,
        "log_every": 10,
        "tensorboard": True,
        "overlap": True,
        "compile_learner": True,
        "compile_collector": True,
    }
    fields.update(changes)
    return TrainingSection.model_validate(fields)


def sac_params(**changes: object) -> SacConfig:
    """FastSAC-style SAC for the 29-DoF G1 at 2048 envs (``changes`` override single fields)."""
    fields: dict[str, object] = {
        "actor_hidden_dim": 512,
        "critic_hidden_dim": 768,
        "num_atoms": 101,
        "v_min": -20.0,
        "v_max": 20.0,
        "log_std_min": -5.0,
        "log_std_max": 0.0,
        "gamma": 0.97,
        "n_step": 1,
        "tau": REFERENCE_SCHEDULES["sac"]["tau"],
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "alpha_lr": 3e-4,
        "lr_schedule": "constant",
        "lr_warmup_updates": 0,
        "lr_final_ratio": 1.0,
        "lr_decay_updates": None,
        "weight_decay": 1e-3,
        "adam_betas": (0.9, 0.95),
        "batch_size": REFERENCE_SCHEDULES["sac"]["batch_size"],
        "updates_per_iteration": REFERENCE_SCHEDULES["sac"]["updates_per_iteration"],
        "actor_update_period": REFERENCE_SCHEDULES["sac"]["actor_update_period"],
        "buffer_size_per_env": 1024,
        "learning_starts": 10,
        "alpha_init": 1e-3,
        "autotune_alpha": True,
        "target_entropy_per_action": 0.0,
        "bf16_autocast": True,
        "obs_normalization": True,
        "actor_obs_group": "policy",
        "critic_obs_group": "critic",
    }
    fields.update(changes)
    return SacConfig.model_validate(fields)


def flashsac_params(**changes: object) -> FlashSacConfig:
    """FlashSAC (arXiv 2604.04539) for the 29-DoF G1 at 2048 envs (``changes`` override single fields)."""
    fields: dict[str, object] = {
        "actor_hidden_dim": 128,
        "actor_num_blocks": 2,
        "critic_hidden_dim": 256,
        "critic_num_blocks": 2,
        "block_expansion": 4,
        "batch_norm_momentum": 0.01,
        "log_std_min": -5.0,
        "log_std_max": 0.0,
        "num_atoms": 101,
        "v_min": -5.0,
        "v_max": 5.0,
        "reward_scaling": True,
        "normalized_return_max": 5.0,
        "gamma": 0.99,
        "n_step": 3,
        "tau": REFERENCE_SCHEDULES["flashsac"]["tau"],
        "actor_lr": 3e-4,
        "critic_lr": 3e-4,
        "alpha_lr": 3e-4,
        "lr_schedule": "warmup_cosine",
        "lr_warmup_updates": 0,
        "lr_final_ratio": 0.5,
        "lr_decay_updates": None,
        "weight_decay": 0.0,
        "adam_betas": (0.9, 0.999),
        "batch_size": REFERENCE_SCHEDULES["flashsac"]["batch_size"],
        "updates_per_iteration": REFERENCE_SCHEDULES["flashsac"]["updates_per_iteration"],
        "actor_update_period": REFERENCE_SCHEDULES["flashsac"]["actor_update_period"],
        "buffer_size_per_env": 4096,
        "learning_starts": 50,
        "alpha_init": 0.01,
        "target_action_std": 0.15,
        "target_entropy": None,
        "noise_hold_zeta_exponent": 2.0,
        "noise_hold_max_steps": 16,
        "bf16_autocast": True,
        "obs_normalization": False,
        "actor_obs_group": "policy",
        "critic_obs_group": "critic",
    }
    fields.update(changes)
    return FlashSacConfig.model_validate(fields)


G1_CONTROL_DT = 0.02
"""Seconds per control step of both G1 tasks (5 ms physics, 4 substeps); rewards are scaled by it."""


def support_params(task: str, gamma: float) -> dict[str, float]:
    """``return_support`` as ``{"v_min": ..., "v_max": ...}`` params of an algorithm."""
    v_min, v_max = return_support(task, gamma)
    return {"v_min": v_min, "v_max": v_max}


def return_support(task: str, gamma: float, margin: float = 1.25) -> tuple[float, float]:
    """A C51 support [-v, v] sized to the task's returns: v bounds the discounted sum of the largest
    per-step reward (the positive reward weights times the control dt) over the 1/(1 - gamma) horizon,
    with a margin, rounded up to a whole number. Penalties get the same room below zero.

    Rewards here are dt-scaled, so returns are small; a support much wider than them leaves only a few
    atoms where the values live. Set ``algo.params.v_min``/``v_max`` explicitly after changing weights.
    """
    from trainrt.tasks import make_task_cfg

    bound = support_bound(make_task_cfg(task).rewards, gamma, margin)
    return -bound, bound


def support_bound(rewards: Mapping[str, Any], gamma: float, margin: float = 1.25) -> float:
    """The ``v`` of `return_support` for reward term configs ``rewards`` (their weights as they are)."""
    best_step = sum(term.weight for term in rewards.values() if term.weight > 0) * G1_CONTROL_DT
    return float(math.ceil(margin * best_step / (1.0 - gamma)))


def preset_pairs(task_first: str | None = None) -> tuple[tuple[str, str], ...]:
    """Every registered ``(algo, task)`` pair with a preset: ``task_first``'s pairs first, then by algorithm
    (in ``ALGO_NAMES`` order) and task."""
    from trainrt.tasks.registry import task_names, task_spec

    order = {algo: i for i, algo in enumerate(ALGO_NAMES)}
    pairs = [(algo, task) for task in task_names() for algo in task_spec(task).presets]
    return tuple(sorted(pairs, key=lambda p: (p[1] != task_first, order.get(p[0], len(order)), p[0], p[1])))


def preset(algo: str, task: str) -> TrainConfig:
    """The canonical preset of ``(algo, task)``, from the task's registration (``trainrt.tasks.registry``);
    ``ValueError`` naming the valid pairs otherwise."""
    from trainrt.tasks.registry import task_names, task_spec

    if task not in task_names() or algo not in task_spec(task).presets:
        valid = ", ".join(f"{a}/{t}" for a, t in preset_pairs(task))
        raise ValueError(f"no preset for algo {algo!r} and task {task!r}; valid: {valid}")
    return task_spec(task).preset_factory(algo)()


class _PresetFactories(Mapping[tuple[str, str], Callable[[], TrainConfig]]):
    """``(algo, task)`` -> preset factory, a read-only view of the task registry."""

    def __getitem__(self, pair: tuple[str, str]) -> Callable[[], TrainConfig]:
        from trainrt.tasks.registry import task_names, task_spec

        algo, task = pair
        if task not in task_names() or algo not in task_spec(task).presets:
            raise KeyError(pair)
        return task_spec(task).preset_factory(algo)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        return iter(preset_pairs())

    def __len__(self) -> int:
        return len(preset_pairs())


PRESETS: Mapping[tuple[str, str], Callable[[], TrainConfig]] = _PresetFactories()
"""``(algo, task)`` -> preset factory of every registered task (read-only view of ``trainrt.tasks.registry``)."""


CPU_DEMO_NUM_ENVS = 32


def cpu_demo_preset(algo: str, task: str, sim: str = "mujoco") -> TrainConfig:
    """A small configuration for machines without a GPU: 32 envs, small networks, short iterations.

    Derived from the canonical preset of ``(algo, task)``: same algorithm, task and rewards, shrunk so
    that an iteration takes a fraction of a second on a few CPU cores. The CLI announces it; it is a
    demonstration of training progress, not a measurement.
    """
    data = preset(algo, task).model_dump()
    data["algo"].update(num_envs=CPU_DEMO_NUM_ENVS, max_iterations=500, steps_per_iteration=8)
    data["algo"]["params"].update(
        batch_size=256,
        updates_per_iteration=4,
        buffer_size_per_env=2000,
        learning_starts=8,
        bf16_autocast=False,
    )
    if algo == "sac":
        data["algo"]["params"].update(actor_hidden_dim=128, critic_hidden_dim=256)
    else:
        data["algo"]["params"].update(
            actor_hidden_dim=64, critic_hidden_dim=128, actor_num_blocks=1, critic_num_blocks=1
        )
    # The preset's physics (its solver iteration limits) on the CPU, with contact buffers sized by the backend.
    data["sim"].update(backend=sim, device="cpu", nconmax=None, njmax=None)
    # One compact line per iteration and the full block every 10: the episode length stays readable.
    data["training"].update(collector_steps_per_replay=1, checkpoint_every=100, log_every=10, play_steps=100)
    return TrainConfig.model_validate(data)
