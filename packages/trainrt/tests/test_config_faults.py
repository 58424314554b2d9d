"""Config faults found at config time: duplicate overrides warn, empty paths and absent CUDA devices are refused."""

import pytest

from trainrt.cli import check_device_available, resolve_train_config
from trainrt.config import OverrideError, apply_overrides, cpu_demo_preset


@pytest.fixture
def base():
    return cpu_demo_preset("sac", "g1_walk_flat", "mujoco")


def test_a_key_given_twice_warns_and_the_last_value_wins(base):
    lines = []
    cfg = apply_overrides(base, ["training.seed=1", "algo.num_envs=4", "training.seed=7"], warn=lines.append)
    assert cfg.training.seed == 7
    assert lines == [
        "training.seed is given 2 times ('training.seed=1', 'training.seed=7'); "
        "the last one wins: 'training.seed=7'"
    ]
    with pytest.warns(UserWarning, match="algo.num_envs is given 2 times"):
        apply_overrides(base, ["algo.num_envs=4", "algo.num_envs=2"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("training.resume=", r"training\.resume is empty"),
        ("training.run_dir=", r"training\.run_dir is empty"),
        ("training.run_dir=  ", r"training\.run_dir is empty"),
        ("training.overwrite=sometimes", r"training\.overwrite"),
        ("training.save_replay=2", r"training\.save_replay"),
        ("training.time_limit_sec=0", r"training\.time_limit_sec"),
        ("training.time_limit_sec=-5", r"training\.time_limit_sec"),
        ("training.time_limit_sec=soon", r"training\.time_limit_sec"),
    ],
)
def test_bad_run_settings_are_refused_naming_the_key(base, override, message):
    with pytest.raises(OverrideError, match=message):
        apply_overrides(base, [override])


@pytest.mark.parametrize(
    ("device", "available", "count", "message"),
    [
        ("cuda", False, 0, r"sim.device=cuda but no CUDA device is visible.*use sim.device=cpu"),
        ("cuda:1", True, 1, r"sim.device=cuda:1 but only 1 CUDA device\(s\) are visible \(cuda:0..cuda:0\)"),
        ("cuda:0", True, 1, None),
        ("cpu", False, 0, None),
    ],
)
def test_a_cuda_device_must_exist(base, device, available, count, message):
    cfg = apply_overrides(base, [f"sim.device={device}"])
    if message is None:
        check_device_available(cfg, cuda_available=available, cuda_device_count=count)
        return
    with pytest.raises(ValueError, match=message):
        check_device_available(cfg, cuda_available=available, cuda_device_count=count)


def test_a_resumed_config_does_not_carry_its_old_run_dir_or_overwrite(tmp_path, base):
    from trainrt.runner.manifest import write_resolved_config

    original = tmp_path / "original"
    saved = apply_overrides(base, [f"training.run_dir={original}", "training.overwrite=true"])
    copy = tmp_path / "copy"
    write_resolved_config(copy, saved)
    cfg, _ = resolve_train_config(
        "sac", "g1_walk_flat", "mujoco", [f"training.resume={copy}"], cuda_available=False
    )
    assert cfg.training.run_dir is None and cfg.training.overwrite is False
    assert cfg.training.resume == str(copy)
    cfg, _ = resolve_train_config(
        "sac",
        "g1_walk_flat",
        "mujoco",
        [f"training.resume={copy}", f"training.run_dir={tmp_path / 'new'}"],
        cuda_available=False,
    )
    assert cfg.training.run_dir == str(tmp_path / "new")


def test_an_output_file_that_cannot_be_written_is_refused_before_the_work(tmp_path, monkeypatch, capsys):
    import os
    from pathlib import Path

    import typer

    from trainrt import cli

    folder = tmp_path / "results"
    folder.mkdir()
    cli._check_output_file(folder / "sub" / "e.json", "--out", "eval.json")  # writable: passes
    # Permission bits do not stop root, so the check's own question is answered "no" here.
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != folder)
    with pytest.raises(typer.Exit) as exit_info:
        cli._check_output_file(folder / "sub" / "e.json", "--out", "eval.json")
    assert exit_info.value.exit_code == 2
    assert f"error: --out {folder / 'sub' / 'e.json'}: {folder} is not writable" in capsys.readouterr().err
    with pytest.raises(typer.Exit):
        cli._check_output_file(None, "--output", "policy.onnx", default=folder / "policy.onnx")
    assert "(where it writes by default; give --output PATH elsewhere)" in capsys.readouterr().err
    cli._check_output_file(None, "--output", "policy.onnx")  # nothing to write by default: nothing to check


def test_reward_weights_that_let_returns_outgrow_the_critic_support_are_warned_with_the_fix(capsys):
    resolve_train_config("sac", "g1_walk_flat", None, ["task.rewards.alive.weight=50"], "canonical")
    err = capsys.readouterr().err
    assert "beyond the critic's support [-5, 5] sized for the preset's weights" in err
    assert "add algo.params.v_min=-45 algo.params.v_max=45" in err
    for overrides in (
        ["task.rewards.alive.weight=50", "algo.params.v_min=-45", "algo.params.v_max=45"],  # sized by hand
        ["task.rewards.alive.weight=0.5"],  # returns shrink: the support still holds them
    ):
        resolve_train_config("sac", "g1_walk_flat", None, overrides, "canonical")
        assert "critic's support" not in capsys.readouterr().err
