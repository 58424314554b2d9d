"""The generic robot helpers simcore exports: standing poses of a free-floating model, PD gains from armature,
the actuator-order check, and pinned-wheel assets (on a small two-legged model and a hand-made wheel)."""

from __future__ import annotations

import hashlib
import math
import zipfile

import mujoco
import numpy as np
import pytest

import simcore

BIPED_XML = """
<mujoco>
  <worldbody>
    <body name="base" pos="0 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.05" mass="2"/>
      <body name="left_leg" pos="0 0.1 0">
        <joint name="left_hip" axis="0 1 0" armature="0.02"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03" mass="1"/>
        <body name="left_foot" pos="0 0 -0.45">
          <joint name="left_ankle" axis="0 1 0" armature="0.01"/>
          <geom type="box" size="0.08 0.03 0.01" mass="0.3"/>
        </body>
      </body>
      <body name="right_leg" pos="0 -0.1 0">
        <joint name="right_hip" axis="0 1 0" armature="0.02"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03" mass="1"/>
        <body name="right_foot" pos="0 0 -0.45">
          <joint name="right_ankle" axis="0 1 0" armature="0.01"/>
          <geom type="sphere" size="0.02" mass="0.3"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="left_hip" ctrlrange="-40 40"/>
    <motor joint="left_ankle" ctrlrange="-10 10"/>
    <motor joint="right_hip" ctrlrange="-40 40"/>
    <motor joint="right_ankle" ctrlrange="-10 10"/>
  </actuator>
</mujoco>
"""
JOINTS = ("left_hip", "left_ankle", "right_hip", "right_ankle")
POSE = {"left_hip": -0.3, "left_ankle": 0.3, "right_hip": 0.2}
FEET = ("left_foot", "right_foot")


@pytest.fixture(scope="module")
def biped() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(BIPED_XML)


def _box_corners_z(model: mujoco.MjModel, data: mujoco.MjData, geom: int) -> np.ndarray:
    """World z of a box geom's 8 corners (8,)."""
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64)
    local = signs * model.geom_size[geom]
    return data.geom_xpos[geom][2] + local @ data.geom_xmat[geom].reshape(3, 3)[2]


def test_pose_qpos_sets_named_joints_and_an_upright_root(biped):
    qpos = simcore.pose_qpos(biped, POSE, 0.8)
    assert qpos.shape == (biped.nq,)
    np.testing.assert_array_equal(qpos[:7], [0.0, 0.0, 0.8, 1.0, 0.0, 0.0, 0.0])
    for name in JOINTS:
        assert qpos[biped.jnt_qposadr[biped.joint(name).id]] == POSE.get(name, 0.0)


def test_standing_root_height_rests_the_lowest_sole_point_at_the_clearance(biped):
    height = simcore.standing_root_height(biped, POSE, FEET, 0.002)
    data = mujoco.MjData(biped)
    data.qpos[:] = simcore.pose_qpos(biped, POSE, height)
    mujoco.mj_kinematics(biped, data)
    left_box, right_sphere = (int(np.flatnonzero(biped.geom_bodyid == biped.body(f).id)[0]) for f in FEET)
    lowest = min(
        _box_corners_z(biped, data, left_box).min(),
        data.geom_xpos[right_sphere][2] - biped.geom_size[right_sphere][0],
    )
    assert lowest == pytest.approx(0.002, abs=1e-12)


def test_pose_helpers_name_what_the_model_lacks(biped):
    with pytest.raises(ValueError, match=r"lacks the named joints or bodies \['knee', 'hand'\]"):
        simcore.standing_root_height(biped, {"knee": 0.1}, ("hand",), 0.0)
    fixed = mujoco.MjModel.from_xml_string(
        "<mujoco><worldbody><body><geom size='0.1'/></body></worldbody></mujoco>"
    )
    with pytest.raises(ValueError, match="root body has a free joint"):
        simcore.pose_qpos(fixed, {}, 1.0)


def test_pd_gains_from_armature_and_the_actuator_order_check(biped):
    gains = simcore.pd_gains_from_armature(biped, natural_frequency_hz=5.0, damping_ratio=1.0)
    omega = 2 * math.pi * 5.0
    np.testing.assert_allclose(gains.kp, np.array([0.02, 0.01, 0.02, 0.01]) * omega**2)
    np.testing.assert_allclose(gains.kd, np.array([0.02, 0.01, 0.02, 0.01]) * 2 * omega)
    np.testing.assert_array_equal(gains.effort_limit, [40.0, 10.0, 40.0, 10.0])
    simcore.check_actuated_joints(biped, JOINTS, robot="biped")
    with pytest.raises(ValueError, match=r"actuator 1 \('?.*'?\) drives 'left_ankle', expected 'right_hip'"):
        simcore.check_actuated_joints(
            biped, ("left_hip", "right_hip", "left_ankle", "right_ankle"), robot="biped"
        )


