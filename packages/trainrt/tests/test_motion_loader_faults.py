"""Motion files that are not motions (empty, .npy, text) and joint angles far outside the joint limits."""

from __future__ import annotations

import warnings

import mujoco
import numpy as np
import pytest
import torch
from g1_assets import g1_clip_or_skip, load_g1_or_skip

from trainrt.cli import format_warning
from trainrt.motion import (
    GroundWarning,
    IgnoredJointsWarning,
    JointLimitWarning,
    ShortClipWarning,
    load_motion,
    read_motion_arrays,
)
from trainrt.motion.checks import JOINT_LIMIT_TOLERANCE_RAD
from trainrt.viz.motion_info import format_motion_info, motion_info


@pytest.fixture(scope="module")
def model() -> mujoco.MjModel:
    return load_g1_or_skip()


@pytest.fixture(scope="module")
def holosoma(model) -> dict[str, np.ndarray]:
    """The first 60 frames (1.18 s) of a holosoma clip."""
    arrays = read_motion_arrays(g1_clip_or_skip())
    for key in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        arrays[key] = arrays[key][:60].copy()
    return arrays


def _write_npy(path):
    with open(path, "wb") as handle:
        np.save(handle, np.zeros((4, 36)))


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda path: path.write_bytes(b""), r"is not a readable \.npz motion file: it is empty \(0 bytes\)"),
        (_write_npy, r"it is a single-array \.npy file \(renamed\?\), not an \.npz archive"),
        (
            lambda path: path.write_text("fps,joint_pos\n30,0.1\n"),
            r"it is a text file \(starts with 'fps,joint",
        ),
        (
            lambda path: path.write_bytes(bytes(range(256))),
            r"it does not start like an \.npz \(zip\) archive",
        ),
    ],
    ids=["empty", "npy-renamed", "text", "binary"],
)
def test_a_file_that_is_not_an_npz_says_what_it_is(tmp_path, make, message):
    path = tmp_path / "clip.npz"
    make(path)
    with pytest.raises(ValueError, match=message) as caught:
        read_motion_arrays(path)
    text = str(caught.value)
    assert str(path) in text and "np.savez" in text
    assert "pickle" not in text  # numpy's advice to unpickle is not ours to give


def test_joint_angles_far_outside_the_limits_warn_naming_joints_and_frames(model, holosoma):
    with warnings.catch_warnings():
        warnings.simplefilter("error", JointLimitWarning)
        load_motion(holosoma, model)  # the real clip is within its limits
    knee = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "left_knee_joint")
    upper = float(model.jnt_range[knee, 1])
    names = [str(n) for n in holosoma["joint_names"]]
    column = 7 + names.index("left_knee_joint")
    bad = {k: v.copy() for k, v in holosoma.items()}
    bad["joint_pos"][4:9, column] = upper + 0.5
    bad["joint_pos"][12, column] = upper + JOINT_LIMIT_TOLERANCE_RAD / 2  # within the tolerance: no warning
    with pytest.warns(JointLimitWarning) as record:
        load_motion(bad, model)
    assert len(record) == 1
    message = str(record[0].message)
    assert "left_knee_joint in 5 frames (4-8), up to 0.50 beyond" in message
    assert "right_knee_joint" not in message


def test_joints_the_model_lacks_are_named_in_a_warning_and_change_nothing(model, holosoma):
    with warnings.catch_warnings():
        warnings.simplefilter("error", IgnoredJointsWarning)
        clip = load_motion(holosoma, model)  # every joint of the real clip is the model's
    extra = {k: v.copy() for k, v in holosoma.items()}
    extra["joint_names"] = np.array([*holosoma["joint_names"], "left_hand_thumb_0_joint"])
    extra["joint_pos"] = np.concatenate((holosoma["joint_pos"], np.full((60, 1), 0.3)), axis=1)
    extra["joint_vel"] = np.concatenate((holosoma["joint_vel"], np.zeros((60, 1))), axis=1)
    with pytest.warns(IgnoredJointsWarning, match=r"lacks are ignored: \['left_hand_thumb_0_joint'\]"):
        with_extra = load_motion(extra, model)
    for name in ("joint_pos", "joint_vel", "body_pos_w", "body_lin_vel_w", "body_ang_vel_w"):
        assert torch.equal(getattr(with_extra, name), getattr(clip, name)), name


