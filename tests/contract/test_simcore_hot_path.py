"""simcore's per-step functions (device-resident backend, reset transaction, read plans, graph replay) never
synchronize with the device or branch on tensor values: they must run inside a captured CUDA graph.

The scan starts at each module's hot entry points and follows the calls within that module
(``trainrt.hotpath.scan_source``); methods another module calls per step are entry points themselves.
"""

import ast
from pathlib import Path

import pytest

from trainrt.hotpath import hot_functions, missing_entry_points, scan_source

SRC = Path(__file__).resolve().parents[2] / "packages" / "simcore" / "src" / "simcore" / "_src"
# The mujoco backend is the host bridge: it synchronizes at its boundary by design and declares HOST_BRIDGE.
HOT_ENTRY_POINTS = {
    "backend.py": {"SimBackend.step", "SimBackend.forward", "SimBackend.reset"},
    "mjwarp_backend.py": {
        "_advance",
        "_refresh_derived",
        "_derived_kernels",
        "_recompute_constants",
        "_refresh_after_reset",
    },
    "reset.py": {"apply_masked", "clear_masked"},
    "read_plan.py": {"_refresh"},
    "ray_cast.py": {"RayCast._refresh"},
    "graph.py": {"replay", "_run_steps"},
}


@pytest.mark.parametrize("filename", sorted(HOT_ENTRY_POINTS))
def test_simcore_hot_functions_have_no_sync(filename):
    source = (SRC / filename).read_text()
    entry_points = HOT_ENTRY_POINTS[filename]
    assert missing_entry_points(source, entry_points) == [], f"{filename}: update HOT_ENTRY_POINTS"
    assert scan_source(source, filename, entry_points) == []


def test_the_backend_step_reaches_the_plan_refresh():
    tree = ast.parse((SRC / "backend.py").read_text())
    assert "SimBackend._refresh_plans" in hot_functions(tree, HOT_ENTRY_POINTS["backend.py"])


def test_selective_scan_checks_only_the_named_functions_and_their_callees():
    source = "def hot(x):\n    return x.item()\n\ndef cold(x):\n    return x.item()\n"
    assert len(scan_source(source, entry_points={"hot"})) == 1
    assert scan_source(source, entry_points={"other"}) == []
    caller = "def hot(x):\n    return helper(x)\n\ndef helper(x):\n    return x.item()\n"
    assert len(scan_source(caller, entry_points={"hot"})) == 1