def _wheel(tmp_path) -> tuple[simcore.PinnedWheel, object]:
    path = tmp_path / "toy-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("toy/data/robots/r1/r1.xml", "<mujoco/>")
        zf.writestr("toy/data/robots/r1/meshes/a.stl", "solid")
        zf.writestr("toy/data/motions/r1/walk.npz", "npz")
        zf.writestr("toy/data/motions/r1/README.md", "skip me")
        zf.writestr("toy/code.py", "raise SystemExit")
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return simcore.PinnedWheel("toy==1.0", path.name, sha), path


MEMBERS = (
    simcore.WheelMember("toy/data/robots/r1/", "robots/r1"),
    simcore.WheelMember("toy/data/motions/r1/", "motions/r1", suffix=".npz"),
)


def test_a_pinned_wheel_extracts_only_its_members_and_is_fetched_once(tmp_path, monkeypatch):
    from simcore._src import wheel as wheel_mod

    wheel, path = _wheel(tmp_path)
    root = tmp_path / "cache"
    monkeypatch.setattr(wheel_mod, "download_wheel", lambda w, dest: path)
    assert simcore.fetch_wheel(wheel, MEMBERS, root) == root
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [".complete", "motions/r1/walk.npz", "robots/r1/meshes/a.stl", "robots/r1/r1.xml"]

    def no_download(w, dest):
        raise AssertionError("a complete cache folder must not be downloaded again")

    monkeypatch.setattr(wheel_mod, "download_wheel", no_download)
    assert simcore.fetch_wheel(wheel, MEMBERS, root) == root


def test_a_cache_is_extended_with_members_its_marker_does_not_record(tmp_path, monkeypatch):
    from simcore._src import wheel as wheel_mod

    wheel, path = _wheel(tmp_path)
    root = tmp_path / "cache"
    downloads = []

    def download(w, dest):
        downloads.append(w)
        return path

    monkeypatch.setattr(wheel_mod, "download_wheel", download)
    # an older cache: the robot's files, a marker holding the sha256 alone, and a file simcore did not write
    (root / "robots/r1").mkdir(parents=True)
    (root / "robots/r1/r1.xml").write_text("<mujoco/>")
    (root / "notes.txt").write_text("mine")
    (root / ".complete").write_text(wheel.sha256 + "\n")
    assert wheel_mod.extracted_members(wheel, root) == frozenset()
    simcore.fetch_wheel(wheel, MEMBERS[1:], root)  # the motions are added, nothing else changes
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert files == [".complete", "motions/r1/walk.npz", "notes.txt", "robots/r1/r1.xml"]
    assert wheel_mod.extracted_members(wheel, root) == {MEMBERS[1]}
    simcore.fetch_wheel(wheel, MEMBERS, root)  # the robot member was never recorded: extracted once more
    assert wheel_mod.extracted_members(wheel, root) == set(MEMBERS)
    assert (root / "robots/r1/meshes/a.stl").read_text() == "solid" and (
        root / "notes.txt"
    ).read_text() == "mine"
    assert len(downloads) == 2
    for subset in (MEMBERS, MEMBERS[:1], ()):  # every member recorded: no download
        simcore.fetch_wheel(wheel, subset, root)
    assert len(downloads) == 2
    # a marker of another wheel records nothing for this one
    (root / ".complete").write_text("0" * 64 + "\n" + "toy/data/robots/r1/\trobots/r1\t\n")
    simcore.fetch_wheel(wheel, MEMBERS[:1], root)
    assert len(downloads) == 3 and wheel_mod.extracted_members(wheel, root) == {MEMBERS[0]}


def test_a_wheel_with_the_wrong_hash_is_refused(tmp_path, monkeypatch):
    from simcore._src import wheel as wheel_mod

    wheel, path = _wheel(tmp_path)
    wrong = simcore.PinnedWheel(wheel.requirement, wheel.filename, "0" * 64)
    with pytest.raises(ValueError, match=r"expected 0{64}; refusing to extract it"):
        wheel_mod.extract_wheel_members(path, wrong, MEMBERS, tmp_path / "cache")
    assert not (tmp_path / "cache").exists()


def test_the_asset_dir_is_per_wheel_unless_the_environment_names_one(tmp_path, monkeypatch):
    wheel = simcore.PinnedWheel("toy==1.0", "toy-1.0-py3-none-any.whl", "0" * 64)
    monkeypatch.delenv("SIMCORE_ASSET_DIR", raising=False)
    assert simcore.asset_dir(wheel).parts[-2:] == ("simcore", "toy-1.0")
    monkeypatch.setenv("SIMCORE_ASSET_DIR", str(tmp_path))
    assert simcore.asset_dir(wheel) == tmp_path
