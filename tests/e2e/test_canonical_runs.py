"""`benchmarks/canonical_runs.py` without a GPU: the constant sets' parsing and the training process that
applies them before the CLI starts (the runs themselves need MuJoCo Warp on a GPU)."""

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from benchmark_scripts import load

PROGRAMS = "trainrt.algos.fused_norm._TARGET_PROGRAMS"


def test_a_constant_set_parses_json_values_and_keeps_other_values_as_strings():
    script = load("canonical_runs")
    name, constants = script.parse_constant_set(f"programs_64:{PROGRAMS}=64,trainrt.algos.networks.X=fast")
    assert name == "programs_64"
    assert constants == {PROGRAMS: 64, "trainrt.algos.networks.X": "fast"}
    assert isinstance(constants[PROGRAMS], int)


@pytest.mark.parametrize(
    "text",
    [
        f"{PROGRAMS}=64",  # no NAME
        "programs_64:",  # no assignment
        "programs_64:_TARGET_PROGRAMS=64",  # no module
        f"programs_64:{PROGRAMS}=",  # no value
        f"preset:{PROGRAMS}=64",  # the name of an override set
    ],
)
def test_a_malformed_constant_set_is_refused_with_the_expected_form(text):
    script = load("canonical_runs")
    with pytest.raises(argparse.ArgumentTypeError, match=r"NAME:MODULE\.ATTR=VALUE"):
        script.parse_constant_set(text)


def _child(constants, cli_args):
    """The training command of a constant set, with the CLI's arguments replaced by ``cli_args``."""
    script = load("canonical_runs")
    cmd = script.train_command("sac", "g1_walk_flat", Path("unused"), [], constants)
    assert cmd[1] == "-c" and cmd[4] == "train"  # python -c SNIPPET CONSTANTS train ...
    return subprocess.run([*cmd[:4], *cli_args], capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
def test_the_training_process_sets_the_constants_then_runs_the_cli():
    script = load("canonical_runs")
    assert script.train_command("sac", "g1_walk_flat", Path("r"), ["a=1"])[1:4] == ["-m", "trainrt", "train"]
    result = _child({PROGRAMS: 64}, ["train", "--help"])
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"constant set: {PROGRAMS} = 64" in result.stderr
    assert "--algo" in result.stdout  # the CLI's own help: it ran after the constant was set


@pytest.mark.slow
def test_a_constant_the_module_does_not_have_stops_the_run_and_names_it():
    result = _child({"trainrt.algos.fused_norm._TARGET_PROGRAM": 64}, ["train", "--help"])
    assert result.returncode != 0
    assert "trainrt.algos.fused_norm has no attribute '_TARGET_PROGRAM'" in result.stderr
    assert "usage" not in result.stdout  # the CLI never started


@pytest.mark.slow
@pytest.mark.parametrize("algos", ["ppo", "sac,ppo", ","])
def test_algos_naming_no_workload_or_an_unknown_one_is_refused(algos):
    from benchmark_scripts import BENCHMARKS

    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "canonical_runs.py"), f"--algos={algos}", "--root", "unused"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert "name one or more of the workloads' ['sac', 'flashsac']" in result.stderr


def test_a_summary_without_completed_iterations_is_tabulated_without_tail_means():
    script = load("canonical_runs")
    failed = {"status": "failed", "error": "boom", "iterations": [], "tail_iteration_count": 0}
    row = script.summary_fields(failed)
    assert (row["status"], row["tail_collect_ms"], row["tail_learn_ms"]) == ("failed", None, None)
    iteration = {"collect_time_sec": 0.08, "learn_time_sec": 0.05}
    done = {
        "status": "completed",
        "iterations": [{"collect_time_sec": 1.0, "learn_time_sec": 1.0}, iteration, iteration],
        "tail_iteration_count": 2,
        "collector_graph": {"graph_enabled": True},
        "learner_graph": {"update_graph_enabled": True},
    }
    row = script.summary_fields(done)
    assert row["tail_collect_ms"] == pytest.approx(80.0) and row["tail_learn_ms"] == pytest.approx(50.0)
    assert row["collector_graph_enabled"] and row["learner_graph_enabled"]


@pytest.mark.slow
def test_a_learner_variant_runs_the_cli_inside_that_variants_changes():
    script = load("canonical_runs")
    cmd = script.train_command("flashsac", "g1_motion_tracking", Path("unused"), [], variant="cast_weights")
    assert (
        cmd[1] == "-c" and cmd[4] == "cast_weights" and cmd[5] == "train"
    )  # python -c SNIPPET DIR NAME train
    result = subprocess.run(
        [*cmd[:5], "train", "--help"], capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert "learner variant: cast_weights = {'bf16_weight_copies': False}" in result.stderr
    assert "--algo" in result.stdout
    with pytest.raises(ValueError, match="either constants or a learner variant"):
        script.train_command("sac", "g1_walk_flat", Path("r"), [], {PROGRAMS: 64}, "cast_weights")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--learner-variant", "frozen_norm_affine"],
            r"--learner-variant \['frozen_norm_affine'\]: a training run",
        ),
        (["--learner-variant", "no_such"], r"can carry \[.*'cast_weights'"),
        (
            ["--constant-set", f"cast_weights:{PROGRAMS}=64", "--learner-variant", "cast_weights"],
            r"already the name of another set",
        ),
    ],
)
def test_a_learner_variant_a_run_cannot_carry_is_refused(args, message):
    from benchmark_scripts import BENCHMARKS

    result = subprocess.run(
        [sys.executable, str(BENCHMARKS / "canonical_runs.py"), *args, "--root", "unused"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 2
    assert re.search(message, result.stderr), result.stderr[-1000:]


def test_a_tree_set_runs_the_cli_from_that_checkout(tmp_path):
    script = load("canonical_runs")
    (tmp_path / "packages" / "trainrt" / "src" / "trainrt").mkdir(parents=True)
    (tmp_path / "packages" / "trainrt" / "src" / "trainrt" / "__main__.py").write_text(
        "import trainrt, sys; print('from', trainrt.__file__); sys.exit(0)\n"
    )
    (tmp_path / "packages" / "trainrt" / "src" / "trainrt" / "__init__.py").write_text("")
    name, root = script.parse_tree(f"before:{tmp_path}")
    assert (name, root) == ("before", tmp_path.resolve())
    env = script.tree_environment(root)
    assert env["PYTHONPATH"].split(":")[:2] == [
        str(root / "packages" / "trainrt" / "src"),
        str(root / "packages" / "simcore" / "src"),
    ]
    cmd = script.train_command("sac", "g1_walk_flat", Path("unused"), [])
    result = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"from {root / 'packages' / 'trainrt' / 'src' / 'trainrt' / '__init__.py'}" in result.stdout


@pytest.mark.parametrize("text", ["before", "before:", "preset:{tmp}", "before:{tmp}/missing"])
def test_a_tree_that_is_not_a_checkout_is_refused_with_the_expected_form(text, tmp_path):
    script = load("canonical_runs")
    with pytest.raises(argparse.ArgumentTypeError, match="NAME:PATH"):
        script.parse_tree(text.format(tmp=tmp_path))
