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


def test_eager_bookkeeping_leaves_only_those_parts_uncompiled_inside_the_block():
    variants = _script()
    from trainrt.algos.flashsac import FlashSacAgent
    from trainrt.algos.sac import SacAgent

    before = (SacAgent.compiled_parts, FlashSacAgent.compiled_parts)
    bookkeeping = ("_advance_lr_schedule", "_record_losses")
    with variants.applied("eager_bookkeeping"):
        for cls, parts in zip((SacAgent, FlashSacAgent), before, strict=True):
            assert cls.compiled_parts == tuple(p for p in parts if p not in bookkeeping) != parts
    assert (SacAgent.compiled_parts, FlashSacAgent.compiled_parts) == before


def test_compiled_norm_turns_the_fused_kernel_off_inside_the_block_only():
    from trainrt.algos import networks

    variants = _script()
    assert networks.FUSED_NORM_KERNEL
    with variants.applied("compiled_norm"):
        assert not networks.FUSED_NORM_KERNEL
        assert networks.GEMM_ALIGNMENT == 8  # padded otherwise
    assert networks.FUSED_NORM_KERNEL


def test_cast_weights_turns_flashsac_weight_copies_off_inside_the_block_only():
    from trainrt.algos import flashsac

    variants = _script()
    assert flashsac.BF16_WEIGHT_COPIES  # as shipped (docs/perf/tuning/0029)
    with variants.applied("cast_weights"):
        assert not flashsac.BF16_WEIGHT_COPIES
    assert flashsac.BF16_WEIGHT_COPIES


def test_combo_projections_sets_inductor_options_for_single_parts_inside_the_block_only():
    from trainrt.algos import flashsac
    from trainrt.algos.flashsac import FlashSacAgent
    from trainrt.algos.sac import SacAgent

    variants = _script()
    shipped = dict(FlashSacAgent.part_compile_options)
    assert set(shipped) == set(flashsac.HORIZONTAL_FUSION_PARTS) and not SacAgent.part_compile_options
    with variants.applied("combo_projections"):
        # FlashSAC's own, as shipped (docs/perf/tuning/0033)
        assert FlashSacAgent.part_compile_options == shipped
        assert set(SacAgent.part_compile_options) == {"_critic_step", "_actor_step"}
        assert all(o["combo_kernels"] for o in SacAgent.part_compile_options.values())
    assert FlashSacAgent.part_compile_options == shipped and not SacAgent.part_compile_options
    assert variants.missing_options("combo_projections") == []  # this torch has both options


def test_cast_unfused_is_flashsacs_update_before_the_copies_and_the_fusion_inside_the_block_only():
    from trainrt.algos import flashsac
    from trainrt.algos.flashsac import FlashSacAgent

    variants = _script()
    shipped = dict(FlashSacAgent.part_compile_options)
    for name, copies in (("unfused_projections", True), ("cast_unfused", False)):
        with variants.applied(name):
            assert FlashSacAgent.part_compile_options == {}
            assert flashsac.BF16_WEIGHT_COPIES is copies
        assert FlashSacAgent.part_compile_options == shipped and flashsac.BF16_WEIGHT_COPIES


def test_fused_adamw_leaves_every_optimizer_step_out_of_the_compiled_parts_and_restores_them():
    from trainrt.algos.flashsac import FlashSacAgent
    from trainrt.algos.sac import SacAgent

    variants = _script()
    before = {cls: cls.compiled_parts for cls in (SacAgent, FlashSacAgent)}
    for cls in before:
        assert set(cls.optimizer_step_parts) <= set(cls.compiled_parts)  # compiled as shipped
    with variants.applied("fused_adamw"):
        for cls, parts in before.items():
            assert cls.compiled_parts == tuple(p for p in parts if p not in cls.optimizer_step_parts)
            assert len(cls.compiled_parts) == len(parts) - len(cls.optimizer_step_parts)
    assert {cls: cls.compiled_parts for cls in before} == before
