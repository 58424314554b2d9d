"""`benchmarks/physics_variants.py` on the CPU: every variant is timed from every saved state in every round,
the ratios are to the first variant, an option variant changes the backend's options, and a bad variant name
is refused with the valid ones."""

import json
import subprocess
import sys

import mujoco
import numpy as np
import pytest
from benchmark_scripts import BENCHMARKS, load

from trainrt.robots import G1

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
    assert script._backend(cfg, script.VARIANTS["ccd_iterations_12"]).mj_model.opt.ccd_iterations == 12


def test_box_soles_turn_each_foots_capsules_into_the_box_that_bounds_them():
    script = load("physics_variants")
    cfg, _ = script.resolve_train_config(
        "sac", "g1_walk_flat", "mjwarp", ["algo.num_envs=1", "sim.device=cpu"], "auto"
    )
    models = {name: script._backend(cfg, script.VARIANTS[name]).mj_model for name in ("default", "box_soles")}
    plain, boxed = models["default"], models["box_soles"]
    for side in ("left", "right"):
        sole = [plain.geom(f"{side}_foot{k}_collision").id for k in range(1, 8)]
        # the capsules' bounds in the foot's frame: their fromto ends in the MJCF padded by their radii
        ends = np.concatenate([script._aabb_in_body(plain, g) for g in sole])
        low, high = ends.min(axis=0), ends.max(axis=0)
        assert (low[0], high[0], low[2], high[2]) == pytest.approx((-0.064, 0.142, -0.035, -0.015))
        box = boxed.geom(f"{side}_foot1_collision").id
        assert boxed.geom_type[box] == mujoco.mjtGeom.mjGEOM_BOX
        np.testing.assert_allclose(boxed.geom_pos[box], (low + high) / 2, atol=1e-9)
        np.testing.assert_allclose(boxed.geom_size[box], (high - low) / 2, atol=1e-9)
        assert all(boxed.geom_contype[g] == 0 and boxed.geom_conaffinity[g] == 0 for g in sole[1:])
        assert boxed.geom_friction[box].tolist() == plain.geom_friction[sole[0]].tolist()
    # pressed 3 mm into the floor at the default pose, a box sole touches at its corners, not along 7 capsules
    counts = {}
    for name, model in models.items():
        data = mujoco.MjData(model)
        data.qpos[2] = G1.standing_root_height() - 0.003
        for joint, value in G1.default_joint_pos.items():
            data.qpos[model.joint(joint).qposadr[0]] = value
        mujoco.mj_forward(model, data)
        feet = {model.body(body).id for body in G1.feet}
        counts[name] = sum(
            1
            for c in data.contact[: data.ncon]
            if {int(model.geom_bodyid[c.geom1]), int(model.geom_bodyid[c.geom2])} & feet
        )
    assert 1 <= counts["box_soles"] <= 8 < counts["default"]
    with pytest.raises(ValueError, match=r"--sole-geoms 'no_such_geom' matches no geom"):
        script._backend(cfg, script.VARIANTS["box_soles"], "no_such_geom")


def test_an_unknown_variant_is_refused_with_the_valid_names():
    result = _run("--variants=default,fast")
    assert result.returncode == 2
    assert "unknown variants ['fast']" in result.stderr and "sensors_every_substep" in result.stderr
