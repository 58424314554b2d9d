"""`benchmarks/learner_variants.py` on the CPU: variants alternate, results land in JSON, and the
``frozen_norm_affine`` measurement leaves the normalization layers' scales and shifts untouched."""

import json
import subprocess
import sys

import pytest
import torch
from benchmark_scripts import BENCHMARKS, TINY_LEARNER, load

SCRIPT = BENCHMARKS / "learner_variants.py"


def _script():
    return load("learner_variants")


@pytest.mark.slow
def test_variants_alternate_and_write_their_timings(tmp_path):
    out = tmp_path / "variants.json"
    command = [
        sys.executable, str(SCRIPT), "--sim=mujoco", "--variants=padded,frozen_norm_affine", "--rounds=2",
        "--iterations=1", "--profile", "--profile-top=0", f"--trace-dir={tmp_path / 'traces'}", f"--out={out}",
        *TINY_LEARNER,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["diagnostic"] and data["batch_size"] == 16 and data["updates_per_iteration"] == 2
    assert list(data["ms_per_update"]) == ["padded", "frozen_norm_affine"]
    assert all(len(ms) == 2 and min(ms) > 0 for ms in data["ms_per_update"].values())
    assert data["speedup_over_first"]["padded"] == 1.0
    # --profile: each variant's first round, profiled (CPU ops here, kernels on CUDA)
    assert list(data["profiles"]) == ["padded", "frozen_norm_affine"]
    for profile in data["profiles"].values():
        assert profile["kernel_launches"] > 0 and profile["gpu_busy_ms"] > 0 and profile["top_kernels"]
        # --profile-top=0: every kernel listed, so the list adds up to the profile's totals
        assert sum(k["calls"] for k in profile["top_kernels"]) == profile["kernel_launches"]
        assert sum(k["ms"] for k in profile["top_kernels"]) == pytest.approx(profile["gpu_busy_ms"])
    # --trace-dir: each profiled variant's timeline, a JSON trace with its events
    for variant in ("padded", "frozen_norm_affine"):
        trace = json.loads((tmp_path / "traces" / f"{variant}.json").read_text())
        assert trace["traceEvents"], variant
    lines = [line for line in result.stdout.splitlines() if line.startswith("round ")]
    assert [line.split(":")[0] for line in lines] == [
        "round 0 padded", "round 0 frozen_norm_affine", "round 1 padded", "round 1 frozen_norm_affine",
    ]  # fmt: skip


@pytest.mark.slow
def test_an_unknown_variant_is_refused():
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--sim=mujoco", "--variants=padded,fastest"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and "unknown variants ['fastest']" in result.stderr


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_frozen_norm_affine_stops_only_the_normalization_parameters(algo):
    from trainrt.algos import make_agent
    from trainrt.config import resolve_train_config

    variants = _script()
    cfg, _ = resolve_train_config(algo, "g1_walk_flat", "mujoco", TINY_LEARNER, "cpu-demo")
    agent = make_agent(algo, cfg.algo.params, {"policy": 12, "critic": 14}, 3, "cpu", seed=0)
    frozen = variants.freeze_norm_affine(agent)
    norms = [
        p
        for net in (agent.actor, agent.critic)
        for m in net.modules()
        if isinstance(m, variants.NORM_LAYERS)
        for p in m.parameters(recurse=False)
    ]
    assert frozen == len(norms) > 0
    assert all(not p.requires_grad for p in norms)
    ids = {id(p) for p in norms}
    others = [p for net in (agent.actor, agent.critic) for p in net.parameters() if id(p) not in ids]
    assert others and all(p.requires_grad for p in others)
    # a backward pass through the critic reaches every other parameter and none of the frozen ones
    obs = torch.randn(16, 14)
    actions = agent.act({"policy": torch.randn(16, 12), "critic": obs})
    extra = () if algo == "sac" else (True,)  # FlashSAC's critic takes the BatchNorm mode
    agent.critic(obs, actions, *extra).float().square().mean().backward()
    assert all(p.grad is None for p in norms)
    critic_others = [p for p in agent.critic.parameters() if id(p) not in ids]
    assert all(p.grad is not None for p in critic_others)


def test_zeroed_grads_fills_gradients_inside_the_block_only():
    variants = _script()
    param = torch.nn.Parameter(torch.ones(3))
    optimizer = torch.optim.SGD([param], lr=0.1)
    param.grad = torch.full((3,), 2.0)
    with variants.zeroed_grads():
        optimizer.zero_grad()
        assert param.grad is not None and torch.equal(param.grad, torch.zeros(3))
    optimizer.zero_grad()
    assert param.grad is None


OVERRIDES = {
    ("padded", "sac"): [],
    ("unpadded", "flashsac"): ["algo.params.gemm_alignment=1"],
    ("compiled_norm", "sac"): ["algo.params.fused_norm_kernel=false"],
    ("compiled_norm", "flashsac"): [],  # FlashSAC has no fused LayerNorm kernel
    ("cast_weights", "flashsac"): ["algo.params.bf16_weight_copies=false"],
    ("cast_weights", "sac"): [],
    ("eager_bookkeeping", "flashsac"): [
        'algo.params.uncompiled_parts=["_advance_lr_schedule", "_record_losses"]'
    ],
    ("fused_adamw", "sac"): ['algo.params.uncompiled_parts=["_critic_step", "_actor_step"]'],
    ("fused_adamw", "flashsac"): [
        'algo.params.uncompiled_parts=["_critic_optimizer_step", "_actor_step", "_temperature_step"]'
    ],
    ("combo_projections", "sac"): ['algo.params.horizontal_fusion_parts=["_critic_step", "_actor_step"]'],
    ("cast_unfused", "flashsac"): [
        "algo.params.bf16_weight_copies=false",
        "algo.params.horizontal_fusion_parts=[]",
    ],
    ("combo_kernels", "sac"): ['algo.params.inductor_options={"combo_kernels": true}'],
    ("frozen_norm_affine", "sac"): [],  # a measurement on the built agent, no setting
}
"""A variant's learner config overrides per algorithm: a field the algorithm lacks and part names it does not
have are dropped."""


@pytest.mark.parametrize(("variant", "algo"), sorted(OVERRIDES))
def test_a_variant_is_its_learner_config_overrides(variant, algo):
    assert _script().config_overrides(variant, algo) == OVERRIDES[variant, algo]


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_every_variant_resolves_to_a_valid_config_that_differs_only_where_it_says(algo):
    """Each variant's overrides resolve (the fields exist, the values validate, the parts are the algorithm's)
    into a config whose learner settings differ from the preset's exactly in the overridden fields."""
    from trainrt.algos import make_agent
    from trainrt.config.resolve import resolve_train_config

    variants = _script()
    base = resolve_train_config(algo, "g1_walk_flat", "mujoco", TINY_LEARNER, "cpu-demo")[0].algo.params
    assert base.model_dump()["gemm_alignment"] == 8 and base.uncompiled_parts == ()
    for variant in variants.VARIANTS:
        overrides = variants.config_overrides(variant, algo)
        cfg, _ = resolve_train_config(algo, "g1_walk_flat", "mujoco", [*TINY_LEARNER, *overrides], "cpu-demo")
        mine, theirs = cfg.algo.params.model_dump(), base.model_dump()
        changed = {key for key in mine if mine[key] != theirs[key]}
        named = {override.split("=")[0].removeprefix("algo.params.") for override in overrides}
        assert changed <= named, variant
        make_agent(algo, cfg.algo.params, {"policy": 12, "critic": 14}, 3, "cpu", seed=0)  # parts known
