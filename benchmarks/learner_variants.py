"""DIAGNOSTIC: the compiled learner under named variants, interleaved in one process, ms per update.

    python benchmarks/learner_variants.py --algo sac --task g1_walk_flat [--variants padded,unpadded]
        [--rounds 2] [--profile] [--out result.json]

Fills one replay buffer from the preset's own collector, then for each round and each variant in turn
builds a fresh agent from the same seed under that variant's config, captures all updates of an iteration as one
compiled graph and times it as `trainrt bench learner` does (``fused`` mode). Variants:

- ``padded``: the runtime as shipped (the twin critics' GEMM widths padded to a multiple of 8, docs/perf/tuning/0013;
  SAC's hidden layers ending in the fused LayerNorm + SiLU kernel, docs/perf/tuning/0023);
- ``compiled_norm``: padded, with SAC's hidden-layer tails as torch operations that inductor fuses on its own
  (``algo.params.fused_norm_kernel=false``, the learner before docs/perf/tuning/0023). FlashSAC has no such layers;
- ``fused_adamw``: padded, with every optimizer step of the agent left out of the compiled parts
  (its parts' ``optimizer_steps`` in ``algo.params.uncompiled_parts``), as before docs/perf/tuning/0025: torch's fused AdamW kernel, and SAC's target EMA as its own
  kernel;
- ``eager_sample``: padded, with the replay's row picking and gathers run eagerly, as before docs/perf/tuning/0025
  (about twenty small kernels per sample);
- ``unpadded``: ``algo.params.gemm_alignment=1``;
- ``cast_weights``: padded, with FlashSAC's unit-norm layers keeping no bf16 copies of their weights
  (``algo.params.bf16_weight_copies=false``, before docs/perf/tuning/0029 was accepted), so every product casts its weight;
  SAC has no such layers;
- ``frozen_norm_affine`` (a measurement, not a learner): padded, with the normalization layers' scales and
  shifts frozen, so the update computes no gradient for them. What it saves against ``padded`` is the cost
  of those gradients: per-column reductions over every row of the batch (SAC's fused kernel computes them
  anyway, in the same pass; combine it with ``compiled_norm`` to measure the compiled reductions);
- ``zeroed_grads`` (a measurement): padded, with every optimizer's ``zero_grad`` keeping the gradient tensors
  and filling them with zeros, so each backward adds into them, as the agents did before they set gradients to
  None. What ``padded`` saves against it is one fill per optimizer and one addition per parameter per update;
- ``eager_bookkeeping`` (a measurement): padded, with the learning-rate step and the loss recording left out of
  the compiled parts, as before they were compiled. What ``padded`` saves against it is their ~35 small kernels
  per update;
- ``combo_kernels``, ``aggressive_fusion``, ``autotune_pointwise``: padded, with that inductor option on for
  every compiled part of the update (``algo.params.inductor_options``; the replay's sample and the collector
  compile with the defaults) (horizontal fusion of independent kernels; fusion past the default profitability checks; benchmarking
  more Triton configurations for pointwise and reduction kernels). A variant whose option this torch does
  not have is reported as skipped;
- ``combo_projections``: padded, with inductor's horizontal fusion for the parts that update many
  independent tensors only (SAC's optimizer steps with the EMA), so their per-tensor reductions and updates
  share a few launches. FlashSAC compiles its projections with the target's EMA and its AdamW steps so as
  shipped (docs/perf/tuning/0033); ``unfused_projections`` compiles them without it, and ``cast_unfused`` combines that
  with ``cast_weights``: FlashSAC's update as it was before docs/perf/tuning/0029 and docs/perf/tuning/0033;
- ``autotune_gemm``: padded, with inductor choosing each matrix product among cuBLAS and its Triton
  templates by timing them at compile time (minutes more compiling), fusing pointwise work into a chosen
  template's epilogue; ``triton_gemm``: the same restricted to the Triton templates, with the producers of
  a product's inputs (FlashSAC's BatchNorm normalization, ReLU and bf16 cast) fused into its loads (prologue
  fusion), so the normalized activations need not be written and read back.

Reports ms per update of every round, the median per variant and each variant's speedup over the first.
With ``--profile`` each variant's first round also profiles one replay of the iteration's updates, as
`benchmarks/profile_iteration.py` profiles the learner (GPU time per kernel family, the top kernels, the
idle gaps), so two variants' kernels can be compared side by side; ``--profile-top 0`` lists every kernel
and ``--trace-dir`` also writes each profiled timeline, kernels in launch order.
Every variant but the measurements (`MEASUREMENTS`) is a set of learner config overrides (`config_overrides`), so
``canonical_runs.py --learner-variant NAME`` runs the same change end to end and the run's ``config.json`` shows it.
Interleaving puts machine drift on every variant alike. The acceptance number stays
``tail_env_steps_per_sec`` of a training run.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import statistics
import sys
from collections.abc import Iterator
from typing import Any

import torch
import torch._inductor.config as inductor_config

from trainrt.algos import ALGORITHMS, flashsac_networks, networks
from trainrt.algos.bench import learner_benchmark
from trainrt.algos.flashsac import FlashSacParts
from trainrt.algos.flashsac_config import HORIZONTAL_FUSION_PARTS
from trainrt.algos.sac import SacParts
from trainrt.config.resolve import resolve_train_config
from trainrt.runner.build import build_agent, build_env, build_replay
from trainrt.runner.collector import Collector

OPTIMIZER_STEPS = {"sac": SacParts.optimizer_steps, "flashsac": FlashSacParts.optimizer_steps}
"""The parts that step an optimizer, per algorithm (``fused_adamw`` leaves them uncompiled)."""

VARIANTS: dict[str, dict[str, Any]] = {
    "padded": {},
    "unpadded": {"gemm_alignment": 1},
    "compiled_norm": {"fused_norm_kernel": False},
    "fused_adamw": {"uncompiled_steps": True},
    "eager_sample": {"eager_sample": True},
    "cast_weights": {"bf16_weight_copies": False},
    "frozen_norm_affine": {"freeze_norm_affine": True},
    "zeroed_grads": {"zeroed_grads": True},
    "eager_bookkeeping": {"uncompiled_parts": ("_advance_lr_schedule", "_record_losses")},
    "combo_kernels": {"inductor_options": {"combo_kernels": True}},
    "aggressive_fusion": {"inductor_options": {"aggressive_fusion": True}},
    "autotune_pointwise": {"inductor_options": {"max_autotune_pointwise": True}},
    "autotune_gemm": {"inductor_options": {"max_autotune_gemm": True}},
    # SAC's critic step and FlashSAC's projections and optimizer steps; an algorithm ignores names it lacks
    "combo_projections": {"horizontal_fusion_parts": ("_critic_step", *HORIZONTAL_FUSION_PARTS)},
    "unfused_projections": {"horizontal_fusion_parts": ()},
    "cast_unfused": {"bf16_weight_copies": False, "horizontal_fusion_parts": ()},
    "triton_gemm": {
        "inductor_options": {
            "max_autotune_gemm": True,
            "max_autotune_gemm_backends": "TRITON",
            "prologue_fusion": True,
        }
    },
}
"""Variant name -> changes. Most are learner config fields (``algo.params.*``; `config_overrides` turns them into
overrides, dropping a field the algorithm's config lacks and part names it does not have): ``gemm_alignment``,
``fused_norm_kernel`` (SAC), ``bf16_weight_copies`` (FlashSAC), ``uncompiled_parts``, ``horizontal_fusion_parts``
(replacing the algorithm's own, so ``()`` compiles every part with inductor's defaults) and ``inductor_options``
(every compiled part's). ``uncompiled_steps`` leaves the algorithm's optimizer-step parts uncompiled. The rest act
in this script only (`MEASUREMENTS`)."""

MEASUREMENTS = frozenset({"freeze_norm_affine", "zeroed_grads", "eager_sample"})
"""Changes that are measurements rather than learner settings: ``freeze_norm_affine`` (`freeze_norm_affine`, on the
built agent), ``zeroed_grads`` (`zeroed_grads`) and ``eager_sample`` (the replay samples eagerly). A training run
cannot carry them."""

NORM_LAYERS: tuple[type, ...] = (
    networks.StackedLayerNorm,
    flashsac_networks._BatchNorm,
    flashsac_networks._RmsNorm,
)
"""The normalization layers of SAC and FlashSAC whose affine parameters ``frozen_norm_affine`` freezes."""


def config_overrides(variant: str, algo: str) -> list[str]:
    """``variant``'s learner settings for ``algo`` as config overrides (``algo.params.KEY=JSON``)."""
    fields = ALGORITHMS[algo][1].model_fields
    parts = {
        f"_{field.name}" for field in dataclasses.fields({"sac": SacParts, "flashsac": FlashSacParts}[algo])
    }
    changes = {k: v for k, v in VARIANTS[variant].items() if k not in MEASUREMENTS}
    if changes.pop("uncompiled_steps", False):
        changes["uncompiled_parts"] = OPTIMIZER_STEPS[algo]
    overrides = []
    for key, value in changes.items():
        if key not in fields:
            continue  # say, FlashSAC has no fused LayerNorm kernel
        if key.endswith("_parts"):
            value = [name for name in value if name in parts]
        overrides.append(f"algo.params.{key}={json.dumps(value)}")
    return overrides


def freeze_norm_affine(agent: Any) -> int:
    """Stop gradients to the scales and shifts of every normalization layer of the actor and critic.

    Returns the number of parameters frozen. The optimizers skip parameters without a gradient.
    """
    frozen = 0
    for net in (agent.actor, agent.critic):
        for layer in net.modules():
            if isinstance(layer, NORM_LAYERS):
                for param in layer.parameters(recurse=False):
                    param.requires_grad_(False)
                    frozen += 1
    return frozen


@contextlib.contextmanager
def zeroed_grads() -> Iterator[None]:
    """Inside the block, ``Optimizer.zero_grad`` zero-fills existing gradients instead of dropping them."""
    original = torch.optim.Optimizer.zero_grad

    def zero_fill(self: torch.optim.Optimizer, set_to_none: bool = True) -> None:
        original(self, set_to_none=False)

    torch.optim.Optimizer.zero_grad = zero_fill  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.optim.Optimizer.zero_grad = original  # type: ignore[method-assign]


def missing_options(variant: str) -> list[str]:
    """The inductor options of ``variant`` this torch does not have."""
    names = set(VARIANTS[variant].get("inductor_options", {}))
    return sorted(k for k in names if not hasattr(inductor_config, k))


def _profile_iteration() -> Any:
    """`benchmarks/profile_iteration.py`, imported from this script's folder (its kernel profiler)."""
    import importlib.util
    from pathlib import Path

    spec = importlib.util.spec_from_file_location(
        "profile_iteration", Path(__file__).with_name("profile_iteration.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _trace_path(directory: str | None, variant: str) -> str | None:
    """Where ``variant``'s profiled timeline goes (None: not written)."""
    if directory is None:
        return None
    from pathlib import Path

    Path(directory).mkdir(parents=True, exist_ok=True)
    return str(Path(directory) / f"{variant}.json")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--algo", default="sac")
    parser.add_argument("--task", default="g1_walk_flat")
    parser.add_argument("--sim", default="mjwarp")
    parser.add_argument("--variants", default="padded,unpadded", help=f"comma-separated, of {list(VARIANTS)}")
    parser.add_argument("--rounds", type=_positive_int, default=2)
    parser.add_argument("--iterations", type=int, default=10)
    parser.add_argument("--profile", action="store_true", help="profile each variant's first round")
    parser.add_argument(
        "--profile-top",
        type=int,
        default=25,
        help="kernels listed per profile, by GPU time (0: every kernel)",
    )
    parser.add_argument(
        "--trace-dir",
        default=None,
        help="with --profile, also write each profiled variant's timeline there (<variant>.json, Perfetto)",
    )
    parser.add_argument("--out", default=None)
    parser.add_argument("overrides", nargs="*", help="key=value overrides, as for trainrt train")
    args = parser.parse_args(argv)
    names = [v for v in args.variants.split(",") if v]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or not names:
        print(f"unknown variants {unknown}; valid: {list(VARIANTS)}", file=sys.stderr)
        return 2
    skipped = {v: missing_options(v) for v in names if missing_options(v)}
    for variant, options in skipped.items():
        print(f"skipping {variant}: this torch has no inductor option {options}", file=sys.stderr)
    names = [v for v in names if v not in skipped]
    cfg, _ = resolve_train_config(args.algo, args.task, args.sim, list(args.overrides), "auto")
    params = cfg.algo.params
    env = build_env(cfg)
    replay = build_replay(cfg, env)
    filler = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    collector = Collector(env, filler, replay, env.reset(), steps_per_replay=1, use_graph=False)
    collector.prefill(max(params.learning_starts, 32))
    replay.freeze_view()

    def sample(g: torch.Generator) -> Any:
        return replay.sample(params.batch_size, g, from_view=True)

    runs: dict[str, list[float]] = {v: [] for v in names}
    fallbacks: dict[str, str] = {}
    profiles: dict[str, Any] = {}
    profile_kernels = _profile_iteration().profile_kernels if args.profile else None
    variant_cfgs = {
        v: resolve_train_config(
            args.algo, args.task, args.sim, [*args.overrides, *config_overrides(v, args.algo)], "auto"
        )[0]
        for v in names
    }
    for round_index in range(args.rounds):
        for variant in names:
            grads = zeroed_grads() if VARIANTS[variant].get("zeroed_grads") else contextlib.nullcontext()
            with grads:
                agent = build_agent(variant_cfgs[variant], env.obs_dims, env.num_actions, env.device)
                if VARIANTS[variant].get("freeze_norm_affine"):
                    freeze_norm_affine(agent)
                if env.device.type != "cuda":
                    compile_sample = None  # as in training: compiled parts are for CUDA
                elif VARIANTS[variant].get("eager_sample"):
                    compile_sample = lambda: replay._transitions.uncompile("eager_sample variant")  # noqa: E731
                else:
                    compile_sample = replay.compile_sample
                timing = learner_benchmark(
                    agent,
                    sample,
                    updates_per_iteration=params.updates_per_iteration,
                    iterations=args.iterations,
                    modes=("fused",),
                    compile_sample=compile_sample,
                )
                if profile_kernels is not None and round_index == 0:
                    profiles[variant] = profile_kernels(
                        lambda agent=agent: agent.replay_updates(params.updates_per_iteration),
                        trace=_trace_path(args.trace_dir, variant),
                        top=args.profile_top,
                    )
            ms = timing["fused_ms_per_update"]
            runs[variant].append(ms)
            fallbacks[variant] = agent.compile_fallback_reason
            fell_back = env.device.type == "cuda" and agent.compile_fallback_reason
            fallback = f" (compile fell back: {agent.compile_fallback_reason})" if fell_back else ""
            print(f"round {round_index} {variant}: {ms:.4f} ms per update{fallback}", flush=True)
    medians = {v: statistics.median(ms) for v, ms in runs.items()}
    first = names[0] if names else None
    result = {
        "diagnostic": True,
        "algo": args.algo,
        "task": args.task,
        "batch_size": params.batch_size,
        "updates_per_iteration": params.updates_per_iteration,
        "obs_dims": env.obs_dims,
        "num_actions": env.num_actions,
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "variants": {v: VARIANTS[v] for v in names},
        "overrides": {v: config_overrides(v, args.algo) for v in names},
        "skipped": skipped,
        "ms_per_update": runs,
        "compile_fallback_reason": fallbacks,
        "median_ms_per_update": medians,
        "speedup_over_first": {v: medians[first] / m for v, m in medians.items()} if first else {},
        "profiles": profiles or None,
    }
    for variant, median in medians.items():
        print(
            f"{variant}: median {median:.4f} ms per update, {result['speedup_over_first'][variant]:.3f}x "
            f"the speed of {first}"
        )
    for variant, profile in profiles.items():
        print(
            f"{variant}: {profile['gpu_busy_ms']:.2f} ms of kernels, {profile['kernel_launches']} launches, "
            f"{profile['idle_ms']:.2f} ms idle per iteration; "
            + ", ".join(f"{k} {v['ms']:.2f} ms" for k, v in profile["families"].items())
        )
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
