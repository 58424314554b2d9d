"""``trainrt eval --onnx``: the exported ONNX policy, run by onnxruntime, evaluated like the checkpoint it came from.

A tiny SAC run of the walk on CPU MuJoCo exports ``policy.onnx`` at its end (the last checkpoint's actor).
"""

from __future__ import annotations

import json
import sys

import pytest
import torch
from g1_assets import require_g1_assets
from tiny_runs import TINY_RUN
from torch import nn

from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.runner import OffPolicyRunner
from trainrt.runner.evaluate import evaluate_run, format_eval_table

pytest.importorskip("onnxruntime")
pytestmark = [
    pytest.mark.usefixtures("one_thread"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),  # the TorchScript exporter needs no onnxscript
]

EVAL = {"num_envs": 2, "log": lambda line: None}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A finished 2-iteration run with its ``policy.onnx`` (tests copy the file before changing it)."""
    require_g1_assets()
    run_dir = tmp_path_factory.mktemp("onnx") / "sac"
    cfg = apply_overrides(
        cpu_demo_preset("sac", "g1_walk_flat", "mujoco"),
        [
            *TINY_RUN,
            "algo.params.actor_hidden_dim=8",
            "algo.params.critic_hidden_dim=8",
            "training.final_eval=false",
            "training.export_onnx=true",
            f"training.run_dir={run_dir}",
        ],
    )
    OffPolicyRunner(cfg, log=lambda line: None).run()
    assert (run_dir / "policy.onnx").is_file()
    return run_dir


def test_the_onnx_policy_scores_as_its_checkpoint_on_every_walk_command(run_dir):
    # Both evaluations build the same seeded env and run the same scenarios; the exported graph computes the
    # checkpoint's deterministic action to ~1e-9 (float32 kernels of torch vs onnxruntime). The closed loop
    # can amplify that: a foot contact that begins in one rollout a rounding error earlier than in the other
    # sends that row on another trajectory (with this untrained, flailing policy one walk row does so about
    # 16 steps in; a 1e-9 action difference is 0.4 in its observation 2 steps later). Up to that point the
    # rows agree to float32 rounding of the observations, so over 10 steps every metric of every command must
    # agree to 1e-5 (measured: at most 2e-8) and the falls and episode lengths exactly.
    checkpoint = evaluate_run(run_dir, steps=10, **EVAL)
    onnx = evaluate_run(run_dir, steps=10, onnx=run_dir / "policy.onnx", **EVAL)
    assert list(onnx["commands"]) == list(checkpoint["commands"]) and len(onnx["commands"]) == 7
    for name, row in checkpoint["commands"].items():
        other = onnx["commands"][name]
        assert set(other) == set(row)
        for key in ("failed_fraction", "completed_fraction", "mean_episode_length", "steps", "command"):
            assert other[key] == row[key], (name, key)
        for key in (
            "lin_vel_error_xy",
            "ang_vel_error_z",
            "mean_lin_vel_x",
            "mean_lin_vel_y",
            "action_saturation",
        ):
            assert other[key] == pytest.approx(row[key], abs=1e-5), (name, key)
    # the results say which policy acted, and neither file replaces the other
    assert checkpoint["policy"] == f"checkpoint:{checkpoint['checkpoint']}"
    assert onnx["policy"] == f"onnx:{run_dir / 'policy.onnx'}" and onnx["checkpoint"] is None
    assert onnx["iteration"] == checkpoint["iteration"] == 2
    assert checkpoint["json_path"] == str(run_dir / "eval" / "eval_2.json")
    assert onnx["json_path"] == str(run_dir / "eval" / "eval_onnx_2.json")
    assert json.loads((run_dir / "eval" / "eval_2.json").read_text())["policy"].startswith("checkpoint:")
    assert "ONNX policy.onnx, iteration 2" in format_eval_table(onnx).splitlines()[0]
    assert "ONNX" not in format_eval_table(checkpoint)


def test_the_onnx_actions_equal_the_checkpoints_deterministic_actions_along_a_rollout(run_dir):
    # The same observations in, the same actions out: the function itself, without the closed loop's chaos.
    from trainrt.runner.build import build_env
    from trainrt.runner.checkpoint import POLICY_CHECKPOINT_KEYS, load_run_checkpoint
    from trainrt.runner.evaluate import _load_agent
    from trainrt.runner.manifest import load_resolved_config
    from trainrt.runner.onnx_policy import OnnxPolicy
    from trainrt.tasks.velocity.evaluation import WALK_EVAL_COMMANDS, walk_eval_config

    cfg = load_resolved_config(run_dir)
    env = build_env(walk_eval_config(cfg, WALK_EVAL_COMMANDS["combined"]), num_envs=4)
    agent = _load_agent(cfg, env, load_run_checkpoint(run_dir, None, require=POLICY_CHECKPOINT_KEYS))
    policy = OnnxPolicy(run_dir / "policy.onnx", export_fix="trainrt export")
    policy.check_matches(env, task=cfg.task.name, obs_group="policy", fix="")
    obs, worst = env.reset(), 0.0
    for _ in range(30):
        actions = agent.act(obs, deterministic=True)
        worst = max(worst, float((policy.act(obs) - actions).abs().max()))
        obs = env.step(actions).obs
    assert worst < 1e-5  # measured about 2e-9; the export itself is checked to 1e-4


def _hand_built(path, obs_dim: int, num_actions: int, **metadata):
    """An ONNX policy of the given widths (a linear layer and tanh) with ``metadata``."""
    from trainrt.runner.export import export_policy_onnx

    export_policy_onnx(
        nn.Sequential(nn.Linear(obs_dim, num_actions), nn.Tanh()), obs_dim, path, metadata=metadata
    )
    return path


def _run_widths(run_dir) -> tuple[int, int]:
    state = torch.load(run_dir / "checkpoints" / "ckpt_000002.pt", map_location="cpu", weights_only=True)
    return state["env_meta"]["obs_dims"]["policy"], state["env_meta"]["num_actions"]


def test_an_onnx_policy_of_other_widths_is_refused_naming_both(run_dir, tmp_path):
    obs_dim, num_actions = _run_widths(run_dir)
    narrow = _hand_built(tmp_path / "narrow.onnx", 5, num_actions)
    with pytest.raises(ValueError) as refused:
        evaluate_run(run_dir, steps=2, commands=["stand"], onnx=narrow, **EVAL)
    message = str(refused.value)
    assert f"input width (policy observation) is 5, the run's is {obs_dim}" in message
    assert str(narrow) in message and f"trainrt export {run_dir}" in message and "\n" not in message
    few = _hand_built(tmp_path / "few.onnx", obs_dim, 3)
    with pytest.raises(ValueError, match=f"output width \\(actions\\) is 3, the run's is {num_actions}"):
        evaluate_run(run_dir, steps=2, commands=["stand"], onnx=few, **EVAL)
    assert not (run_dir / "eval" / "eval_onnx_narrow.json").exists()
    # a graph whose input width is symbolic is tried on one observation of the run's width
    import onnx

    model = onnx.load(narrow)
    width = model.graph.input[0].type.tensor_type.shape.dim[1]
    width.Clear()
    width.dim_param = "width"
    onnx.save(model, tmp_path / "symbolic.onnx")
    with pytest.raises(
        ValueError, match=r"symbolic.onnx does not fit this run: .*; export this run's policy"
    ):
        evaluate_run(run_dir, steps=2, commands=["stand"], onnx=tmp_path / "symbolic.onnx", **EVAL)
    # a file without metadata but of the run's widths runs (its results are named after the file)
    plain = _hand_built(tmp_path / "plain.onnx", obs_dim, num_actions)
    result = evaluate_run(run_dir, steps=2, commands=["stand"], onnx=plain, **EVAL)
    assert result["iteration"] is None and result["json_path"].endswith("eval_onnx_plain.json")
    assert format_eval_table(result).startswith("eval sac/g1_walk_flat ONNX plain.onnx on mujoco")


def test_an_onnx_policy_of_other_observation_terms_or_task_is_refused(run_dir, tmp_path):
    import onnx

    def with_metadata(name: str, key: str, value: str):
        model = onnx.load(run_dir / "policy.onnx")
        entry = next(p for p in model.metadata_props if p.key == key)
        entry.value = value
        onnx.save(model, tmp_path / name)
        return tmp_path / name

    model = onnx.load(run_dir / "policy.onnx")
    names = json.loads(next(p.value for p in model.metadata_props if p.key == "observation_names"))
    swapped = with_metadata("swapped.onnx", "observation_names", json.dumps(names[::-1]))
    with pytest.raises(ValueError, match=r"its observation term list is .* the run's is .*; export this run"):
        evaluate_run(run_dir, steps=2, commands=["stand"], onnx=swapped, **EVAL)
    other_task = with_metadata("tracking.onnx", "task", "g1_motion_tracking")
    with pytest.raises(ValueError, match="its task is g1_motion_tracking, the run's is g1_walk_flat"):
        evaluate_run(run_dir, steps=2, commands=["stand"], onnx=other_task, **EVAL)


def test_a_missing_file_or_onnxruntime_names_the_fix(run_dir, tmp_path, monkeypatch):
    with pytest.raises(
        FileNotFoundError, match=f"no ONNX policy at .*nope.onnx: write it with `trainrt export {run_dir}`"
    ):
        evaluate_run(run_dir, onnx=tmp_path / "nope.onnx", **EVAL)
    with pytest.raises(ValueError, match="give --onnx or --checkpoint"):
        evaluate_run(run_dir, checkpoint="1", onnx=run_dir / "policy.onnx", **EVAL)
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not a model")
    with pytest.raises(ValueError, match=r"is not a model onnxruntime can run .*trainrt export"):
        evaluate_run(run_dir, onnx=broken, **EVAL)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import onnxruntime raises ImportError
    with pytest.raises(
        ValueError, match="needs onnxruntime, which is not installed: pip install onnxruntime"
    ):
        evaluate_run(run_dir, onnx=run_dir / "policy.onnx", **EVAL)
