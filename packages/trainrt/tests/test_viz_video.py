"""Videos decode to the frames and size asked for: a tiny policy run (tiled envs) and a clip preview;
clip info against the joint limits; the config listing."""

import json

import numpy as np
import pytest
import torch

from trainrt.config import apply_overrides, cpu_demo_preset, parse_override
from trainrt.robots import G1
from trainrt.runner.build import build_agent, build_env
from trainrt.runner.console import format_config_listing
from trainrt.viz.motion_info import motion_info
from trainrt.viz.record import VideoOptions, record_clip_video, record_policy_video
from trainrt.viz.video import read_video

TINY_NETWORKS = ["algo.params.actor_hidden_dim=8", "algo.params.critic_hidden_dim=8"]


def _robot_clip():
    clips = [p for p in G1.motion_files() if "w_obj" not in p.name]
    if not clips:
        pytest.skip("G1 motion clips are not fetched (python -m trainrt.robots fetch)")
    return clips[-1]


def _tiny_cfg(task: str):
    cfg = cpu_demo_preset("sac", task, "mujoco")
    return apply_overrides(cfg, [parse_override(o) for o in ["algo.num_envs=2", *TINY_NETWORKS]])


@pytest.mark.parametrize("task", ["g1_walk_flat", "g1_motion_tracking"])
def test_two_second_policy_video_has_the_expected_frames_and_size(tmp_path, task, one_thread):
    cfg = _tiny_cfg(task)
    env = build_env(cfg)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    options = VideoOptions(width=64, height=48, seconds=2.0, fps=25.0, renderer="software", env_ids=(0, 1))
    result = record_policy_video(env, agent, tmp_path / "policy.mp4", options, keep_preview=4)
    control_rate = 1.0 / env.step_dt
    expected_fps = control_rate / round(control_rate / 25.0)
    assert result.fps == pytest.approx(expected_fps)
    frames, fps = read_video(tmp_path / "policy.mp4")
    assert frames.shape == (round(2.0 * expected_fps), 48, 128, 3)  # two envs side by side
    assert fps == pytest.approx(expected_fps, rel=1e-3)
    assert len(result.preview) == 4
    assert frames[:, :, :64].std() > 5 and frames[:, :, 64:].std() > 5  # both tiles hold a picture


def test_one_file_per_env(tmp_path, one_thread):
    cfg = _tiny_cfg("g1_walk_flat")
    env = build_env(cfg)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    options = VideoOptions(width=64, height=48, seconds=0.4, renderer="software", env_ids=(0, 1), tiled=False)
    result = record_policy_video(env, agent, tmp_path / "v.mp4", options)
    assert [p.rsplit("/", 1)[-1] for p in result.paths] == ["v_env0.mp4", "v_env1.mp4"]
    for path in result.paths:
        assert read_video(path)[0].shape[1:] == (48, 64, 3)


def test_two_second_clip_preview_has_the_expected_frames_and_size(tmp_path):
    options = VideoOptions(width=64, height=48, seconds=2.0, fps=25.0, renderer="software")
    result = record_clip_video(_robot_clip(), tmp_path / "clip.mp4", options)
    frames, fps = read_video(tmp_path / "clip.mp4")
    assert result.frames == 50
    assert frames.shape == (50, 48, 64, 3)
    assert fps == pytest.approx(25.0)
    assert np.abs(frames[0].astype(int) - frames[-1].astype(int)).sum() > 0  # the robot moves


def test_a_clip_shorter_than_one_video_frame_is_previewed_at_its_own_rate(tmp_path):
    arrays = dict(np.load(_robot_clip(), allow_pickle=True))
    for key in ("joint_pos", "joint_vel", "body_pos_w", "body_quat_w", "body_lin_vel_w", "body_ang_vel_w"):
        if key in arrays:
            arrays[key] = arrays[key][:2].copy()  # 0.02 s at 50 fps: one frame at the video's 25 fps
    short = tmp_path / "short.npz"
    np.savez(short, **arrays)
    options = VideoOptions(width=64, height=48, seconds=2.0, fps=25.0, renderer="software")
    with pytest.warns(UserWarning, match="the motion lasts 0.02 s"):
        result = record_clip_video(short, tmp_path / "short.mp4", options)
    frames, fps = read_video(tmp_path / "short.mp4")
    assert (result.frames, result.fps) == (2, 50.0)
    assert frames.shape == (2, 48, 64, 3) and fps == pytest.approx(50.0)


def test_motion_info_reports_frames_and_a_joint_beyond_its_limit(tmp_path):
    clip = _robot_clip()
    info = motion_info(clip)
    arrays = dict(np.load(clip, allow_pickle=True))
    assert info["frames"] == len(arrays["joint_pos"])
    fps = float(np.asarray(arrays["fps"]).reshape(-1)[0])
    assert info["fps"] == pytest.approx(fps)
    assert info["duration_s"] == pytest.approx((info["frames"] - 1) / fps, abs=1e-3)
    assert info["num_joints"] == len(G1.joint_names)
    model = G1.model()
    knee = model.joint("left_knee_joint")
    column = 7 + list(arrays["joint_names"]).index("left_knee_joint")
    arrays["joint_pos"] = arrays["joint_pos"].copy()
    arrays["joint_pos"][5:9, column] = model.jnt_range[knee.id][1] + 0.05
    bent = tmp_path / "bent.npz"
    np.savez(bent, **arrays)
    bad = motion_info(bent)
    assert not bad["joint_limits"]["within"]
    assert bad["joint_limits"]["frames_outside"] >= 4
    worst = bad["joint_limits"]["worst_joints"][0]
    assert worst["joint"] == "left_knee_joint" and worst["first_frame"] == 5
    assert not bad["action_bounds"]["within"]  # action targets are clamped to the limits
    json.dumps(bad)


def _flat_keys(data: dict, prefix: str = "") -> list[str]:
    keys = []
    for key, value in data.items():
        if isinstance(value, dict) and value:
            keys += _flat_keys(value, f"{prefix}{key}.")
        else:
            keys.append(f"{prefix}{key}")
    return keys


def test_config_listing_has_every_key_of_the_config():
    cfg = cpu_demo_preset("flashsac", "g1_motion_tracking", "mujoco")
    listing = format_config_listing(cfg)
    listed = [line.split(" = ", 1)[0] for line in listing.splitlines()]
    assert listed == _flat_keys(cfg.model_dump(mode="json"))
    assert "training.log_every = " in listing and "# iterations between console blocks" in listing


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_config_listing_says_what_every_key_means(algo):
    cfg = cpu_demo_preset(algo, "g1_walk_flat", "mujoco")
    unexplained = [line for line in format_config_listing(cfg).splitlines() if "  # " not in line]
    assert unexplained == []


def test_video_env_reads_do_not_touch_the_env_generator(tmp_path, one_thread):
    cfg = _tiny_cfg("g1_walk_flat")
    env = build_env(cfg)
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    from trainrt.viz.record import EnvFrames

    frames = EnvFrames(env, VideoOptions(width=64, height=48, renderer="software"))
    state = env.rng.get_state().clone()
    frames.draw(0)
    assert torch.equal(env.rng.get_state(), state)
    del agent


def test_viewer_keys_set_the_velocity_command():
    from trainrt.viz.viewer import KeyboardVelocity

    keys = KeyboardVelocity()
    assert keys.command is None
    for code in (265, 265, 263, 266):  # up, up, left, page up
        keys(code)
    np.testing.assert_allclose(keys.command, [0.2, 0.1, 0.2])
    keys(32)  # space stops
    np.testing.assert_allclose(keys.command, [0.0, 0.0, 0.0])
