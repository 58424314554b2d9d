"""`benchmarks/canonical_runs.py` without a GPU: the override sets' parsing, the learner variants' overrides and
the training command lines (the runs themselves need MuJoCo Warp on a GPU)."""

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest
from benchmark_scripts import load

UNPADDED = "algo.params.gemm_alignment=1"


def test_an_override_set_keeps_its_config_overrides_as_the_cli_takes_them():
    script = load("canonical_runs")
    name, overrides = script.parse_override_set(f"two:{UNPADDED}, training.overlap=false")
    assert name == "two"
    assert overrides == [UNPADDED, "training.overlap=false"]


@pytest.mark.parametrize(
    "text",
    [
        UNPADDED,  # no NAME
        "unpadded:",  # no assignment
        "unpadded:gemm_alignment=1",  # no section
        "unpadded:algo.params.gemm_alignment=",  # no value
        f"preset:{UNPADDED}",  # the name of an override set
    ],
)
def test_a_malformed_override_set_is_refused_with_the_expected_form(text):
    script = load("canonical_runs")
    with pytest.raises(argparse.ArgumentTypeError, match=r"NAME:KEY=VALUE"):
        script.parse_override_set(text)


def test_a_run_is_the_cli_with_its_overrides_after_the_canonical_ones():
    script = load("canonical_runs")
    cmd = script.train_command("sac", "g1_walk_flat", Path("r"), [UNPADDED])
    assert cmd[1:4] == ["-m", "trainrt", "train"] and cmd[-1] == UNPADDED
    assert cmd.index("algo.num_envs=2048") < cmd.index(UNPADDED)


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


def test_a_learner_variant_runs_the_cli_with_that_variants_config_overrides():
    script = load("canonical_runs")
    assert script.variant_overrides("cast_weights", "flashsac") == ["algo.params.bf16_weight_copies=false"]
    assert script.variant_overrides("cast_weights", "sac") == []  # SAC has no unit-norm layers
    assert "cast_unfused" in script.end_to_end_variants()
    assert "zeroed_grads" not in script.end_to_end_variants()  # a measurement, in learner_variants.py only


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
            ["--override-set", f"cast_weights:{UNPADDED}", "--learner-variant", "cast_weights"],
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
