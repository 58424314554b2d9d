"""`benchmarks/physics_variants.py` on the CPU: every variant is timed from every saved state in every round,
the ratios are to the first variant, an option variant changes the backend's options, and a bad variant name
is refused with the valid ones."""

import json
import subprocess
import sys

import pytest
from benchmark_scripts import BENCHMARKS, load

SCRIPT = BENCHMARKS / "physics_variants.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(SCRIPT), "--sim=mjwarp", "--num-envs=2", "--stir-steps=2", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.slow
def test_variants_alternate_from_both_states_and_report_ratios(tmp_path):
    out = tmp_path / "variants.json"
    result = _run(
        "--steps=4",
        "--rounds=2",
        "--collected-steps=3",
        "--variants=default,sensors_every_substep",
        f"--out={out}",
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads(out.read_text())
    assert set(data["runs"]) == {"standing", "stumbling", "collected"}
    for state in ("standing", "stumbling", "collected"):
        runs = data["runs"][state]
        assert [len(runs[name]) for name in ("default", "sensors_every_substep")] == [2, 2]
        medians = data["median_ms_per_step"][state]
        assert data["over_default"][state]["default"] == 1.0
        ratio = medians["sensors_every_substep"] / medians["default"]
        assert data["over_default"][state]["sensors_every_substep"] == ratio
        assert all(r["solver_iterations"]["max"] >= r["solver_iterations"]["mean"] for r in runs["default"])


def test_an_option_variant_sets_the_option_on_its_backend():
    script = load("physics_variants")
    cfg, _ = script.resolve_train_config(
        "sac", "g1_motion_tracking", "mjwarp", ["algo.num_envs=1", "sim.device=cpu"], "auto"
    )
    backend = script._backend(cfg, script.VARIANTS["solver_iterations_5"])
    assert backend.mj_model.opt.iterations == 5
    assert script._backend(cfg, script.VARIANTS["default"]).mj_model.opt.iterations == 10


def test_an_unknown_variant_is_refused_with_the_valid_names():
    result = _run("--variants=default,fast")
    assert result.returncode == 2
    assert "unknown variants ['fast']" in result.stderr and "sensors_every_substep" in result.stderr
