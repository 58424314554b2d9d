"""The tracking task for any robot whose clip names its joints: with the G1 it is the ``g1_motion_tracking``
config of before (pinned by a stored description); with every robot of ``ROBOTS`` (and one built here) the env
tracks a clip whose joints come in the clip's own order, mapped by name; names the robot lacks are refused."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from env_cfg_description import describe
from g1_assets import require_g1_assets

from trainrt import mdp
from trainrt.envs import ManagerBasedRlEnv
from trainrt.motion import load_motion
from trainrt.robots import G1, ROBOTS, RobotDescription
from trainrt.tasks import make_task_cfg
from trainrt.tasks.tracking.command import resolve_motion_file, robots_driving
from trainrt.tasks.tracking.env_cfg import motion_tracking_env_cfg

STORED = Path(__file__).with_name("g1_motion_tracking_env_cfg.json")
"""``describe(g1_motion_tracking_env_cfg())`` as the task factory built it before the tracking task took a robot
(written once from that code; terms by qualname, effective params, a summary of the model)."""
MOVED = (
    ("trainrt.tasks.g1_motion_tracking.mdp:MotionCommand", "trainrt.tasks.tracking.command:MotionCommand"),
    ("trainrt.tasks.g1_motion_tracking.mdp:", "trainrt.tasks.tracking.mdp:"),
)
"""The only changes, applied in order: the tracking terms moved, unchanged, from the G1 task's folder to
``tasks/tracking``, and the motion command from there to its own module, ``tasks/tracking/command.py``."""


def test_the_g1_registration_builds_the_tracking_config_of_before():
    require_g1_assets()
    stored = STORED.read_text()
    for old, new in MOVED:
        assert old in stored
        stored = stored.replace(old, new)
    expected = json.loads(stored)
    actual = json.loads(json.dumps(describe(make_task_cfg("g1_motion_tracking"))))
    differing = [key for key in expected.keys() | actual.keys() if expected.get(key) != actual.get(key)]
    assert not differing, f"g1_motion_tracking's config changed in {sorted(differing)}"


# --- any robot: a synthetic clip that names its joints in its own order ------------------------------------------

FPS = 50.0  # the control rate: the clip is not resampled, so env step k is clip frame k
DURATION_S = 2.0
G1_VARIANT = dataclasses.replace(
    G1,
    name="g1_variant",
    default_joint_pos={},
    self_collision_pairs=(),
    joint_groups={},
    motions=None,
    default_motion=None,
    _computed={},
)
"""A robot built here over the G1's MJCF: straight-legged default pose, no self-collision pairs, no asset clips
(not in ``ROBOTS``), tracked by its root and feet with the root as anchor."""


def _model_or_skip(robot: RobotDescription) -> mujoco.MjModel:
    try:
        return robot.model()
    except FileNotFoundError as err:
        pytest.skip(f"{robot.name} assets missing: {err}")


def _synthetic_clip(
    robot: RobotDescription, model: mujoco.MjModel, names: list[str] | None = None
) -> dict[str, np.ndarray]:
    """A holosoma-layout clip of ``DURATION_S`` at ``FPS``: the root walks forward at 0.2 m/s at the standing
    height, every joint swings about the default pose with its own amplitude; columns in ``names`` order
    (default: the robot's joints shuffled), ``body_names`` the model's bodies shuffled."""
    rng = np.random.default_rng(0)
    names = list(rng.permutation(robot.joint_names)) if names is None else names
    t = np.arange(int(DURATION_S * FPS) + 1) / FPS
    amplitude = np.linspace(-0.06, 0.06, len(names)) + 0.005  # distinct per column, none zero
    default = np.array([robot.default_joint_pos.get(name, 0.0) for name in names])
    omega = 2.0 * np.pi * 0.5
    joint_pos = default + amplitude * np.sin(omega * t)[:, None]
    joint_vel = amplitude * omega * np.cos(omega * t)[:, None]
    root_pos = np.stack((0.2 * t, np.zeros_like(t), np.full_like(t, robot.standing_root_height())), axis=1)
    root_quat = np.tile([1.0, 0.0, 0.0, 0.0], (len(t), 1))
    root_vel = np.tile([0.2, 0.0, 0.0, 0.0, 0.0, 0.0], (len(t), 1))
    bodies = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_BODY, i) for i in range(model.nbody)]
    return {
        "fps": np.array([FPS]),
        "joint_pos": np.concatenate((root_pos, root_quat, joint_pos), axis=1),
        "joint_vel": np.concatenate((root_vel, joint_vel), axis=1),
        "joint_names": np.array(names, dtype=str),
        "body_names": np.array(list(rng.permutation(bodies)), dtype=str),
    }


def _tracking_env(robot: RobotDescription, clip: Path) -> ManagerBasedRlEnv:
    """The tracking env of ``robot`` on ``clip`` (its root and feet tracked, the root the anchor), every reset at
    frame 0 without perturbation, 2 envs on CPU MuJoCo."""
    cfg = motion_tracking_env_cfg(
        robot, clip, tracked_bodies=(robot.root_body, *robot.feet), anchor_body=robot.root_body
    )
    motion = cfg.commands["motion"]
    exact = {"start_frame": 0, "pose_range": {}, "velocity_range": {}, "joint_position_range": (0.0, 0.0)}
    cfg.commands["motion"] = dataclasses.replace(motion, params={**motion.params, **exact})
    return ManagerBasedRlEnv(cfg, sim="mujoco", num_envs=2, device="cpu", seed=0)


@pytest.mark.parametrize("robot", [*ROBOTS.values(), G1_VARIANT], ids=lambda robot: robot.name)
def test_the_env_tracks_the_clip_mapped_onto_the_robot_by_joint_name(robot, tmp_path):
    model = _model_or_skip(robot)
    arrays = _synthetic_clip(robot, model)
    path = tmp_path / "clip.npz"
    np.savez(path, **arrays)
    names = [str(n) for n in arrays["joint_names"]]
    assert names != list(robot.joint_names)  # the clip's own order
    env = _tracking_env(robot, path)
    motion = env.command_manager.get_term("motion")
    columns = [7 + names.index(name) for name in env.robot.joint_names]  # by name, in the env's joint order
    expected = torch.tensor(arrays["joint_pos"][:, columns], dtype=torch.float32)
    expected_vel = torch.tensor(arrays["joint_vel"][:, [c - 1 for c in columns]], dtype=torch.float32)
    root_pos = torch.tensor(arrays["joint_pos"][:, :3], dtype=torch.float32)

    env.reset()
    torch.testing.assert_close(env.robot.joint_pos, expected[0].expand(2, -1), atol=1e-6, rtol=0)
    zeros = torch.zeros(2, env.num_actions)
    for k in range(1, 6):
        env.step(zeros)
        assert motion.frame.tolist() == [k, k]
        command = mdp.generated_commands(env, "motion")  # what the policy is told to track
        torch.testing.assert_close(command[:, : len(columns)], expected[k].expand(2, -1), atol=1e-6, rtol=0)
        torch.testing.assert_close(
            command[:, len(columns) :], expected_vel[k].expand(2, -1), atol=1e-5, rtol=0
        )
        torch.testing.assert_close(motion.ref_anchor_pos_w, root_pos[k].expand(2, -1), atol=1e-5, rtol=0)


def test_a_clip_naming_a_joint_the_robot_lacks_is_refused_naming_it(tmp_path):
    model = _model_or_skip(G1)
    arrays = _synthetic_clip(G1, model, names=[*G1.joint_names, "left_hand_thumb_0_joint"])
    path = tmp_path / "hands.npz"
    np.savez(path, **arrays)
    with pytest.raises(
        ValueError, match=r"motion names joints the robot lacks: \['left_hand_thumb_0_joint'\]"
    ) as err:
        _tracking_env(G1, path)
    message = str(err.value)
    assert "\n" not in message and "the robot's joints: ['left_hip_pitch_joint', " in message


def test_a_clip_lacking_a_robot_joint_or_a_tracked_body_is_refused_naming_it():
    model = _model_or_skip(G1)
    lacking = _synthetic_clip(G1, model, names=[n for n in G1.joint_names if n != "waist_yaw_joint"])
    with pytest.raises(ValueError, match=r"motion lacks joints of the training model: \['waist_yaw_joint'\]"):
        load_motion(lacking, model, strict_names=True)
    arrays = _synthetic_clip(G1, model)
    arrays["body_names"] = np.array([n for n in arrays["body_names"] if n != "torso_link"])
    load_motion(arrays, model, body_names=("pelvis", "left_ankle_roll_link"), strict_names=True)
    with pytest.raises(ValueError, match=r"'body_names' lacks bodies the task tracks: \['torso_link'\]"):
        load_motion(arrays, model, body_names=("pelvis", "torso_link"), strict_names=True)
    del arrays["body_names"]  # a clip that names no bodies is tracked by the names the task gives
    load_motion(arrays, model, body_names=("pelvis", "torso_link"), strict_names=True)


def test_clip_names_resolve_among_the_clips_of_the_robot_the_model_is():
    model = _model_or_skip(G1)
    assert robots_driving(model) == (G1,)
    assert resolve_motion_file(None, robots_driving(model)).name == G1.default_motion
    with pytest.raises(FileNotFoundError, match=r"no robot of \[\] names a default clip"):
        resolve_motion_file(None, ())
    with pytest.raises(
        FileNotFoundError, match=r"no robot of this model has asset clips: give the clip's path"
    ):
        resolve_motion_file(G1.default_motion, ())


def test_the_factory_refuses_an_anchor_or_end_effector_it_does_not_track():
    with pytest.raises(ValueError, match=r"anchor_body 'torso_link' must be one of tracked_bodies"):
        motion_tracking_env_cfg(G1, tracked_bodies=("pelvis",), anchor_body="torso_link")
    with pytest.raises(
        ValueError, match=r"end_effectors \['left_ankle_roll_link'\] must be among tracked_bodies"
    ):
        motion_tracking_env_cfg(
            G1, tracked_bodies=("pelvis",), anchor_body="pelvis", end_effectors=("left_ankle_roll_link",)
        )