def test_motion_info_reports_loader_warnings_as_lines(model, holosoma, tmp_path):
    knee = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "left_knee_joint")
    bad = {k: v.copy() for k, v in holosoma.items()}
    bad["joint_pos"][4:9, 7 + [str(n) for n in holosoma["joint_names"]].index("left_knee_joint")] = (
        float(model.jnt_range[knee, 1]) + 0.5
    )
    path = tmp_path / "bent.npz"
    np.savez(path, **bad)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # caught inside, not raised or printed
        info = motion_info(path)
    assert len(info["warnings"]) == 1 and "left_knee_joint in 5 frames (4-8)" in info["warnings"][0]
    lines = format_motion_info(info).splitlines()
    assert [line for line in lines if line.startswith("warning:")] == [
        f"warning:       {info['warnings'][0]}"
    ]


def test_the_command_line_prints_our_warnings_as_one_line_and_others_as_python_does():
    ours = format_warning("a clip's knee bends too far", JointLimitWarning, "/x/loader.py", 3)
    assert ours == "warning: a clip's knee bends too far\n"
    theirs = format_warning("old", DeprecationWarning, "/x/lib.py", 7)
    assert theirs.startswith("/x/lib.py:7: DeprecationWarning: old")


@pytest.mark.parametrize(
    ("lift_m", "message"),
    [
        (
            -0.3,
            r"motion bodies go up to 0\.\d\d m below the ground \(z = 0\), first at frame 0 .*inside the floor",
        ),
        (
            10.0,
            r"motion never comes near the ground: its lowest body is at least 10\.\d\d m up in every frame",
        ),
    ],
    ids=["sunk", "floating"],
)
def test_a_clip_far_below_or_above_the_ground_is_named_in_a_warning(model, holosoma, lift_m, message):
    with warnings.catch_warnings():
        warnings.simplefilter("error", GroundWarning)
        load_motion(holosoma, model)  # the real clip stands on the ground
    moved = {k: v.copy() for k, v in holosoma.items()}
    moved["joint_pos"][:, 2] += lift_m
    with pytest.warns(GroundWarning, match=message + r".*is the clip's height offset right\?"):
        load_motion(moved, model)


def test_motion_info_counts_frames_at_the_control_rate_as_the_task_resamples_them(model, holosoma, tmp_path):
    fast = {k: v.copy() for k, v in holosoma.items()}
    fast["fps"], fast["joint_vel"] = (
        np.array(100.0),
        holosoma["joint_vel"] * 2.0,
    )  # the poses played twice as fast
    path = tmp_path / "fast.npz"
    np.savez(path, **fast)
    info = motion_info(path)
    assert (info["frames"], info["control_rate_hz"], info["control_frames"]) == (60, 50.0, 30)
    assert load_motion(fast, model, target_fps=50.0).num_frames == info["control_frames"]
    assert "60 at 100 fps = 0.59 s; 30 at the task's 50 Hz control rate" in format_motion_info(info)


def test_a_clip_shorter_than_a_second_warns_naming_its_length(model, holosoma, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShortClipWarning)
        load_motion(holosoma, model)  # 1.18 s
    short = {k: v[:20].copy() if getattr(v, "ndim", 0) and len(v) == 60 else v for k, v in holosoma.items()}
    with pytest.warns(ShortClipWarning, match=r"the motion lasts 0\.38 s \(20 frames at 50 fps\)"):
        clip = load_motion(short, model, target_fps=50.0)
    assert clip.num_frames == 20  # it loads: the warning only says what episodes will be
    path = tmp_path / "short.npz"
    np.savez(path, **short)
    assert any("episodes would last under 0.38 s" in line for line in motion_info(path)["warnings"])
