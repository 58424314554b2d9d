"""`benchmarks/tracking_breakdown.py` on the CPU: per-joint and per-body errors of a tiny tracking run, checked
against `trainrt eval` on the same checkpoint, and a walking run refused with the reason."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import trainrt

from trainrt.tasks import make_task_cfg

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tracking_breakdown.py"


def _breakdown(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600, check=False
    )


@pytest.fixture(scope="module")
def tracking_run(one_iteration_run):
    return one_iteration_run("g1_motion_tracking")


@pytest.mark.slow
def test_the_breakdown_covers_every_joint_and_body_and_agrees_with_eval(tracking_run, tmp_path):
    target, eval_target = tmp_path / "breakdown.json", tmp_path / "eval.json"
    out = _breakdown(str(tracking_run), "--num-envs", "2", "--steps", "4", "--top", "3", "--out", str(target))
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(target.read_text())
    assert result["iteration"] == 1 and result["steps"] == 4 and result["num_envs"] == 2
    joints, bodies = result["joint_abs_error"], result["body_pos_error"]
    assert len(joints) == 29 and set(result["joint_action_saturation"]) == set(joints)
    assert set(result["body_ori_error"]) == set(bodies)
    assert tuple(bodies) == make_task_cfg("g1_motion_tracking").commands["motion"].params["body_names"]
    assert all(v >= 0.0 and math.isfinite(v) for v in [*joints.values(), *bodies.values()])
    assert all(0.0 <= v <= 1.0 for v in result["joint_action_saturation"].values())
    # the console shows the 3 worst joints and bodies, worst first
    lines = [line for line in out.stdout.splitlines() if line.startswith("| ") and "---" not in line]
    joint_rows = [line.split(" | ")[0][2:] for line in lines[1:4]]
    assert joint_rows == sorted(joints, key=lambda name: -joints[name])[:3]
    # the same deterministic rollout as `trainrt eval`: the per-body position errors average to its body error
    evaluated = trainrt(
        "eval", str(tracking_run), "--num-envs", "2", "--steps", "4", "--checkpoint", "1", "--out", str(eval_target)
    )  # fmt: skip
    assert evaluated.returncode == 0, evaluated.stderr[-3000:]
    tracking = json.loads(eval_target.read_text())["tracking"]
    assert sum(bodies.values()) / len(bodies) == pytest.approx(tracking["body_pos_error"], rel=1e-6)
    assert result["completed_fraction"] == tracking["completed_fraction"]


@pytest.mark.slow
def test_a_walking_run_is_refused_with_the_reason(one_iteration_run):
    refused = _breakdown(str(one_iteration_run("g1_walk_flat")), "--num-envs", "1", "--steps", "1")
    assert refused.returncode == 2
    assert "g1_walk_flat run" in refused.stderr and "g1_motion_tracking" in refused.stderr
