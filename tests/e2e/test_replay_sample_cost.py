"""`benchmarks/replay_sample_cost.py` on the CPU: it fills a replay of the configured sizes and times the
learner's draws per iteration, one round per entry."""

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "replay_sample_cost.py"


def test_the_sample_is_timed_at_the_configured_sizes(tmp_path):
    out = tmp_path / "sample.json"
    command = [
        sys.executable, str(SCRIPT), "--algo=flashsac", "--task=g1_motion_tracking", "--iterations=1",
        "--rounds=2", f"--out={out}", "algo.num_envs=3", "algo.params.buffer_size_per_env=8",
        "algo.params.learning_starts=2",  # the preset's warm-up would not fit this ring
        "algo.params.batch_size=16", "algo.params.updates_per_iteration=2",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads(out.read_text())
    assert (data["num_envs"], data["buffer_size_per_env"], data["batch_size"]) == (3, 8, 16)
    assert data["samples_per_graph"] == 2 and len(data["ms_per_sample"]) == 2
    assert set(data["obs_dims"]) == {"policy", "critic"} and data["graph"] is False
    assert all(ms > 0 for ms in data["ms_per_sample"])
