"""Motion loader: both file formats give the same clip, FK targets equal MuJoCo's, malformed input fails clearly."""

from __future__ import annotations

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from g1_assets import g1_clip_or_skip, load_g1_or_skip

import simcore
from trainrt.motion import holosoma_to_beyondmimic, load_motion, read_motion_arrays
from trainrt.robots import G1

# Most tests load the clip's first 40 frames; the short-clip warning is tested in test_motion_loader_faults.py.
pytestmark = pytest.mark.filterwarnings("ignore::trainrt.motion.ShortClipWarning")

CLIP_NAME = "sub3_largebox_003_mj.npz"
TENSOR_FIELDS = (
    "joint_pos", "joint_vel", "root_pos_w", "root_quat_w", "root_lin_vel_w", "root_ang_vel_w",
    "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w",
)  # fmt: skip


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return load_g1_or_skip()


@pytest.fixture(scope="module")
def clip_path(model) -> Path:
    return g1_clip_or_skip(CLIP_NAME)


@pytest.fixture(scope="module")
def holosoma(clip_path) -> dict[str, np.ndarray]:
    """The first 40 frames of the holosoma clip (keeps FK in the tests quick)."""
    arrays = read_motion_arrays(clip_path)
    for key in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        arrays[key] = arrays[key][:40]
    return arrays


def _assert_same_clip(a, b, atol: float) -> None:
    assert a.joint_names == b.joint_names and a.body_names == b.body_names and a.fps == b.fps
    for name in TENSOR_FIELDS:
        torch.testing.assert_close(getattr(a, name), getattr(b, name), atol=atol, rtol=0, msg=name)


def test_holosoma_file_loads_onto_model_order(model, clip_path):
    clip = load_motion(clip_path, model, dtype=torch.float64)
    raw = np.load(clip_path)
    assert clip.source_format == "holosoma"
    assert clip.fps == 50.0 and clip.num_frames == raw["joint_pos"].shape[0]
    assert clip.joint_names == G1.joint_names
    assert clip.body_names[0] == "pelvis" and len(clip.body_names) == model.nbody - 1
    names = list(raw["joint_names"])
    col = names.index("left_knee_joint")
    np.testing.assert_allclose(
        clip.joint_pos[:, clip.joint_names.index("left_knee_joint")], raw["joint_pos"][:, 7 + col]
    )
    np.testing.assert_allclose(clip.root_pos_w.numpy(), raw["joint_pos"][:, :3])


def test_beyondmimic_conversion_loads_to_the_same_targets(model, holosoma, tmp_path):
    converted = holosoma_to_beyondmimic(holosoma, model)
    assert converted["joint_pos"].shape == (40, 29) and converted["body_pos_w"].shape == (
        40,
        model.nbody - 1,
        3,
    )
    assert "joint_names" not in converted  # BeyondMimic files carry none: model order is assumed
    path = tmp_path / "clip_bm.npz"
    np.savez(path, **converted)
    from_holosoma = load_motion(holosoma, model, dtype=torch.float64)
    from_beyondmimic = load_motion(path, model, dtype=torch.float64)
    assert from_beyondmimic.source_format == "beyondmimic"
    _assert_same_clip(from_holosoma, from_beyondmimic, atol=1e-9)


def test_beyondmimic_joints_are_mapped_by_name(model, holosoma):
    converted = holosoma_to_beyondmimic(holosoma, model)
    order = np.random.default_rng(0).permutation(29)
    shuffled = dict(converted)
    shuffled["joint_names"] = np.array(G1.joint_names)[order]
    shuffled["joint_pos"] = converted["joint_pos"][:, order]
    shuffled["joint_vel"] = converted["joint_vel"][:, order]
    _assert_same_clip(load_motion(converted, model), load_motion(shuffled, model), atol=1e-6)


def test_joint_names_stored_as_bytes_are_read_as_text(model, holosoma):
    as_bytes = _holosoma_with(holosoma, joint_names=np.asarray(holosoma["joint_names"]).astype("S"))
    _assert_same_clip(load_motion(holosoma, model), load_motion(as_bytes, model), atol=0.0)


