"""Config faults found at config time: duplicate overrides warn, empty paths and absent CUDA devices are refused."""

import pytest

from trainrt.config import OverrideError, apply_overrides, cpu_demo_preset
from trainrt.config.resolve import check_device_available, resolve_train_config


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

    from trainrt.cli import common as cli

    folder = tmp_path / "results"
    folder.mkdir()
    cli.check_output_file(folder / "sub" / "e.json", "--out", "eval.json")  # writable: passes
    # Permission bits do not stop root, so the check's own question is answered "no" here.
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != folder)
    with pytest.raises(typer.Exit) as exit_info:
        cli.check_output_file(folder / "sub" / "e.json", "--out", "eval.json")
    assert exit_info.value.exit_code == 2
    assert f"error: --out {folder / 'sub' / 'e.json'}: {folder} is not writable" in capsys.readouterr().err
    with pytest.raises(typer.Exit):
        cli.check_output_file(None, "--output", "policy.onnx", default=folder / "policy.onnx")
    assert "(where it writes by default; give --output PATH elsewhere)" in capsys.readouterr().err
    cli.check_output_file(None, "--output", "policy.onnx")  # nothing to write by default: nothing to check


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


@pytest.mark.parametrize(
    ("algo", "override", "key"),
    [
        ("sac", "algo.params.actor_lr=inf", "algo.params.actor_lr"),
        ("sac", "algo.params.v_max=inf", "algo.params.v_max"),
        ("sac", "algo.params.v_min=-inf", "algo.params.v_min"),
        ("sac", "algo.params.target_entropy_per_action=nan", "algo.params.target_entropy_per_action"),
        ("sac", "algo.params.adam_betas=[0.9, NaN]", "algo.params.adam_betas"),
        ("flashsac", "algo.params.target_entropy=nan", "algo.params.target_entropy"),
        ("sac", "task.episode_length_s=inf", "task.episode_length_s"),
        ("sac", "training.time_limit_sec=inf", "training.time_limit_sec"),
        ("sac", "training.distributed.timeout_sec=nan", "training.distributed.timeout_sec"),
    ],
)
def test_a_float_setting_must_be_finite(algo, override, key):
    with pytest.raises(OverrideError) as refused:
        apply_overrides(cpu_demo_preset(algo, "g1_walk_flat", "mujoco"), [override])
    assert f"invalid value for {key!r}" in str(refused.value)
    assert f"(from override {override!r}): must be a finite number, not inf or nan" in str(refused.value)


@pytest.mark.parametrize("value", ["Infinity", "inf", "NaN", "[1.0, Infinity]"])
def test_a_term_overrides_numbers_must_be_finite(base, value):
    key = "task.events.push_robot.interval_range_s" if value.startswith("[") else "task.rewards.alive.weight"
    with pytest.raises(OverrideError) as refused:
        apply_overrides(base, [f"{key}={value}"])
    named = f"{key}[1]" if value.startswith("[") else key
    assert f"{named} must be a finite number, got " in str(refused.value)


def test_every_config_model_refuses_inf_and_nan_unless_a_field_documents_it():
    from pydantic import BaseModel

    from trainrt.algos import FlashSacConfig, SacConfig
    from trainrt.config.schema import (
        DistributedSection,
        FlashSacAlgoSection,
        SacAlgoSection,
        SimSection,
        TaskSection,
        TrainConfig,
        TrainingSection,
    )

    models: list[type[BaseModel]] = [
        TrainConfig, SacAlgoSection, FlashSacAlgoSection, SacConfig, FlashSacConfig,
        TaskSection, SimSection, TrainingSection, DistributedSection,
    ]  # fmt: skip
    for model in models:
        assert model.model_config.get("allow_inf_nan") is False, model.__name__
        for name, field in model.model_fields.items():
            allows = any(getattr(m, "allow_inf_nan", None) for m in field.metadata)
            assert not allows or "inf" in (field.description or ""), f"{model.__name__}.{name}"


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("task.episode_length_s=1e300", "task.episode_length_s"),
        ("training.distributed.timeout_sec=1e300", "training.distributed.timeout_sec"),
        ("training.video_seconds=1e300", "training.video_seconds"),
    ],
)
def test_a_duration_is_bounded_so_its_steps_stay_integers(base, override, key):
    with pytest.raises(OverrideError, match=rf"invalid value for '{key}'.*less than or equal to 1000000000"):
        apply_overrides(base, [override])
    days = apply_overrides(base, [f"{key}=86400"])  # a day still is a setting
    section, _, name = key.rpartition(".")
    node = days
    for part in section.split("."):
        node = getattr(node, part)
    assert getattr(node, name) == 86400


def test_the_warm_up_must_fit_the_replay(base):
    cfg = apply_overrides(base, ["algo.params.buffer_size_per_env=16", "algo.params.learning_starts=15"])
    assert cfg.algo.params.learning_starts == 15
    for learning_starts in (16, 10**9):
        with pytest.raises(OverrideError) as refused:
            apply_overrides(
                base, ["algo.params.buffer_size_per_env=16", f"algo.params.learning_starts={learning_starts}"]
            )
        message = str(refused.value)
        assert f"algo.params.learning_starts={learning_starts} warm-up steps do not fit" in message
        assert "algo.params.buffer_size_per_env=16 rows per env" in message
        assert (
            "lower algo.params.learning_starts below 16 or raise algo.params.buffer_size_per_env" in message
        )
