"""FlashSAC's settings: `FlashSacConfig`, the one home of the learner's hyperparameters and execution variants.

Apart from the agent (`trainrt.algos.flashsac`) so that its math and networks can name the config without
importing the agent that uses them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainrt.algos.agent import CheckedLearnerConfig
from trainrt.algos.networks import GEMM_ALIGNMENT

BF16_WEIGHT_COPIES = True
"""Keep a bf16 copy of every unit-norm weight beside it, rewritten wherever the weight changes (its projection
after each optimizer step, the target's EMA, a checkpoint load), so that a forward under bf16 autocast reads
the copy instead of casting the weight again: about 25 cast kernels fewer per update at the presets'
sizes. The arithmetic is the same bit for bit (docs/perf/tuning/0029). The default of
`FlashSacConfig.bf16_weight_copies`; only a run under bf16 autocast (CUDA) keeps copies.
`benchmarks/learner_variants.py --variants padded,cast_weights` measures the update without them."""

HORIZONTAL_FUSION_PARTS = ("_project_actor", "_project_critic", "_critic_optimizer_step", "_actor_step")
"""The update's parts that touch every parameter of a network one tensor at a time (the unit-norm projections with
the target's EMA, the AdamW steps): the default of `FlashSacConfig.horizontal_fusion_parts`. They compile with
inductor's horizontal fusion (combo kernels), so the per-tensor reductions and updates share a few launches instead
of one or two each (docs/perf/tuning/0033)."""


class FlashSacConfig(CheckedLearnerConfig):
    """FlashSAC hyperparameters; defaults: the authors' Isaac Lab setting, scaled to 2048 envs.

    These defaults are the one home of the FlashSAC learner's settings: they are what the canonical presets run
    (an iteration of 8 vector env steps at 2048 envs, ``trainrt.config.presets``), and a task preset names
    only what differs from them (``trainrt/tasks/<task>/presets.py``). A field's meaning is its description
    (``trainrt.algos.agent.LEARNER_FIELD_DESCRIPTIONS`` for the fields both learners share).
    """

    # Networks: the authors' Isaac Lab sizes (blocks expand the width 4x internally). The learner graph
    # replays in 5.5 ms per update at batch 8192 on an H200 with motion-tracking observation sizes.
    actor_hidden_dim: int = Field(128, ge=4, description="width of the actor's residual stream")
    actor_num_blocks: int = Field(2, ge=0, description="residual blocks of the actor")
    critic_hidden_dim: int = Field(256, ge=4, description="width of each critic's residual stream")
    critic_num_blocks: int = Field(2, ge=0, description="residual blocks of each critic")
    block_expansion: int = Field(4, ge=1, description="width expansion inside a residual block")
    batch_norm_momentum: float = Field(
        0.01, gt=0.0, le=1.0, description="momentum of the BatchNorm running statistics"
    )
    log_std_min: float = -5.0
    log_std_max: float = 0.0
    # The actor's output layer: "linear" (the presets) is unconstrained, its mean starting near zero;
    # "unit_norm" re-projects each action's mean and log-std weight vectors to unit norm after every step
    # (free biases), as the authors' first release did with log-std bounds [-10, 2]. adr/0016 has the A/B.
    actor_head: Literal["linear", "unit_norm"] = Field(
        "linear", description="actor output layer: linear, or unit_norm (re-projected weight vectors)"
    )

    # Categorical critic over the normalized-return range [-G_max, G_max].
    num_atoms: int = Field(101, ge=2)
    v_min: float = -5.0
    v_max: float = 5.0
    # Adaptive reward scaling, by the running statistics of the discounted return G:
    # "max_return" (the authors) divides rewards by max(std(G), max|G| / normalized_return_max), so the
    # largest return ever seen lands on the support's edge (keep normalized_return_max equal to v_max);
    # "return_std" divides by std(G) alone, so one outlier return (a fall full of penalties) cannot
    # shrink every other return to a fraction of an atom for the rest of the run (adr/0017).
    reward_scaling: bool = Field(
        True, description="scale rewards by running statistics of the discounted return"
    )
    reward_scale_mode: Literal["max_return", "return_std"] = Field(
        "max_return", description="reward scale: max_return or return_std (adr/0017)"
    )
    normalized_return_max: float = Field(
        5.0, gt=0.0, description="largest scaled return (max_return mode); keep equal to v_max"
    )

    # Temporal difference: 3-step returns, as the authors' Isaac Lab setting; the target tracks at 0.05 per
    # update, the reference schedule the presets are measured with (the authors' Isaac Lab setting: 0.01).
    gamma: float = Field(0.99, gt=0.0, le=1.0)
    n_step: int = Field(3, ge=1)
    tau: float = Field(0.05, gt=0.0, le=1.0)

    # Optimization. Weight decay is 0: the unit-norm projection already fixes every weight's scale.
    actor_lr: float = Field(3e-4, gt=0.0)
    critic_lr: float = Field(3e-4, gt=0.0)
    alpha_lr: float = Field(3e-4, gt=0.0)
    # Actor and critic learning rates: linear warm-up, then cosine decay to lr_final_ratio of the
    # initial rate over lr_decay_updates (None: the run's total updates), as the authors decay 3e-4
    # to 1.5e-4 over training; "constant" keeps them fixed.
    lr_schedule: Literal["constant", "warmup_cosine"] = "warmup_cosine"
    lr_warmup_updates: int = Field(0, ge=0)
    lr_final_ratio: float = Field(0.5, gt=0.0, le=1.0)
    lr_decay_updates: int | None = Field(None, ge=1)
    weight_decay: float = Field(0.0, ge=0.0)
    adam_betas: tuple[float, float] = (0.9, 0.999)
    # 4 updates of 2048 transitions per 2048-env vector step replay each transition ~4 times, the authors'
    # Isaac Lab ratio (2 updates x 2048 per 1024-env step): 32 per iteration of the presets' 8 vector steps
    # (all of them replay as one learner graph).
    batch_size: int = Field(2048, ge=1)
    updates_per_iteration: int = Field(32, ge=1)
    # Delayed actor/temperature: every 2nd critic update, as the authors.
    actor_update_period: int = Field(2, ge=1)

    # Replay: a large buffer (authors: 10M transitions); 4096 rows x 2048 envs = 8.4M (~30 GB with
    # motion-tracking observation sizes, stored twice for obs and next_obs).
    buffer_size_per_env: int = Field(4096, ge=1)
    # Vector env steps before the first update (~100k transitions at 2048 envs, as the authors).
    learning_starts: int = Field(50, ge=1)

    # Temperature: target entropy of a Gaussian with std 0.15 per action dimension (paper), unless
    # target_entropy is given explicitly.
    alpha_init: float = Field(0.01, gt=0.0)
    target_action_std: float = Field(
        0.15,
        gt=0.0,
        description="per-dimension std of the Gaussian whose entropy is the target (unless target_entropy)",
    )
    target_entropy: float | None = Field(None, description="target entropy (null: from target_action_std)")

    # Held exploration noise: hold length n ~ Zeta(s) truncated to n <= noise_hold_max_steps.
    noise_hold_zeta_exponent: float = Field(
        2.0, gt=0.0, description="exponent s of the Zeta(s) hold length of exploration noise"
    )
    noise_hold_max_steps: int = Field(
        16, ge=1, description="longest hold of one exploration noise draw, in steps"
    )

    # Numerics and inputs. The input BatchNorm already standardizes observations, so the separate
    # running normalizer is off by default.
    bf16_autocast: bool = True
    obs_normalization: bool = False
    actor_obs_group: str = "policy"
    critic_obs_group: str = "critic"

    # Execution: kernel and compiler variants (the update's math is the same under each; docs/performance.md).
    gemm_alignment: int = Field(GEMM_ALIGNMENT, ge=1)
    bf16_weight_copies: bool = Field(
        BF16_WEIGHT_COPIES,
        description="unit-norm layers keep bf16 copies of their weights under bf16 autocast (docs/perf/tuning/0029)",
    )
    uncompiled_parts: tuple[str, ...] = ()
    horizontal_fusion_parts: tuple[str, ...] = HORIZONTAL_FUSION_PARTS
    inductor_options: dict[str, bool | int | float | str] = Field(default_factory=dict)