def test_joint_names_saved_as_python_objects_are_named_with_the_fix(model, holosoma, tmp_path):
    path = tmp_path / "objects.npz"
    np.savez(
        path, **_holosoma_with(holosoma, joint_names=np.array(list(holosoma["joint_names"]), dtype=object))
    )
    with pytest.raises(ValueError, match=r"holds Python objects .*np\.array\(names, dtype=str\)"):
        load_motion(path, model)


def test_a_motion_shorter_than_one_frame_at_the_target_rate_is_refused(model, holosoma):
    two_frames = _holosoma_with(
        holosoma,
        joint_pos=holosoma["joint_pos"][:2],
        joint_vel=holosoma["joint_vel"][:2] * (120.0 / 50.0),  # the same poses played 2.4x faster
        fps=np.array(120.0),
    )
    assert load_motion(two_frames, model).joint_pos.shape[0] == 2  # at its own rate it has its 2 frames
    with pytest.raises(
        ValueError, match=r"lasts 0\.008333 s \(2 frames at 120 fps\), 1 frame at 50 fps.*0\.02 s"
    ):
        load_motion(two_frames, model, target_fps=50.0)


def test_fk_of_frame_zero_equals_a_mujoco_forward(model, holosoma):
    clip = load_motion(holosoma, model, dtype=torch.float64)
    data = mujoco.MjData(model)
    data.qpos[:] = holosoma["joint_pos"][0]
    data.qvel[:] = _as_qvel(holosoma["joint_pos"][0], holosoma["joint_vel"][0])
    mujoco.mj_forward(model, data)
    velocity = np.zeros(6)
    for i, name in enumerate(clip.body_names):
        body = model.body(name).id
        np.testing.assert_allclose(clip.body_pos_w[0, i].numpy(), data.xpos[body], atol=1e-12)
        np.testing.assert_allclose(clip.body_quat_w[0, i].numpy(), data.xquat[body], atol=1e-12)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_XBODY, body, velocity, 0)
        np.testing.assert_allclose(clip.body_ang_vel_w[0, i].numpy(), velocity[:3], atol=1e-10)
        np.testing.assert_allclose(clip.body_lin_vel_w[0, i].numpy(), velocity[3:], atol=1e-10)
    # The clip's root velocities are the file's, world frame (MuJoCo's qvel holds the angular one in the root frame).
    np.testing.assert_allclose(clip.root_lin_vel_w[0].numpy(), data.qvel[:3], atol=1e-12)
    np.testing.assert_allclose(clip.root_ang_vel_w[0].numpy(), holosoma["joint_vel"][0, 3:6], atol=1e-12)
    np.testing.assert_allclose(clip.body_ang_vel_w[0, 0].numpy(), clip.root_ang_vel_w[0].numpy(), atol=1e-12)


