"""CLI end to end: `trainrt eval` on tiny runs of both tasks, evaluated on both backends.

Each case trains a tiny run on CPU MuJoCo (as a user would, in a subprocess) and evaluates it with a short
horizon; the mjwarp case is the sim-to-sim direction (Warp's CPU device here).
"""

import json

import pytest
from cli_runs import trainrt


@pytest.fixture(scope="module", params=["g1_walk_flat", "g1_motion_tracking"])
def tiny_run(request, one_iteration_run):
    return request.param, one_iteration_run(request.param)


@pytest.mark.slow
@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_eval_writes_a_table_and_json(tiny_run, sim, tmp_path):
    task, run_dir = tiny_run
    target = tmp_path / "eval.json"
    extra = ["--commands", "stand,forward_0.5"] if task == "g1_walk_flat" else []
    out = trainrt(
        "eval", str(run_dir), "--sim", sim, "--num-envs", "2", "--steps", "3", "--checkpoint", "1",
        "--out", str(target), *extra,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(target.read_text())
    assert (result["task"], result["sim"], result["trained_sim"], result["iteration"]) == (
        task,
        sim,
        "mujoco",
        1,
    )
    assert result["solver_iterations"] == result["trained_solver_iterations"]  # the run's, unless asked
    if task == "g1_walk_flat":
        assert list(result["commands"]) == ["stand", "forward_0.5"]
        assert result["commands"]["forward_0.5"]["command"] == {
            "lin_vel_x": 0.5,
            "lin_vel_y": 0.0,
            "ang_vel_z": 0.0,
        }
        rows = result["commands"].values()
        assert "forward_0.5" in out.stdout and "lin vel err" in out.stdout
    else:
        rows = [result["tracking"]]
        assert result["clip"]["motion_file"].endswith("sub3_largebox_003_mj.npz")
        assert "body pos err" in out.stdout
    for row in rows:
        assert 0.0 <= row["failed_fraction"] <= 1.0 and row["steps"] <= 3 and row["num_envs"] == 2
        assert 0.0 < row["mean_episode_length"] <= 3


@pytest.mark.slow
def test_eval_default_output_and_bad_checkpoint(tiny_run):
    task, run_dir = tiny_run
    extra = ["--commands", "stand"] if task == "g1_walk_flat" else []
    out = trainrt("eval", str(run_dir), "--num-envs", "1", "--steps", "2", *extra)
    assert out.returncode == 0, out.stderr[-3000:]
    assert (run_dir / "eval" / "eval_1.json").is_file()
    bad = trainrt("eval", str(run_dir), "--checkpoint", "99")
    assert bad.returncode == 2 and "no checkpoint for iteration 99" in bad.stderr


@pytest.mark.slow
def test_eval_under_another_solver_iteration_limit(tiny_run, tmp_path):
    task, run_dir = tiny_run
    # the walk preset stops the solver at 5 (docs/perf/tuning/0022)
    trained_with = 5 if task == "g1_walk_flat" else 10
    extra = ["--commands", "stand"] if task == "g1_walk_flat" else []
    target = tmp_path / "eval.json"
    out = trainrt(
        "eval", str(run_dir), "--num-envs", "1", "--steps", "2", "--solver-iterations", "7",
        "--out", str(target), *extra,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(target.read_text())
    assert (result["solver_iterations"], result["trained_solver_iterations"]) == (7, trained_with)
    assert f"solver iterations 7 (trained with {trained_with})" in out.stdout
    bad = trainrt("eval", str(run_dir), "--solver-iterations", "0")
    assert bad.returncode == 2 and "solver-iterations" in bad.stderr


@pytest.mark.slow
def test_eval_of_the_exported_onnx_policy(tiny_run, tmp_path):
    pytest.importorskip("onnxruntime")
    task, run_dir = tiny_run
    policy = tmp_path / "policy.onnx"
    exported = trainrt("export", str(run_dir), "--output", str(policy))
    assert exported.returncode == 0, exported.stderr[-3000:]
    extra = ["--commands", "stand"] if task == "g1_walk_flat" else []
    out = trainrt("eval", str(run_dir), "--num-envs", "1", "--steps", "3", "--onnx", str(policy), *extra)
    assert out.returncode == 0, out.stderr[-3000:]
    # its own file, beside the checkpoint's evaluation, saying which policy acted
    target = run_dir / "eval" / "eval_onnx_1.json"
    result = json.loads(target.read_text())
    assert result["policy"] == f"onnx:{policy}" and result["checkpoint"] is None and result["iteration"] == 1
    assert f"wrote {target}" in out.stdout and "ONNX policy.onnx, iteration 1" in out.stdout
    rows = result["commands"].values() if task == "g1_walk_flat" else [result["tracking"]]
    assert all(0.0 < row["mean_episode_length"] <= 3 for row in rows)
    if task != "g1_walk_flat":
        return
    missing = trainrt("eval", str(run_dir), "--onnx", str(tmp_path / "nope.onnx"))
    assert missing.returncode == 2 and f"write it with `trainrt export {run_dir}`" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    both = trainrt("eval", str(run_dir), "--onnx", str(policy), "--checkpoint", "1")
    assert both.returncode == 2 and "leave out --checkpoint" in both.stderr


@pytest.mark.slow
def test_eval_refuses_an_onnx_policy_of_other_widths(tiny_run, tmp_path):
    pytest.importorskip("onnxruntime")
    task, run_dir = tiny_run
    if task != "g1_walk_flat":
        pytest.skip("one task shows the check")
    import torch
    from torch import nn

    from trainrt.runner.export import export_policy_onnx

    state = torch.load(run_dir / "checkpoints" / "ckpt_000001.pt", map_location="cpu", weights_only=True)
    obs_dim, num_actions = state["env_meta"]["obs_dims"]["policy"], state["env_meta"]["num_actions"]
    narrow = tmp_path / "narrow.onnx"
    export_policy_onnx(nn.Sequential(nn.Linear(obs_dim - 1, num_actions), nn.Tanh()), obs_dim - 1, narrow)
    out = trainrt(
        "eval", str(run_dir), "--num-envs", "1", "--steps", "2", "--commands", "stand", "--onnx", str(narrow)
    )
    assert out.returncode == 2, out.stderr[-3000:]
    (line,) = out.stderr.strip().splitlines()
    assert f"input width (policy observation) is {obs_dim - 1}, the run's is {obs_dim}" in line
    assert f"trainrt export {run_dir}" in line
