"""``trainrt eval`` building blocks: the evaluation envs come from the run config through task overrides."""

from __future__ import annotations

import pytest
import torch

import simcore
from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.runner.build import build_env
from trainrt.runner.evaluate import (
    WALK_EVAL_COMMANDS,
    resolve_eval_checkpoint,
    tracking_eval_config,
    walk_eval_config,
)


@pytest.fixture(scope="module", autouse=True)
def _assets():
    try:
        simcore.g1_asset_paths()
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")


def test_walk_eval_pins_the_command_and_removes_pushes():
    cfg = cpu_demo_preset("sac", "g1_walk_flat", "mujoco")
    env = build_env(walk_eval_config(cfg, WALK_EVAL_COMMANDS["combined"]), num_envs=3)
    assert "push_robot" not in env.cfg.events
    env.reset()
    expected = torch.tensor(WALK_EVAL_COMMANDS["combined"]).expand(3, -1)
    twist = env.command_manager.get_term("twist")
    for _ in range(3):
        torch.testing.assert_close(twist.command[:, :3], expected)
        env.step(torch.zeros(3, env.num_actions))


def test_walk_eval_keeps_the_runs_own_task_overrides():
    cfg = apply_overrides(
        cpu_demo_preset("sac", "g1_walk_flat", "mujoco"),
        ["task.rewards.alive.weight=2.0", "task.commands.twist.params.heading_stiffness=0.7"],
    )
    eval_cfg = walk_eval_config(cfg, WALK_EVAL_COMMANDS["stand"])
    assert eval_cfg.task.rewards == {"alive": {"weight": 2.0}}
    assert eval_cfg.task.commands["twist"]["params"]["heading_stiffness"] == 0.7
    assert eval_cfg.task.commands["twist"]["params"]["lin_vel_x"] == [0.0, 0.0]
    assert cfg.task.events == {}, "the run's config is not changed"


def test_tracking_eval_starts_every_row_at_the_clips_first_frame_unperturbed():
    cfg = cpu_demo_preset("sac", "g1_motion_tracking", "mujoco")
    env = build_env(tracking_eval_config(cfg), num_envs=3, seed=5)
    assert "push_robot" not in env.cfg.events
    motion = env.command_manager.get_term("motion")
    for _ in range(2):  # the first reset and a later one
        env.reset()
        assert motion.frame.tolist() == [0, 0, 0]
        torch.testing.assert_close(
            env.robot.joint_pos, motion.clip.joint_pos[0].expand(3, -1), atol=1e-5, rtol=0
        )
        torch.testing.assert_close(
            env.robot.root_pos_w, motion.clip.root_pos_w[0].expand(3, -1), atol=1e-5, rtol=0
        )
    assert env.max_episode_length > motion.num_frames


def test_checkpoint_choice(tmp_path):
    assert resolve_eval_checkpoint(tmp_path, None) == tmp_path
    with pytest.raises(FileNotFoundError, match="no checkpoint for iteration 7"):
        resolve_eval_checkpoint(tmp_path, "7")
    with pytest.raises(FileNotFoundError, match="give a file or an iteration number"):
        resolve_eval_checkpoint(tmp_path, tmp_path / "nope.pt")


def test_start_frame_must_be_inside_the_clip():
    cfg = apply_overrides(
        cpu_demo_preset("sac", "g1_motion_tracking", "mujoco"),
        ["task.commands.motion.params.start_frame=100000"],
    )
    with pytest.raises(ValueError, match="start_frame must be None or an int"):
        build_env(cfg, num_envs=1)


class _DefaultPoseAgent:
    """Stands in for a trained actor: action 0 (the default pose) for every row."""

    def __init__(self, num_actions: int) -> None:
        self.num_actions = num_actions

    def act(self, obs, deterministic: bool = True) -> torch.Tensor:
        assert deterministic
        return torch.zeros(obs["policy"].shape[0], self.num_actions)


def test_tracking_rollout_runs_to_the_clips_end_and_counts_completion():
    from trainrt.runner.evaluate import _rollout
    from trainrt.tasks.g1_motion_tracking import mdp as tracking

    # failure terminations off: every row must reach the last frame, as a completion, in num_frames steps
    cfg = apply_overrides(
        cpu_demo_preset("sac", "g1_motion_tracking", "mujoco"),
        [
            f"task.terminations.{name}.enabled=false"
            for name in ("anchor_height", "anchor_orientation", "end_effector_height")
        ],
    )
    env = build_env(tracking_eval_config(cfg), num_envs=2)
    motion = env.command_manager.get_term("motion")
    metrics = {"joint_pos_error": lambda env: tracking.joint_pos_error(env, command_name="motion")}
    row = _rollout(env, _DefaultPoseAgent(env.num_actions), motion.num_frames + 5, metrics)
    assert row["completed_fraction"] == 1.0 and row["failed_fraction"] == 0.0
    assert row["mean_episode_length"] == motion.num_frames
    assert row["joint_pos_error"] > 0.0


def test_a_checkpoint_trained_with_other_action_scales_is_refused():
    from trainrt.runner.evaluate import _load_agent

    cfg = cpu_demo_preset("sac", "g1_walk_flat", "mujoco")
    env = build_env(cfg, num_envs=1)
    old = {"path": "ckpt_000001.pt", "env_meta": {"action_meta": {"action_scale": [0.25] * env.num_actions}}}
    with pytest.raises(ValueError, match="other action scales"):
        _load_agent(cfg, env, old)