def test_fk_targets_equal_what_the_mujoco_backend_reads(model, holosoma):
    """The clip's targets are in the same convention as the env's read plan (body origin velocities)."""
    clip = load_motion(holosoma, model, body_names=("pelvis", "torso_link", "left_wrist_yaw_link"))
    backend = simcore.make_backend("mujoco", model, simcore.SimConfig(num_envs=1))
    plan = backend.read_plan(bodies=clip.body_names)
    spec = backend.reset_spec(["qpos", "qvel"])
    payload = spec.new_payload()
    payload["qpos"][0] = torch.as_tensor(holosoma["joint_pos"][5])
    payload["qvel"][0] = torch.as_tensor(_as_qvel(holosoma["joint_pos"][5], holosoma["joint_vel"][5]))
    backend.reset(torch.ones(1, dtype=torch.bool), payload, spec)
    for name in ("body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        torch.testing.assert_close(getattr(plan, name)[0].float(), getattr(clip, name)[5], atol=1e-5, rtol=0)


def test_resampling_to_a_lower_rate_keeps_every_other_frame(model, holosoma):
    full = load_motion(holosoma, model, dtype=torch.float64)
    half = load_motion(holosoma, model, target_fps=25.0, dtype=torch.float64)
    assert half.fps == 25.0 and half.num_frames == 20
    torch.testing.assert_close(half.joint_pos, full.joint_pos[::2])
    torch.testing.assert_close(half.body_pos_w, full.body_pos_w[::2])
    torch.testing.assert_close(half.root_quat_w, full.root_quat_w[::2])


def test_clip_to_moves_every_tensor(model, holosoma):
    clip = load_motion(holosoma, model, body_names=("pelvis",)).to(dtype=torch.float64)
    assert all(getattr(clip, name).dtype == torch.float64 for name in TENSOR_FIELDS)
    assert clip.body_index("pelvis") == 0
    with pytest.raises(ValueError, match="not in the motion clip"):
        clip.body_index("torso_link")


# --- malformed input --------------------------------------------------------------------------------------------


def _as_qvel(qpos: np.ndarray, velocity: np.ndarray) -> np.ndarray:
    """A holosoma frame's velocities as MuJoCo's free-joint qvel: the root's angular velocity in the root frame."""
    qvel = velocity.copy()
    inverse = np.zeros(4)
    mujoco.mju_negQuat(inverse, qpos[3:7] / np.linalg.norm(qpos[3:7]))
    mujoco.mju_rotVecQuat(qvel[3:6], velocity[3:6], inverse)
    return qvel


def _holosoma_with(holosoma: dict, **changes) -> dict:
    arrays = {k: v.copy() for k, v in holosoma.items()}
    for key, value in changes.items():
        if value is None:
            arrays.pop(key)
        else:
            arrays[key] = value
    return arrays


def _with_nan(array: np.ndarray, frame: int) -> np.ndarray:
    out = array.copy()
    out[frame, 9] = np.nan
    return out


@pytest.mark.parametrize(
    ("case", "pattern"),
    [
        ("missing_joint", r"lacks joints of the training model: \['left_knee_joint'\]"),
        ("missing_joint_vel", r"missing fields \['joint_vel'\]"),
        ("joint_vel_rows", r"'joint_vel' has shape \(39, 35\), expected \(40, 35\)"),
        ("joint_pos_1d", r"'joint_pos' must be \(T, columns\)"),
        ("joint_pos_width", r"'joint_pos' has 30 columns"),
        ("fps_zero", r"'fps' must be a positive finite number, got 0.0"),
        ("fps_negative", r"'fps' must be a positive finite number, got -50.0"),
        ("fps_nan", r"'fps' must be a positive finite number, got nan"),
        ("fps_two", r"'fps' must be one number"),
        ("nan_joint_pos", r"'joint_pos' has NaN or infinite values \(first at frame 7\)"),
        ("inf_joint_vel", r"'joint_vel' has NaN or infinite values \(first at frame 3\)"),
        (
            "zero_quat",
            r"non-unit quaternions \(first at frame 2, norm 0; allowed 1 \+- 0\.001\): divide each by",
        ),
        ("one_frame", r"at least 2 frames"),
        ("duplicate_names", r"'joint_names' has duplicates"),
        ("missing_joint_names", r"the holosoma layout\) but no 'joint_names' field"),
    ],
)
def test_malformed_holosoma_fails_with_a_clear_message(model, holosoma, case, pattern):
    jp, jv, names = holosoma["joint_pos"], holosoma["joint_vel"], holosoma["joint_names"]
    knee = list(names).index("left_knee_joint")
    keep = [i for i in range(len(names)) if i != knee]
    zero_quat = jp.copy()
    zero_quat[2, 3:7] = 0.0
    inf_vel = jv.copy()
    inf_vel[3, 0] = np.inf
    dup = names.copy()
    dup[1] = dup[0]
    cases = {
        "missing_joint": {
            "joint_names": names[keep],
            "joint_pos": np.concatenate([jp[:, :7], jp[:, 7:][:, keep]], axis=1),
            "joint_vel": np.concatenate([jv[:, :6], jv[:, 6:][:, keep]], axis=1),
        },
        "missing_joint_vel": {"joint_vel": None},
        "joint_vel_rows": {"joint_vel": jv[:39]},
        "joint_pos_1d": {"joint_pos": jp[:, 0]},
        "joint_pos_width": {"joint_pos": jp[:, :30]},
        "fps_zero": {"fps": np.array([0])},
        "fps_negative": {"fps": np.array([-50.0])},
        "fps_nan": {"fps": np.array([np.nan])},
        "fps_two": {"fps": np.array([50, 50])},
        "nan_joint_pos": {"joint_pos": _with_nan(jp, 7)},
        "inf_joint_vel": {"joint_vel": inf_vel},
        "zero_quat": {"joint_pos": zero_quat},
        "one_frame": {"joint_pos": jp[:1], "joint_vel": jv[:1]},
        "duplicate_names": {"joint_names": dup},
        "missing_joint_names": {"joint_names": None},
    }
    with pytest.raises(ValueError, match=pattern):
        load_motion(_holosoma_with(holosoma, **cases[case]), model)


@pytest.mark.parametrize(
    ("case", "pattern"),
    [
        ("missing_body_quat", r"beyondmimic motion is missing fields \['body_quat_w'\]"),
        ("body_pos_last_dim", r"'body_pos_w' has shape \(40, 32, 2\), expected \(40, \*, 3\)"),
        ("body_quat_bodies", r"'body_quat_w' has shape \(40, 31, 4\), expected \(40, 32, 4\)"),
        ("nan_body_lin_vel", r"'body_lin_vel_w' has NaN"),
        ("joint_names_mismatch", r"'joint_pos' has 29 columns; expected 7 \+ 28"),
    ],
)
def test_malformed_beyondmimic_fails_with_a_clear_message(model, holosoma, case, pattern):
    bm = holosoma_to_beyondmimic(holosoma, model)
    nan_vel = bm["body_lin_vel_w"].copy()
    nan_vel[4, 0, 0] = np.nan
    cases = {
        "missing_body_quat": {"body_quat_w": None},
        "body_pos_last_dim": {"body_pos_w": bm["body_pos_w"][..., :2]},
        "body_quat_bodies": {"body_quat_w": bm["body_quat_w"][:, :31]},
        "nan_body_lin_vel": {"body_lin_vel_w": nan_vel},
        "joint_names_mismatch": {"joint_names": np.array(G1.joint_names[:28])},
    }
    with pytest.raises(ValueError, match=pattern):
        load_motion(_holosoma_with(bm, **cases[case]), model)


def test_missing_or_unreadable_files_and_bad_arguments(model, holosoma, tmp_path):
    with pytest.raises(FileNotFoundError, match="motion file not found"):
        load_motion(tmp_path / "nope.npz", model)
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip file")
    with pytest.raises(ValueError, match=r"not a readable \.npz motion file"):
        load_motion(bad, model)
    with pytest.raises(ValueError, match=r"unknown body names \['no_such_body'\]"):
        load_motion(holosoma, model, body_names=("pelvis", "no_such_body"))
    with pytest.raises(ValueError, match="target_fps must be a positive finite number"):
        load_motion(holosoma, model, target_fps=0.0)
    with pytest.raises(ValueError, match="needs a holosoma motion"):
        holosoma_to_beyondmimic(holosoma_to_beyondmimic(holosoma, model), model)


def _turn_rates_w(quat: np.ndarray, fps: float) -> np.ndarray:
    """World-frame angular velocity between consecutive wxyz orientations (T - 1, 3), by MuJoCo's own functions."""
    rates = np.zeros((len(quat) - 1, 3))
    inverse, step = np.zeros(4), np.zeros(4)
    for t in range(len(quat) - 1):
        mujoco.mju_negQuat(inverse, quat[t])
        mujoco.mju_mulQuat(step, quat[t + 1], inverse)
        mujoco.mju_quat2Vel(rates[t], step, 1.0 / fps)
    return rates


def _median_gap(rates: np.ndarray, velocity: np.ndarray) -> float:
    """Median distance between per-step rates and the mean of the stored velocities at each step's two frames."""
    return float(np.median(np.linalg.norm(rates - 0.5 * (velocity[:-1] + velocity[1:]), axis=-1)))


def test_clip_velocities_are_the_rates_at_which_its_poses_move(model, holosoma):
    """Every velocity target matches the finite difference of its pose track, in the world frame.

    The clip turns at about 0.9 rad/s over these frames; reading holosoma's world-frame root angular velocity
    as MuJoCo's root-frame one put every angular target about 1 rad/s off and the linear ones about 0.2 m/s.
    """
    clip = load_motion(holosoma, model, dtype=torch.float64)
    fps = clip.fps
    root_rates = _turn_rates_w(clip.root_quat_w.numpy(), fps)
    assert np.median(np.linalg.norm(root_rates, axis=1)) > 0.5  # the check below has something to see
    assert _median_gap(root_rates, clip.root_ang_vel_w.numpy()) < 0.1
    positions, quats = clip.body_pos_w.numpy(), clip.body_quat_w.numpy()
    for i, name in enumerate(clip.body_names):
        assert _median_gap(_turn_rates_w(quats[:, i], fps), clip.body_ang_vel_w[:, i].numpy()) < 0.1, name
        moves = (positions[1:, i] - positions[:-1, i]) * fps
        assert _median_gap(moves, clip.body_lin_vel_w[:, i].numpy()) < 0.05, name


def _in_root_frame(quat: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    out, inverse = np.zeros_like(vectors), np.zeros(4)
    for t in range(len(vectors)):
        mujoco.mju_negQuat(inverse, quat[t] / np.linalg.norm(quat[t]))
        mujoco.mju_rotVecQuat(out[t], vectors[t], inverse)
    return out


def test_a_root_angular_velocity_in_the_root_frame_is_refused_with_the_fix(model, holosoma):
    joint_vel = holosoma["joint_vel"].copy()
    joint_vel[:, 3:6] = _in_root_frame(holosoma["joint_pos"][:, 3:7], joint_vel[:, 3:6])  # MuJoCo's qvel
    with pytest.raises(
        ValueError,
        match=r"joint_vel\[:, 3:6\] \(root angular velocity, world frame\) does not match how "
        r"joint_pos\[:, 3:7\] \(root orientation\) turns: they differ by .* rad/s .*matches when read in the "
        r"root's own frame .*store joint_vel\[:, 3:6\] in the world frame",
    ):
        load_motion(_holosoma_with(holosoma, joint_vel=joint_vel), model)


def test_beyondmimic_quaternions_stored_xyzw_are_refused_with_the_fix(model, holosoma):
    arrays = holosoma_to_beyondmimic(holosoma, model)
    load_motion(arrays, model)  # as converted, wxyz: loads
    arrays["body_quat_w"] = arrays["body_quat_w"][..., [1, 2, 3, 0]]
    with pytest.raises(
        ValueError, match=r"matches when body_quat_w\[:, 0\] is read x, y, z, w: store .* \(wxyz\)"
    ):
        load_motion(arrays, model)


def test_root_angular_velocities_that_match_no_reading_name_what_to_check(model, holosoma):
    joint_vel = holosoma["joint_vel"].copy()
    joint_vel[:, 3:6] *= 180.0 / np.pi  # degrees per second
    with pytest.raises(ValueError, match=r"is joint_vel\[:, 3:6\] in the world frame, in rad/s, .*'fps'"):
        load_motion(_holosoma_with(holosoma, joint_vel=joint_vel), model)


@pytest.mark.parametrize(
    ("change", "fix"),
    [
        (
            lambda arrays: _in_root_frame(arrays["joint_pos"][:, 3:7], arrays["joint_vel"][:, :3]),
            "root's own frame",
        ),
        (lambda arrays: arrays["joint_vel"][:, :3] * 100.0, r"in the world frame, in m/s, and 'fps'"),
    ],
    ids=["root-frame", "cm-per-s"],
)
def test_a_root_linear_velocity_that_does_not_match_the_root_path_is_refused_with_the_fix(
    model, holosoma, change, fix
):
    joint_vel = holosoma["joint_vel"].copy()
    joint_vel[:, :3] = change(holosoma)
    with pytest.raises(
        ValueError,
        match=r"joint_vel\[:, :3\] \(root linear velocity, world frame\) does not match how joint_pos\[:, :3\] "
        rf"\(root position\) moves: they differ by .* m/s .*; .*{fix}",
    ):
        load_motion(_holosoma_with(holosoma, joint_vel=joint_vel), model)


def _standing_root(holosoma: dict) -> dict:
    """The clip with its root held at frame 0's pose: only the joints move."""
    joint_pos, joint_vel = holosoma["joint_pos"].copy(), holosoma["joint_vel"].copy()
    joint_pos[:, :7] = joint_pos[0, :7]
    joint_vel[:, :6] = 0.0
    return _holosoma_with(holosoma, joint_pos=joint_pos, joint_vel=joint_vel)


@pytest.mark.parametrize("fps", [25.0, 100.0])
def test_a_wrong_fps_is_refused_naming_the_rate_the_joint_velocities_match(model, holosoma, fps):
    standing = _standing_root(holosoma)
    load_motion(standing, model)  # at the clip's own 50 fps the joint velocities match
    for arrays in (standing, holosoma_to_beyondmimic(standing, model)):
        with pytest.raises(
            ValueError,
            match=r"joint_vel(\[:, 6:\])? \(joint velocities\) does not match how joint_pos(\[:, 7:\])? \(joint "
            rf"angles\) moves: .*; they match at about (48|49|50|51) fps, or with joint_vel.* times .*: is 'fps' "
            rf"\({fps:g}\) the clip's rate",
        ):
            load_motion({**arrays, "fps": np.array([fps])}, model)


def test_joint_velocities_left_at_zero_or_in_degrees_are_refused_with_the_fix(model, holosoma):
    joint_vel = holosoma["joint_vel"].copy()
    joint_vel[:, 6:] = 0.0
    with pytest.raises(
        ValueError, match=r"joint_vel\[:, 6:\] is \(nearly\) zero: store each joint's velocity"
    ):
        load_motion(_holosoma_with(holosoma, joint_vel=joint_vel), model)
    joint_vel = holosoma["joint_vel"].copy()
    joint_vel[:, 6:] = np.degrees(joint_vel[:, 6:])
    with pytest.raises(
        ValueError, match=r"or with joint_vel\[:, 6:\] times 0\.017\d: .* in rad/s\?"
    ):  # pi / 180
        load_motion(_holosoma_with(holosoma, joint_vel=joint_vel), model)


ISAAC_LAB_G1_JOINTS = tuple(
    f"{name}_joint"
    for name in (
        "left_hip_pitch", "right_hip_pitch", "waist_yaw", "left_hip_roll", "right_hip_roll", "waist_roll",
        "left_hip_yaw", "right_hip_yaw", "waist_pitch", "left_knee", "right_knee", "left_shoulder_pitch",
        "right_shoulder_pitch", "left_ankle_pitch", "right_ankle_pitch", "left_shoulder_roll",
        "right_shoulder_roll", "left_ankle_roll", "right_ankle_roll", "left_shoulder_yaw", "right_shoulder_yaw",
        "left_elbow", "right_elbow", "left_wrist_roll", "right_wrist_roll", "left_wrist_pitch",
        "right_wrist_pitch", "left_wrist_yaw", "right_wrist_yaw",
    )
)  # fmt: skip
"""The G1's joints in Isaac Lab's order, the column order of whole_body_tracking's motion files."""


def test_joints_in_isaac_lab_order_without_names_are_refused_and_load_once_named(model, holosoma):
    converted = holosoma_to_beyondmimic(holosoma, model)
    columns = [G1.joint_names.index(name) for name in ISAAC_LAB_G1_JOINTS]
    isaac = {
        **converted,
        "joint_pos": converted["joint_pos"][:, columns],
        "joint_vel": converted["joint_vel"][:, columns],
    }
    with (
        pytest.warns(UserWarning),
        pytest.raises(  # the scrambled joints also leave their limits
            ValueError,
            match=r"'body_pos_w' does not follow forward kinematics of its root and joints on the training model: its "
            r"bodies lie \d+\.\d cm from the nearest model body .*whole_body_tracking's files keep Isaac Lab's order: "
            r"save the names of joint_pos's columns as 'joint_names'",
        ),
    ):
        load_motion(isaac, model)
    named = load_motion({**isaac, "joint_names": np.array(ISAAC_LAB_G1_JOINTS)}, model, dtype=torch.float64)
    _assert_same_clip(named, load_motion(converted, model, dtype=torch.float64), atol=0.0)


def test_beyondmimic_bodies_of_another_robot_are_refused(model, holosoma):
    converted = holosoma_to_beyondmimic(holosoma, model)
    stretched = converted["body_pos_w"].copy()
    stretched[:, 1:] = stretched[:, :1] + 1.2 * (stretched[:, 1:] - stretched[:, :1])  # links 20% longer
    with pytest.raises(ValueError, match=r"does not follow forward kinematics .*made for this robot"):
        load_motion({**converted, "body_pos_w": stretched, "joint_names": np.array(G1.joint_names)}, model)
