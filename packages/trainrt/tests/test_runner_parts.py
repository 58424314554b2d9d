"""Runner parts without an env: console block, checkpoints, ONNX export, command-line config resolution."""

import json

import pytest
import torch
from torch import nn

from trainrt.config import OverrideError, resolve_train_config
from trainrt.runner.checkpoint import (
    capture_rng_states,
    checkpoint_path,
    latest_checkpoint,
    load_checkpoint,
    restore_rng_states,
    save_checkpoint,
)
from trainrt.runner.console import format_duration, progress_bar
from trainrt.runner.export import ONNX_INPUT_NAME, ONNX_OUTPUT_NAME, export_policy_onnx
from trainrt.runner.manifest import write_resolved_config


def test_progress_bar_fills_in_proportion():
    assert progress_bar(0, 4, width=8) == "[--------] 0/4   0.0%"
    assert progress_bar(2, 4, width=8) == "[####----] 2/4  50.0%"
    assert progress_bar(9, 4, width=8) == "[########] 4/4 100.0%"


def test_durations_read_naturally():
    assert format_duration(4.24) == "4.2s"
    assert format_duration(123) == "2m03s"
    assert format_duration(3723) == "1h02m03s"


def test_latest_checkpoint_is_the_highest_iteration_and_loads(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        latest_checkpoint(tmp_path)
    for iteration in (2, 10, 9):
        save_checkpoint(tmp_path, iteration, {"agent": {"w": torch.full((2,), float(iteration))}})
    (tmp_path / "checkpoints" / "ckpt_notanumber.pt").write_bytes(b"junk")
    assert latest_checkpoint(tmp_path) == checkpoint_path(tmp_path, 10)
    data = load_checkpoint(tmp_path)
    assert data["iteration"] == 10
    assert torch.equal(data["agent"]["w"], torch.full((2,), 10.0))
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == [
        "ckpt_000002.pt",
        "ckpt_000009.pt",
        "ckpt_000010.pt",
        "ckpt_notanumber.pt",
    ]


def test_a_foreign_file_is_not_a_checkpoint(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"weights": 1}, path)
    with pytest.raises(ValueError, match="not a trainrt checkpoint"):
        load_checkpoint(path)


def test_rng_states_restore_the_same_draws():
    generator = torch.Generator().manual_seed(3)
    states = capture_rng_states({"env": generator})
    expected = torch.rand(4, generator=generator), torch.rand(2)
    torch.rand(7, generator=generator)
    restore_rng_states({"env": generator}, states)
    assert torch.equal(torch.rand(4, generator=generator), expected[0])
    assert torch.equal(torch.rand(2), expected[1])
    with pytest.raises(ValueError, match="no RNG state for \\['agent'\\]"):
        restore_rng_states({"agent": generator}, states)


class _TinyPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.linspace(-1.0, 1.0, 5))
        self.net = nn.Sequential(nn.Linear(5, 8), nn.SiLU(), nn.Linear(8, 3), nn.Tanh())

    def forward(self, obs):
        return self.net(obs - self.mean)


def test_onnx_export_matches_torch_and_carries_metadata(tmp_path):
    onnx = pytest.importorskip("onnx")
    policy = _TinyPolicy()
    result = export_policy_onnx(
        policy, 5, tmp_path / "policy.onnx", metadata={"joint_names": ["a", "b", "c"], "task": "g1_walk_flat"}
    )
    model = onnx.load(tmp_path / "policy.onnx")
    assert [i.name for i in model.graph.input] == [ONNX_INPUT_NAME]
    assert [o.name for o in model.graph.output] == [ONNX_OUTPUT_NAME]

    def shape(value_info):
        return [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim]

    assert shape(model.graph.input[0]) == ["batch", 5] and shape(model.graph.output[0]) == ["batch", 3]
    props = {p.key: p.value for p in model.metadata_props}
    assert json.loads(props["joint_names"]) == ["a", "b", "c"]
    assert props["task"] == "g1_walk_flat"
    ort = pytest.importorskip("onnxruntime")
    assert result["onnxruntime_checked"] is True
    obs = torch.randn(6, 5)
    session = ort.InferenceSession(str(tmp_path / "policy.onnx"), providers=["CPUExecutionProvider"])
    actual = session.run([ONNX_OUTPUT_NAME], {ONNX_INPUT_NAME: obs.numpy()})[0]
    with torch.no_grad():
        assert actual == pytest.approx(policy(obs).numpy(), abs=1e-5)


