"""`benchmarks/learning_curve.py` end to end on the CPU: a time-limited tiny run, then evals of its checkpoints."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from cli_runs import FLASHSAC_TINY, TINY

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "learning_curve.py"


@pytest.mark.parametrize(
    ("algo", "task", "metrics"),
    [
        (
            "sac",
            "g1_walk_flat",
            {"worst_fell", "mean_lin_vel_error", "worst_lin_vel_error", "mean_yaw_rate_error"},
        ),
        ("flashsac", "g1_motion_tracking", {"completed_fraction", "failed_fraction", "body_pos_error"}),
    ],
    ids=["walk", "tracking"],
)
def test_a_curve_row_per_evaluated_checkpoint(tmp_path, algo, task, metrics):
    out = tmp_path / "curve.json"
    # TINY's max_iterations is overridden by the script's own (a run ends only at the time limit)
    extra = [o for o in TINY if not o.startswith(("algo.max_iterations=", "training."))]
    if algo == "flashsac":
        extra += FLASHSAC_TINY
    command = [
        sys.executable, str(SCRIPT), f"--algo={algo}", f"--task={task}", "--sim=mujoco", "--preset=cpu-demo",
        "--minutes=0.25", "--checkpoint-every=2", "--evals=2", "--eval-envs=2",
        f"--run-dir={tmp_path / 'run'}", f"--out={out}", *extra,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    curve = json.loads(out.read_text())
    rows = curve["rows"]
    assert len(rows) == 2 and len(curve["evals"]) == 2
    last = curve["completed_iterations"]
    assert rows[-1]["iteration"] == last  # the last checkpoint is always evaluated
    assert rows[0]["iteration"] < last and rows[0]["iteration"] % 2 == 0
    assert curve["time_limit_reached"]
    # the run ended after the first iteration past the 15 s budget (tiny CPU iterations take well under 1 s)
    assert 0 < rows[0]["wall_clock_s"] < 15.0 <= rows[1]["wall_clock_s"] < 20.0
    assert metrics <= set(rows[0])
    assert "| iteration | wall_clock_s |" in result.stdout
