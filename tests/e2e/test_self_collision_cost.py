"""`benchmarks/self_collision_cost.py` on the CPU: both models step in every round, and the robot's geom pairs
that may collide are the self-collision pairs' and nothing else."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "self_collision_cost.py"


def test_both_models_alternate_and_only_the_tasks_model_has_robot_pairs(tmp_path):
    out = tmp_path / "cost.json"
    command = [
        sys.executable,
        str(SCRIPT),
        "--sim=mujoco",
        "--num-envs=2",
        "--steps=2",
        "--rounds=2",
        f"--out={out}",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads(out.read_text())
    assert [len(data["runs"][name]) for name in ("with_pairs", "without_pairs")] == [2, 2]
    assert data["geom_pairs_enabled"]["without_pairs"] == 0
    assert data["geom_pairs_enabled"]["with_pairs"] > 0
    for mode in ("eager", "graph"):
        ratio = (
            data["median_ms_per_step"]["with_pairs"][mode] / data["median_ms_per_step"]["without_pairs"][mode]
        )
        assert data["with_over_without"][mode] == ratio
    assert "with the pairs" in result.stdout
