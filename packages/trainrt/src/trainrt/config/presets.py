"""Presets: the shared builders of the per-(algo, task) factories, ``preset`` and a small CPU demo.

Where a setting lives (one home each):

* the learner's hyperparameters: the defaults of its config class (``trainrt.algos.SacConfig``,
  ``trainrt.algos.FlashSacConfig``), which are the canonical presets' values;
* run, measurement and simulation settings: the defaults of ``trainrt.config.schema`` (``TrainingSection``,
  ``SimSection``), except what every GPU preset changes, written once here (``gpu_training_section``,
  ``CANONICAL_NUM_ENVS``, ``STEPS_PER_ITERATION``, ``CANONICAL_SIM_BACKEND``);
* what one task's presets change: the task's own module (``trainrt/tasks/<task>/presets.py``,
  ``trainrt.tasks.registry``), naming only the values that differ from the defaults above;
* the CPU demo's shrinking: ``cpu_demo_preset`` here, naming only what differs from the canonical preset.

A preset that sets a field to the value it would have anyway fails ``test_config_single_home``. Field
descriptions live with the fields (``Field(description=...)``; the fields both learners share in
``trainrt.algos.agent.LEARNER_FIELD_DESCRIPTIONS``).

The canonical workloads (docs/performance.md) are ``sac_g1_walk_flat`` and ``flashsac_g1_motion_tracking``
at 2048 envs on mjwarp; their throughput runs use these presets unchanged except for
``algo.max_iterations=160``, ``training.final_eval=false`` and ``training.export_onnx=false``.

How an iteration is cut (all GPU presets): 8 vector env steps (16,384 env steps at 2048 envs), then the
learner schedule of the reference configurations this runtime is measured against (the learner classes'
defaults): SAC does 8 updates of 8192 transitions per vector step (64 per iteration) with the actor every
4th update and tau 0.125 (holosoma FastSAC's G1 settings); FlashSAC does 4 updates of 2048 per vector step
(32 per iteration) with the actor every 2nd update and tau 0.05. Eight steps per iteration amortize the
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
    SimSection,
    TrainConfig,
    TrainingSection,
)

CANONICAL_NUM_ENVS = 2048
"""Parallel envs of every GPU preset."""
STEPS_PER_ITERATION = 8
"""Vector env steps per iteration of every GPU preset (the learner defaults' updates per iteration assume it)."""
CANONICAL_SIM_BACKEND = "mjwarp"
"""Physics backend of every GPU preset."""


def gpu_training_section(**changes: object) -> TrainingSection:
    """The training section of the GPU presets: the ``TrainingSection`` defaults except where a GPU run differs
    (``changes`` override single fields)."""
    fields: dict[str, object] = {
        "collector_steps_per_replay": 4,  # K=4 control steps per collector graph launch
        "checkpoint_every": 500,
        "log_every": 10,
        "overlap": True,  # collector and learner on two CUDA streams (adr/0011)
    }
    fields.update(changes)
    return TrainingSection.model_validate(fields)


def gpu_sim_section(**changes: object) -> SimSection:
    """The sim section of the GPU presets: ``CANONICAL_SIM_BACKEND`` and the ``SimSection`` defaults
    (``changes`` override single fields)."""
    return SimSection.model_validate({"backend": CANONICAL_SIM_BACKEND, **changes})


def sac_params(**changes: object) -> SacConfig:
    """The SAC learner of a preset: the ``SacConfig`` defaults, where every SAC setting lives, with
    ``changes``."""
    return SacConfig.model_validate(changes)


def flashsac_params(**changes: object) -> FlashSacConfig:
    """The FlashSAC learner of a preset: the ``FlashSacConfig`` defaults, where every FlashSAC setting lives,
    with ``changes``."""
    return FlashSacConfig.model_validate(changes)


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

CPU_DEMO_CHANGES: dict[str, dict[str, object]] = {
    "algo": {"num_envs": CPU_DEMO_NUM_ENVS, "max_iterations": 500},
    "algo.params": {
        "batch_size": 256,
        "updates_per_iteration": 4,
        "buffer_size_per_env": 2000,
        "learning_starts": 8,
        "bf16_autocast": False,
    },
    # The progress line every iteration and the block every 10 (the GPU presets' log_every): the episode
    # length stays readable.
    "training": {"collector_steps_per_replay": 1, "checkpoint_every": 100, "play_steps": 100},
}
"""What the CPU demo changes in every canonical preset, by section (only values that differ from it)."""

CPU_DEMO_NETWORKS: dict[str, dict[str, object]] = {
    "sac": {"actor_hidden_dim": 128, "critic_hidden_dim": 256},
    "flashsac": {
        "actor_hidden_dim": 64,
        "critic_hidden_dim": 128,
        "actor_num_blocks": 1,
        "critic_num_blocks": 1,
    },
}
"""The CPU demo's smaller networks, by algorithm (``algo.params`` changes)."""


def cpu_demo_preset(algo: str, task: str, sim: str = "mujoco") -> TrainConfig:
    """A small configuration for machines without a GPU: 32 envs, small networks, short iterations.

    Derived from the canonical preset of ``(algo, task)``: same algorithm, task and rewards, shrunk so
    that an iteration takes a fraction of a second on a few CPU cores (``CPU_DEMO_CHANGES``,
    ``CPU_DEMO_NETWORKS``). The CLI announces it; it is a demonstration of training progress, not a
    measurement.
    """
    data = preset(algo, task).model_dump()
    data["algo"].update(CPU_DEMO_CHANGES["algo"])
    data["algo"]["params"].update(CPU_DEMO_CHANGES["algo.params"], **CPU_DEMO_NETWORKS[algo])
    # The preset's physics (its solver iteration limits) on the CPU, with contact buffers sized by the backend.
    data["sim"].update(backend=sim, device="cpu", nconmax=None, njmax=None)
    data["training"].update(CPU_DEMO_CHANGES["training"])
    return TrainConfig.model_validate(data)