def test_an_onnx_export_that_fails_its_check_or_is_stopped_writes_no_file(tmp_path, monkeypatch):
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import trainrt.runner.export as export

    class _Drifting(_TinyPolicy):  # torch's answer moves after the export: the check must see a mismatch
        def forward(self, obs):
            return super().forward(obs) + (
                0.0 if torch.jit.is_tracing() or torch.onnx.is_in_onnx_export() else 1.0
            )

    with pytest.raises(RuntimeError, match=r"differs from torch by .*; not written"):
        export_policy_onnx(_Drifting(), 5, tmp_path / "drift.onnx")
    assert not (tmp_path / "drift.onnx").exists()

    def stopped(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(export, "_check_with_onnxruntime", stopped)
    with pytest.raises(KeyboardInterrupt):
        export_policy_onnx(_TinyPolicy(), 5, tmp_path / "stopped.onnx")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_without_cuda_the_cli_picks_the_announced_cpu_demo():
    cfg, how = resolve_train_config("sac", "g1_walk_flat", None, [], "auto", cuda_available=False)
    assert how["preset"] == "cpu-demo"
    assert cfg.algo.num_envs < 2048 and cfg.sim.device == "cpu"
    assert cfg.sim.backend == "mujoco"  # the faster CPU backend, unless --sim says otherwise
    cfg, _ = resolve_train_config("sac", "g1_walk_flat", "mjwarp", [], "auto", cuda_available=False)
    assert cfg.sim.backend == "mjwarp" and cfg.sim.device == "cpu"
    cfg, how = resolve_train_config("sac", "g1_walk_flat", None, [], "auto", cuda_available=True)
    assert how["preset"] == "canonical"
    assert cfg.algo.num_envs == 2048 and cfg.sim.backend == "mjwarp"


def test_cli_flags_set_algo_task_and_sim_and_reject_them_as_overrides():
    cfg, _ = resolve_train_config(
        "flashsac",
        "g1_motion_tracking",
        "mujoco",
        ["algo.max_iterations=7"],
        "canonical",
        cuda_available=False,
    )
    assert (cfg.algo.name, cfg.task.name, cfg.sim.backend) == ("flashsac", "g1_motion_tracking", "mujoco")
    assert cfg.algo.max_iterations == 7
    with pytest.raises(OverrideError, match=r"'sim.backend' cannot be overridden .*--sim"):
        resolve_train_config("sac", "g1_walk_flat", None, ["sim.backend=mujoco"], "canonical")


def test_resume_starts_from_the_run_config_plus_new_overrides(tmp_path):
    cfg, _ = resolve_train_config(
        "sac", "g1_walk_flat", "mujoco", ["algo.params.batch_size=32"], "cpu-demo", cuda_available=False
    )
    write_resolved_config(tmp_path, cfg)
    resumed, how = resolve_train_config(
        "sac", "g1_walk_flat", None, [f"training.resume={tmp_path}", "algo.max_iterations=9"], "auto"
    )
    assert how["preset"] == "resumed run config"
    assert resumed.algo.params.batch_size == 32
    assert resumed.algo.max_iterations == 9
    assert resumed.sim.backend == "mujoco"
    assert resumed.training.resume == str(tmp_path)
    with pytest.raises(ValueError, match="trained --algo sac"):
        resolve_train_config("flashsac", "g1_walk_flat", None, [f"training.resume={tmp_path}"], "auto")


def test_resume_without_algo_and_task_takes_the_run_s_and_refuses_other_ones(tmp_path):
    cfg, _ = resolve_train_config(
        "flashsac", "g1_motion_tracking", "mujoco", [], "cpu-demo", cuda_available=False
    )
    write_resolved_config(tmp_path, cfg)
    resumed, _ = resolve_train_config(None, None, None, [f"training.resume={tmp_path}"], "auto")
    assert (resumed.algo.name, resumed.task.name) == ("flashsac", "g1_motion_tracking")
    resumed, _ = resolve_train_config("flashsac", None, None, [f"training.resume={tmp_path}"], "auto")
    assert resumed.task.name == "g1_motion_tracking"
    with pytest.raises(ValueError, match="this command says --task g1_walk_flat; leave --algo/--task out"):
        resolve_train_config(None, "g1_walk_flat", None, [f"training.resume={tmp_path}"], "auto")
    new, _ = resolve_train_config(None, None, None, [], "cpu-demo", cuda_available=False)
    assert (new.algo.name, new.task.name) == ("sac", "g1_walk_flat")
