"""A task from the user's own module: one ``register_task`` call, then ``train``, ``eval``, ``play`` and
``export`` through the CLI on the CPU, with no file of the package changed.

The module is written into ``tmp_path`` and loaded by the CLI subprocesses through ``$TRAINRT_TASK_MODULES``
(with ``tmp_path`` on ``$PYTHONPATH``). It reuses the G1 walk's env config with one changed reward weight,
shrinks the walk's presets, and defines its own two-scenario evaluation.
"""

import json
import os
import textwrap

import pytest
from cli_runs import train, trainrt

TASK_MODULE = '''
from trainrt.tasks.registry import register_task


def env_cfg():
    """G1 walk on flat ground with a doubled alive bonus (a user's variant of g1_walk_flat)."""
    from trainrt.tasks.g1_walk_flat.env_cfg import g1_walk_flat_env_cfg

    cfg = g1_walk_flat_env_cfg()
    cfg.rewards["alive"].weight = 2.0
    return cfg


def sac_preset():
    from trainrt.config import preset

    cfg = preset("sac", "g1_walk_flat")
    return cfg.model_copy(update={"task": cfg.task.model_copy(update={"name": "my_stiff_walk"})})


def evaluation():
    from trainrt.runner.evaluation_spec import EvalScenario, EvaluationSpec, with_task_changes

    return EvaluationSpec(
        config=lambda cfg: with_task_changes(cfg, {"events": {"push_robot": {"enabled": False}}}),
        scenarios=(EvalScenario("first", {"label": 1}), EvalScenario("second", {"label": 2})),
        metrics={"root_height": lambda env: env.robot.root_pos_w[:, 2]},
        horizon=lambda env, options: 4,
    )


register_task("my_stiff_walk", env_cfg=env_cfg, presets={"sac": sac_preset}, evaluation=evaluation)
'''


@pytest.fixture
def task_module(tmp_path, monkeypatch):
    """``my_tasks`` in ``tmp_path``, named in ``$TRAINRT_TASK_MODULES`` for the CLI subprocesses."""
    (tmp_path / "my_tasks.py").write_text(textwrap.dedent(TASK_MODULE))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("TRAINRT_TASK_MODULES", "my_tasks")
    return tmp_path


@pytest.mark.slow
def test_a_task_from_a_users_module_trains_evaluates_plays_and_exports(task_module, tmp_path):
    out = trainrt("train", "--help")
    assert out.returncode == 0 and "my_stiff_walk" in out.stdout, out.stdout[-2000:]

    run_dir = tmp_path / "run"
    out = train(run_dir, "sac", "my_stiff_walk", "mujoco", iterations=1)
    assert out.returncode == 0, out.stderr[-3000:]
    stored = json.loads((run_dir / "config.json").read_text())
    assert stored["task"]["name"] == "my_stiff_walk"

    target = tmp_path / "eval.json"
    out = trainrt("eval", str(run_dir), "--num-envs", "2", "--out", str(target))
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(target.read_text())
    assert result["task"] == "my_stiff_walk"
    assert list(result["scenarios"]) == ["first", "second"]
    for label, row in enumerate(result["scenarios"].values(), start=1):
        assert row["label"] == label and row["num_envs"] == 2 and row["horizon_steps"] == 4
        assert 0.0 < row["root_height"] < 1.5
    assert "root_height" in out.stdout  # the generic table names the task's metric

    out = trainrt("eval", str(run_dir), "--num-envs", "2", "--horizon-s", "1", "--out", str(target))
    assert out.returncode == 2 and "takes no such option" in out.stderr, out.stderr[-2000:]

    out = trainrt("play", str(run_dir), "--num-envs", "2", "--steps", "5")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "mean return" in out.stdout and "mean episode length" in out.stdout

    onnx_path = tmp_path / "policy.onnx"
    out = trainrt("export", str(run_dir), "--output", str(onnx_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert onnx_path.is_file() and onnx_path.stat().st_size > 0


def test_an_unregistered_task_exits_2_naming_the_registered_ones():
    out = trainrt("train", "--task", "no_such_task", "--sim", "mujoco", "--preset", "cpu-demo")
    assert out.returncode == 2
    assert "unknown task 'no_such_task'" in out.stderr and "g1_walk_flat" in out.stderr
