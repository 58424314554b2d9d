"""simcore's per-step functions (device-resident backend, reset transaction, read plans, graph replay) never
synchronize with the device or branch on tensor values: they must run inside a captured CUDA graph."""

from pathlib import Path

import pytest

from trainrt.hotpath import scan_source

SRC = Path(__file__).resolve().parents[2] / "packages" / "simcore" / "src" / "simcore" / "_src"
# The mujoco backend is the host bridge: it synchronizes at its boundary by design and declares HOST_BRIDGE.
HOT_FUNCTIONS = {
    "backend.py": {"step", "forward", "reset", "_refresh_plans"},
    "mjwarp_backend.py": {"_advance", "_refresh_derived", "_derived_kernels", "_recompute_constants"},
    "reset.py": {"apply_masked", "clear_masked"},
    "read_plan.py": {"_refresh"},
    "graph.py": {"replay", "_run_steps"},
}


@pytest.mark.parametrize("filename", sorted(HOT_FUNCTIONS))
def test_simcore_hot_functions_have_no_sync(filename):
    source = (SRC / filename).read_text()
    for name in HOT_FUNCTIONS[filename]:
        assert f"def {name}(" in source, f"{filename} has no function {name}; update HOT_FUNCTIONS"
    assert scan_source(source, filename, only=HOT_FUNCTIONS[filename]) == []


def test_selective_scan_checks_only_the_named_functions():
    source = "def hot(x):\n    return x.item()\n\ndef cold(x):\n    return x.item()\n"
    assert len(scan_source(source, only={"hot"})) == 1
    assert scan_source(source, only={"other"}) == []
