"""Renamed config keys: ``training.no_play`` is read as ``training.final_eval`` (inverted) from overrides,
Python dicts and older runs' ``config.json``; contradicting the new key is an error; only the new key is
written."""

import json
import warnings

import pytest
from pydantic import ValidationError

from trainrt.config import (
    OverrideError,
    TrainingSection,
    apply_overrides,
    cpu_demo_preset,
    resolve_train_config,
)
from trainrt.runner.manifest import CONFIG_FILE_NAME, load_resolved_config, write_resolved_config

DEPRECATION = (
    "training.no_play is deprecated: use training.final_eval (the opposite: training.no_play=true is "
    "training.final_eval=false)"
)


@pytest.fixture
def base():
    return cpu_demo_preset("sac", "g1_walk_flat", "mujoco")


def _old_run_dir(tmp_path, base, no_play: bool):
    """A run directory whose ``config.json`` an older version wrote: ``no_play`` instead of ``final_eval``."""
    run_dir = tmp_path / "old_run"
    run_dir.mkdir()
    data = base.model_dump(mode="json")
    del data["training"]["final_eval"]
    data["training"]["no_play"] = no_play
    (run_dir / CONFIG_FILE_NAME).write_text(json.dumps(data, indent=2))
    return run_dir


def test_the_default_runs_the_final_evaluation(base):
    assert TrainingSection().final_eval is True
    assert base.training.final_eval is True


@pytest.mark.parametrize(("text", "final_eval"), [("true", False), ("false", True), ("True", False)])
def test_the_old_override_maps_to_the_inverted_new_key_with_one_warning(base, text, final_eval):
    lines = []
    cfg = apply_overrides(base, [f"training.no_play={text}", "training.seed=3"], warn=lines.append)
    assert cfg.training.final_eval is final_eval
    assert cfg.training.seed == 3
    assert lines == [DEPRECATION]


def test_the_old_key_given_twice_warns_once_about_the_rename_and_the_last_one_wins(base):
    lines = []
    cfg = apply_overrides(base, ["training.no_play=false", "training.no_play=true"], warn=lines.append)
    assert cfg.training.final_eval is False
    assert lines.count(DEPRECATION) == 1
    assert [line for line in lines if line != DEPRECATION] == [
        "training.no_play is given 2 times ('training.no_play=false', 'training.no_play=true'); "
        "the last one wins: 'training.no_play=true'"
    ]


@pytest.mark.parametrize(
    ("overrides", "final_eval"),
    [
        (["training.no_play=true", "training.final_eval=false"], False),
        (["training.final_eval=true", "training.no_play=false"], True),
    ],
)
def test_old_and_new_key_that_agree_are_accepted(base, overrides, final_eval):
    lines = []
    cfg = apply_overrides(base, overrides, warn=lines.append)
    assert cfg.training.final_eval is final_eval
    assert lines == [DEPRECATION]


@pytest.mark.parametrize(
    "overrides",
    [
        ["training.no_play=true", "training.final_eval=true"],
        ["training.final_eval=true", "training.no_play=true"],
        ["training.no_play=false", "training.final_eval=false"],
    ],
)
def test_old_and_new_key_that_contradict_are_an_error_naming_both(base, overrides):
    with pytest.raises(OverrideError) as err:
        apply_overrides(base, overrides, warn=lambda line: None)
    message = str(err.value)
    for given in overrides:
        assert repr(given) in message
    assert "give only training.final_eval" in message


def test_an_unreadable_old_value_names_the_old_key(base):
    with pytest.raises(OverrideError, match=r"'training\.no_play': 'maybe'.*must be true or false"):
        apply_overrides(base, ["training.no_play=maybe"], warn=lambda line: None)


def test_without_a_warn_callback_the_rename_is_a_python_warning(base):
    with pytest.warns(UserWarning, match="training.no_play is deprecated: use training.final_eval"):
        cfg = apply_overrides(base, ["training.no_play=true"])
    assert cfg.training.final_eval is False


def test_the_cli_prints_the_deprecation_on_stderr(capsys):
    cfg, _ = resolve_train_config(
        "sac", "g1_walk_flat", "mujoco", ["training.no_play=true"], "cpu-demo", cuda_available=False
    )
    assert cfg.training.final_eval is False
    err = capsys.readouterr().err
    assert err.count("warning: training.no_play is deprecated: use training.final_eval") == 1


def test_the_unknown_key_error_lists_the_new_key_not_the_old_one(base):
    with pytest.raises(OverrideError) as err:
        apply_overrides(base, ["training.no_ply=true"])
    valid = str(err.value).partition("valid keys there: ")[2].split(", ")
    assert "final_eval" in valid and "no_play" not in valid


def test_python_construction_with_the_old_name_warns_and_maps():
    with pytest.warns(DeprecationWarning, match="use training.final_eval"):
        section = TrainingSection(no_play=True)
    assert section.final_eval is False
    assert "no_play" not in section.model_dump()
    with pytest.raises(
        ValidationError, match=r"training\.no_play=True and training\.final_eval=True contradict"
    ):
        TrainingSection.model_validate({"no_play": True, "final_eval": True})


def test_config_json_records_only_the_new_key(tmp_path, base):
    cfg = apply_overrides(base, ["training.no_play=true"], warn=lambda line: None)
    path = write_resolved_config(tmp_path, cfg)
    training = json.loads(path.read_text())["training"]
    assert training["final_eval"] is False
    assert "no_play" not in training
    assert "no_play" not in path.read_text()


@pytest.mark.parametrize(("no_play", "final_eval"), [(True, False), (False, True)])
def test_an_older_runs_config_json_with_no_play_loads_without_a_warning(tmp_path, base, no_play, final_eval):
    run_dir = _old_run_dir(tmp_path, base, no_play)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = load_resolved_config(run_dir)
    assert cfg.training.final_eval is final_eval
    assert cfg.model_dump(exclude={"training": {"final_eval"}}) == base.model_dump(
        exclude={"training": {"final_eval"}}
    )


def test_resuming_an_older_run_reads_no_play_and_writes_final_eval(tmp_path, base, capsys):
    run_dir = _old_run_dir(tmp_path, base, no_play=True)
    cfg, resolution = resolve_train_config(
        "sac", "g1_walk_flat", "mujoco", [f"training.resume={run_dir}"], cuda_available=False
    )
    assert resolution["preset"] == "resumed run config"
    assert cfg.training.final_eval is False
    assert "deprecated" not in capsys.readouterr().err  # the old file is a record, not a use of the old key
    (tmp_path / "resumed").mkdir()
    assert "no_play" not in write_resolved_config(tmp_path / "resumed", cfg).read_text()
