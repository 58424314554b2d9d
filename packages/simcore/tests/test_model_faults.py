"""Model loading faults: a mesh a primitive geom fits to survives the headless stripper; a missing actuator
names the joint."""

import struct

import mujoco
import numpy as np
import pytest
from g1_model import g1_mjcf_path, load_g1
from simcore_scenes import SMALL_XML

import simcore
from simcore._src.model import check_actuated_joints, load_model

_CUBE = [
    ((0, 0, 0), (1, 1, 0), (1, 0, 0)), ((0, 0, 0), (0, 1, 0), (1, 1, 0)),
    ((0, 0, 1), (1, 0, 1), (1, 1, 1)), ((0, 0, 1), (1, 1, 1), (0, 1, 1)),
    ((0, 0, 0), (1, 0, 0), (1, 0, 1)), ((0, 0, 0), (1, 0, 1), (0, 0, 1)),
    ((0, 1, 0), (1, 1, 1), (1, 1, 0)), ((0, 1, 0), (0, 1, 1), (1, 1, 1)),
    ((0, 0, 0), (0, 1, 1), (0, 1, 0)), ((0, 0, 0), (0, 0, 1), (0, 1, 1)),
    ((1, 0, 0), (1, 1, 0), (1, 1, 1)), ((1, 0, 0), (1, 1, 1), (1, 0, 1)),
]  # fmt: skip


def _write_cube_stl(path, size):
    """A binary STL of an axis-aligned box of edge lengths ``size``."""
    with open(path, "wb") as handle:
        handle.write(b"\0" * 80 + struct.pack("<I", len(_CUBE)))
        for triangle in _CUBE:
            handle.write(struct.pack("<3f", 0, 0, 0))
            for vertex in triangle:
                handle.write(struct.pack("<3f", *(v * s for v, s in zip(vertex, size))))
            handle.write(b"\0\0")


def _scene(tmp_path, with_mesh_file=True):
    (tmp_path / "meshes").mkdir()
    if with_mesh_file:
        _write_cube_stl(tmp_path / "meshes" / "cube.stl", (0.2, 0.4, 0.6))
    path = tmp_path / "scene.xml"
    path.write_text(
        """<mujoco><compiler meshdir="meshes"/>
        <asset><mesh name="cube" file="cube.stl"/><mesh name="skin" file="cube.stl"/></asset>
        <worldbody><body name="b" pos="0 0 1"><freejoint/>
          <geom name="fit" type="box" mesh="cube"/>
          <geom name="skin" type="mesh" mesh="skin" contype="0" conaffinity="0"/>
        </body></worldbody></mujoco>"""
    )
    return path


def test_the_headless_model_keeps_a_mesh_a_primitive_fits_to(tmp_path):
    path = _scene(tmp_path)
    full = load_model(path, headless=False)
    headless = load_model(path, headless=True)
    assert headless.nmesh == 1 and mujoco.mj_id2name(headless, mujoco.mjtObj.mjOBJ_MESH, 0) == "cube"
    # the fitted box is the same as in the full model, and the visual mesh geom is gone
    assert headless.geom("fit").size.tolist() == pytest.approx(full.geom("fit").size.tolist())
    assert full.geom("fit").size.tolist() == pytest.approx([0.1, 0.2, 0.3], abs=1e-6)
    assert mujoco.mj_name2id(headless, mujoco.mjtObj.mjOBJ_GEOM, "skin") == -1


def test_a_missing_fit_mesh_file_names_the_geom_that_needs_it(tmp_path):
    with pytest.raises(ValueError, match=r"keeps mesh 'cube' \(geom 'fit' fits its size to it\)"):
        load_model(_scene(tmp_path, with_mesh_file=False), headless=True)


def _actuated(names):
    spec = mujoco.MjSpec()
    body = spec.worldbody.add_body(name="base")
    for name in ("a", "b", "c"):
        child = body.add_body(name=f"link_{name}")
        child.add_joint(name=name, type=mujoco.mjtJoint.mjJNT_HINGE)
        child.add_geom(size=[0.1, 0, 0])
    for name in names:
        actuator = spec.add_actuator(name=f"motor_{name}", target=name)
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
    return spec.compile()


@pytest.mark.parametrize(
    ("driven", "expected", "message"),
    [
        (["a", "c"], ["a", "b", "c"], r"no actuator drives joint\(s\) \['b'\]"),
        (["a", "b", "c"], ["a", "b"], r"actuators drive unexpected joint\(s\) \['c'\]"),
        (["b", "a", "c"], ["a", "b", "c"], r"actuator 0 \('motor_b'\) drives 'b', expected 'a' there"),
    ],
    ids=["missing", "extra", "order"],
)
def test_an_actuator_mismatch_names_the_joint(driven, expected, message):
    model = _actuated(driven)
    check_actuated_joints(_actuated(["a", "b", "c"]), ["a", "b", "c"])  # a match passes
    with pytest.raises(ValueError, match=message) as caught:
        check_actuated_joints(model, expected, robot="toy")
    assert f"toy actuators do not match its {len(expected)} joints" in str(caught.value)


def test_the_g1_message_names_only_the_missing_joint(tmp_path):
    try:
        mjcf = g1_mjcf_path()
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")
    lines = mjcf.read_text().splitlines(keepends=True)
    kept = [line for line in lines if not ("<motor" in line and '"left_knee_joint"' in line)]
    assert len(kept) == len(lines) - 1
    lone = tmp_path / "g1_without_a_knee_motor.xml"
    lone.write_text("".join(kept))
    with pytest.raises(ValueError, match=r"no actuator drives joint\(s\) \['left_knee_joint'\]") as caught:
        load_g1(mjcf_path=lone)
    assert "right_knee_joint" not in str(caught.value)
    assert "G1 actuators do not match its 29 joints" in str(caught.value)


def test_pose_helpers_on_a_fixed_model_and_strings_for_sequences_say_what_to_pass():
    hinge = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><body><joint type="hinge"/><geom size=".1"/></body></worldbody></mujoco>'
    )
    with pytest.raises(
        ValueError, match=r"standing_root_height needs a model whose root body has a free joint"
    ):
        simcore.standing_root_height(hinge, {}, (), 0.0)
    with pytest.raises(ValueError, match=r"randomized_fields must be a sequence of names, got the string"):
        simcore.SimConfig(num_envs=1, randomized_fields="body_mass")
    with pytest.raises(ValueError, match=r"got the string 'GRAPH_CAPTURE'.*simcore.Capability.GRAPH_CAPTURE"):
        simcore.make_backend("mujoco", hinge, simcore.SimConfig(num_envs=1), require="GRAPH_CAPTURE")


def test_pd_gains_take_lists_and_load_model_refuses_fractional_iterations(tmp_path):
    small = tmp_path / "small.xml"
    small.write_text(SMALL_XML)
    gains = simcore.PdGains([1.0, 2.0], (0.1, 0.2), [5.0, 5.0])
    assert gains.kp.dtype == np.float64 and gains.kd.tolist() == [0.1, 0.2]
    with pytest.raises(ValueError, match=r"PdGains\.kp must be numbers"):
        simcore.PdGains(["stiff", "soft"], [0.1, 0.2], [5.0, 5.0])
    with pytest.raises(ValueError, match=r"solver_iterations must be an int, got 2\.5"):
        load_model(small, solver_iterations=2.5)
