"""`benchmarks/profile_iteration.py`: its idle-gap accounting against hand-made timelines, and a tiny run on
the CPU that writes every field, the timelines and the physics-alone comparison."""

import json
import subprocess
import sys

import pytest
from benchmark_scripts import BENCHMARKS, TINY_LEARNER, load

SCRIPT = BENCHMARKS / "profile_iteration.py"


def _script():
    return load("profile_iteration")


def test_idle_gaps_add_up_the_time_between_kernels_by_the_families_around_them():
    gaps = _script().idle_gaps(
        [
            (0.0, 10.0, "_kinematics_cuda_kernel_forward"),  # physics
            (15.0, 20.0, "triton_poi_fused_add_0"),  # 5 us after physics
            (18.0, 30.0, "memset32"),  # overlaps the previous kernel: no gap
            (32.0, 40.0, "_solver_cuda_kernel_forward"),  # 2 us after the fill
            (60.0, 61.0, "triton_poi_fused_mul_1"),  # 20 us after physics
        ]
    )
    assert abs(gaps["idle_ms"] - 0.027) < 1e-12
    assert abs(gaps["span_ms"] - 0.061) < 1e-12
    assert gaps["idle_by_transition"] == {
        "physics and env (warp) -> compiled (triton)": {"ms": 0.025, "gaps": 2},
        "copies and fills -> physics and env (warp)": {"ms": 0.002, "gaps": 1},
    }
    assert [g["us"] for g in gaps["largest_gaps"]] == [20.0, 5.0, 2.0]
    assert gaps["largest_gaps"][0] == {
        "us": 20.0, "after": "_solver_cuda_kernel_forward", "before": "triton_poi_fused_mul_1"
    }  # fmt: skip


def test_gaps_after_a_conditional_node_count_as_its_untraced_body():
    gaps = _script().idle_gaps(
        [
            (0.0, 2.0, "set_conditional_if_handle_kernel"),
            (900.0, 910.0, "mul_m_kernel__locals___mul_m_cuda_kernel_forward"),  # 898 us: the loop's body
            (913.0, 914.0, "triton_poi_fused_add_0"),  # 3 us of real idle time
        ]
    )
    assert abs(gaps["idle_ms"] - 0.901) < 1e-12
    assert abs(gaps["conditional_body_ms"] - 0.898) < 1e-12
    assert abs(gaps["idle_outside_conditional_ms"] - 0.003) < 1e-12
    assert "conditional node -> physics and env (warp)" in gaps["idle_by_transition"]


@pytest.mark.slow
def test_a_tiny_profile_on_the_cpu_writes_its_fields_and_timelines(tmp_path):
    out, traces = tmp_path / "profile.json", tmp_path / "traces"
    command = [
        sys.executable, str(SCRIPT), "--sim=mujoco", "--iterations=1", f"--out={out}",
        f"--trace-dir={traces}", *TINY_LEARNER,
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    data = json.loads(out.read_text())
    assert data["collect_alone_ms"] > 0 and data["physics_alone_ms"] > 0
    assert data["collector_vs_physics"] == data["collect_alone_ms"] / data["physics_alone_ms"]
    for part in ("collector_profile", "learner_profile"):
        assert data[part]["kernel_launches"] > 0
        assert 0 <= data[part]["idle_ms"] <= data[part]["span_ms"]
    assert json.loads((traces / "collector.json").read_text())["traceEvents"]
    assert json.loads((traces / "learner.json").read_text())["traceEvents"]
