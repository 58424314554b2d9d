"""Dotted command-line overrides: parsing, merging over a preset, and clear errors."""

import pytest

from trainrt.config import OverrideError, TrainConfig, apply_overrides, parse_override, parse_scalar, preset


@pytest.fixture
def base() -> TrainConfig:
    return preset("sac", "g1_walk_flat")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("true", True),
        ("False", False),
        ("null", None),
        ("none", None),
        ("12", 12),
        ("-3", -3),
        ("1e-4", 1e-4),
        ("0.5", 0.5),
        ("[64, 64]", [64, 64]),
        ("runs/x", "runs/x"),
        ("mjwarp", "mjwarp"),
    ],
)
def test_scalar_values_are_parsed(text, value):
    assert parse_scalar(text) == value
    assert type(parse_scalar(text)) is type(value)


def test_overrides_merge_over_the_preset_and_keep_other_fields(base):
    cfg = apply_overrides(
        base,
        [
            "algo.max_iterations=160",
            "algo.num_envs=2048",
            "training.final_eval=false",
            "training.export_onnx=false",
            "training.seed=1",
            "training.run_dir=/tmp/some run",
            "algo.params.critic_lr=1e-4",
            "algo.params.adam_betas=[0.9, 0.99]",
            "sim.device=cuda:0",
        ],
    )
    assert cfg.algo.max_iterations == 160
    assert cfg.training.final_eval is False and cfg.training.export_onnx is False
    assert cfg.training.seed == 1
    assert cfg.training.run_dir == "/tmp/some run"
    assert cfg.algo.params.critic_lr == pytest.approx(1e-4)
    assert cfg.algo.params.adam_betas == (0.9, 0.99)
    assert cfg.sim.device == "cuda:0"
    # untouched fields keep the preset's values; the preset itself is not modified
    assert cfg.algo.params.batch_size == base.algo.params.batch_size
    assert base.algo.max_iterations != 160


def test_text_fields_keep_the_value_verbatim(base):
    cfg = apply_overrides(base, ["training.run_dir=123", "training.resume=null"])
    assert cfg.training.run_dir == "123"
    assert cfg.training.resume is None


def test_later_overrides_win(base):
    assert apply_overrides(base, ["training.seed=1", "training.seed=2"]).training.seed == 2


def test_unknown_key_lists_the_valid_keys_at_that_level(base):
    with pytest.raises(OverrideError) as err:
        apply_overrides(base, ["algo.num_env=8"])
    message = str(err.value)
    assert "unknown config key 'algo.num_env'" in message
    assert "'algo.num_env=8'" in message
    assert "valid keys there: name, num_envs, max_iterations, steps_per_iteration, params" in message


def test_unknown_nested_and_top_level_keys(base):
    with pytest.raises(
        OverrideError, match=r"no 'batch_sz' under 'algo.params'; valid keys there: .*batch_size"
    ):
        apply_overrides(base, ["algo.params.batch_sz=3"])
    with pytest.raises(OverrideError, match="valid keys there: algo, task, sim, training"):
        apply_overrides(base, ["trainig.seed=3"])
    with pytest.raises(OverrideError, match=r"'training.seed' is a value, not a section"):
        apply_overrides(base, ["training.seed.x=1"])
    with pytest.raises(OverrideError, match=r"is a section, not a value; set one of its keys: .*batch_size"):
        apply_overrides(base, ["algo.params=3"])


def test_bad_type_names_key_value_and_problem(base):
    with pytest.raises(OverrideError) as err:
        apply_overrides(base, ["algo.num_envs=many"])
    message = str(err.value)
    assert "invalid value for 'algo.num_envs': 'many'" in message
    assert "(from override 'algo.num_envs=many')" in message
    assert "valid integer" in message
    with pytest.raises(
        OverrideError, match=r"invalid value for 'training.cuda_graph': 'maybe'.*valid boolean"
    ):
        apply_overrides(base, ["training.cuda_graph=maybe"])
    with pytest.raises(
        OverrideError, match=r"invalid value for 'algo.num_envs': 0 .*greater than or equal to 1"
    ):
        apply_overrides(base, ["algo.num_envs=0"])


def test_bad_enum_lists_the_valid_choices(base):
    with pytest.raises(OverrideError) as err:
        apply_overrides(base, ["sim.backend=physx"])
    message = str(err.value)
    assert "invalid value for 'sim.backend': 'physx'" in message
    assert "valid choices: mujoco, mjwarp" in message


def test_cross_field_check_names_both_keys(base):
    with pytest.raises(OverrideError, match=r"algo.steps_per_iteration=8 is not a multiple of .*replay=3"):
        apply_overrides(base, ["training.collector_steps_per_replay=3"])


def test_reserved_keys_say_what_sets_them(base):
    with pytest.raises(OverrideError, match=r"'algo.name' cannot be overridden .*set it with --algo"):
        apply_overrides(base, ["algo.name=flashsac"], reserved={"algo.name": "set it with --algo"})


@pytest.mark.parametrize("text", ["algo.num_envs", "=3", "algo..num_envs=3"])
def test_malformed_overrides_are_rejected(text):
    with pytest.raises(OverrideError, match=r"key=value|empty part"):
        parse_override(text)


def test_value_may_contain_equals_sign():
    override = parse_override("training.run_dir=a=b")
    assert override.key == "training.run_dir"
    assert override.value_text == "a=b"
