"""``trainrt eval`` building blocks: the evaluation envs come from the run config through task overrides."""

from __future__ import annotations

import pytest
import torch
from g1_assets import require_g1_assets

from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.runner.build import build_env
from trainrt.runner.checkpoint import resolve_run_checkpoint
from trainrt.runner.evaluate import format_eval_table
from trainrt.tasks.tracking.evaluation import tracking_eval_config
from trainrt.tasks.velocity.evaluation import WALK_EVAL_COMMANDS, walk_eval_config


@pytest.fixture(scope="module", autouse=True)
def _assets():
    require_g1_assets()


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
    assert resolve_run_checkpoint(tmp_path, None) == tmp_path
    with pytest.raises(FileNotFoundError, match="no checkpoint for iteration 7"):
        resolve_run_checkpoint(tmp_path, "7")
    with pytest.raises(FileNotFoundError, match="give a file or an iteration number"):
        resolve_run_checkpoint(tmp_path, tmp_path / "nope.pt")


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
    from trainrt.tasks.tracking import mdp as tracking

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
    horizon = motion.num_frames + 5
    (row,) = _rollout(env, _DefaultPoseAgent(env.num_actions), horizon, metrics, per_second=True)
    assert row["completed_fraction"] == 1.0 and row["failed_fraction"] == 0.0
    assert row["mean_episode_length"] == motion.num_frames
    assert row["joint_pos_error"] > 0.0
    # per second: the rows run (after the step) through the clip's frames but its last, then none do
    seconds = row["per_second"]
    bin_steps = round(1.0 / env.step_dt)
    lengths = [min(bin_steps, horizon - b * bin_steps) for b in range(len(seconds["t_s"]))]
    assert len(lengths) == -(-horizon // bin_steps)
    running_steps = sum(f * n for f, n in zip(seconds["running_fraction"], lengths))
    assert running_steps == pytest.approx(motion.num_frames - 1)
    assert seconds["running_fraction"][0] == 1.0 and all(e > 0.0 for e in seconds["joint_pos_error"][:-1])


def test_a_checkpoint_trained_with_other_action_scales_is_refused():
    from trainrt.runner.evaluate import _load_agent

    cfg = cpu_demo_preset("sac", "g1_walk_flat", "mujoco")
    env = build_env(cfg, num_envs=1)
    old = {"path": "ckpt_000001.pt", "env_meta": {"action_meta": {"action_scale": [0.25] * env.num_actions}}}
    with pytest.raises(ValueError, match="another action mapping"):
        _load_agent(cfg, env, old)


def test_all_walk_commands_run_in_one_env_and_one_rollout(monkeypatch):
    import trainrt.runner.evaluate as evaluate

    built, steps_taken = [], []
    real_build_env, real_step = evaluate.build_env, evaluate._RolloutStep.step

    def build_env_spy(cfg, **kwargs):
        built.append(real_build_env(cfg, **kwargs))
        return built[-1]

    def step_spy(self):
        steps_taken.append(self.env.num_envs)
        real_step(self)
        # every row keeps its block's command through the rollout
        torch.testing.assert_close(self.env.command_manager.get_term("twist").command, expected)

    names = ["stand", "forward_0.5", "yaw_0.5"]
    expected = torch.tensor([WALK_EVAL_COMMANDS[n] for n in names]).repeat_interleave(2, dim=0)
    monkeypatch.setattr(evaluate, "build_env", build_env_spy)
    monkeypatch.setattr(evaluate._RolloutStep, "step", step_spy)
    monkeypatch.setattr(evaluate, "_load_agent", lambda cfg, env, state: _DefaultPoseAgent(env.num_actions))
    cfg = cpu_demo_preset("sac", "g1_walk_flat", "mujoco")
    body = evaluate.evaluate_task(cfg, {}, num_envs=2, steps=4, scenarios=names, log=lambda line: None)

    assert len(built) == 1 and built[0].num_envs == 6
    assert steps_taken == [6] * 4, "one rollout of 4 steps over all 6 rows"
    assert list(body["commands"]) == names
    assert body["horizon_s"] == pytest.approx(4 * built[0].step_dt)
    for name, row in body["commands"].items():
        assert row["num_envs"] == 2 and row["steps"] == 4
        vx, vy, wz = WALK_EVAL_COMMANDS[name]
        assert row["command"] == {"lin_vel_x": vx, "lin_vel_y": vy, "ang_vel_z": wz}
    # the observation the first action sees already carries each row's command
    stand, forward = body["commands"]["stand"], body["commands"]["forward_0.5"]
    assert forward["lin_vel_error_xy"] > stand["lin_vel_error_xy"]


def test_rollout_groups_average_their_own_rows():
    from trainrt.runner.evaluate import _rollout

    cfg = cpu_demo_preset("sac", "g1_walk_flat", "mujoco")
    env = build_env(walk_eval_config(cfg, WALK_EVAL_COMMANDS["stand"]), num_envs=4)
    row_ids = torch.arange(4, dtype=torch.float32)
    metrics = {"row_id": lambda env: row_ids}
    grouped = _rollout(env, _DefaultPoseAgent(env.num_actions), 3, metrics, groups=2)
    assert [g["row_id"] for g in grouped] == [0.5, 2.5] and [g["num_envs"] for g in grouped] == [2, 2]
    with pytest.raises(ValueError, match="does not split into 3 equal groups"):
        _rollout(env, _DefaultPoseAgent(env.num_actions), 3, metrics, groups=3)


def test_walk_horizon_defaults_to_simulated_seconds_within_one_episode():
    from trainrt.tasks.velocity.evaluation import WALK_EVAL_HORIZON_S, walk_horizon_steps

    env = build_env(cpu_demo_preset("sac", "g1_walk_flat", "mujoco"), num_envs=1)
    assert walk_horizon_steps(env, WALK_EVAL_HORIZON_S) == round(WALK_EVAL_HORIZON_S / env.step_dt)
    assert walk_horizon_steps(env, 1.0e6) == env.max_episode_length
    with pytest.raises(ValueError, match="horizon_s must be a positive number"):
        walk_horizon_steps(env, 0.0)


def test_the_graph_rollout_falls_back_to_eager_on_cpu_with_the_same_results():
    from trainrt.runner.evaluate import _rollout

    cfg = cpu_demo_preset("sac", "g1_walk_flat", "mujoco")
    metrics = {"root_height": lambda env: env.robot.root_pos_w[:, 2]}
    results = []
    for use_graph in (True, False):
        env = build_env(walk_eval_config(cfg, WALK_EVAL_COMMANDS["stand"]), num_envs=2, seed=3)
        results.append(_rollout(env, _DefaultPoseAgent(env.num_actions), 5, metrics, use_graph=use_graph))
    assert results[0] == results[1] and results[0][0]["graph_enabled"] is False
    assert results[0][0]["steps"] == 5 and results[0][0]["root_height"] > 0.0


class _FixedActionAgent:
    """Acts with one fixed action vector in every row."""

    def __init__(self, action: torch.Tensor) -> None:
        self.action = action

    def act(self, obs, deterministic: bool = True) -> torch.Tensor:
        return self.action.expand(obs["policy"].shape[0], -1).clone()


def test_action_saturation_counts_the_components_at_the_ends_of_the_tanh_range():
    from trainrt.runner.evaluate import ACTION_SATURATION_LEVEL, _rollout, action_saturation

    cfg = walk_eval_config(cpu_demo_preset("sac", "g1_walk_flat", "mujoco"), (0.0, 0.0, 0.0))
    env = build_env(cfg, num_envs=2)
    action = torch.zeros(env.num_actions)
    action[:3] = 1.0
    action[3:5] = -ACTION_SATURATION_LEVEL  # at the level counts
    action[5] = 0.98  # inside it does not
    (row,) = _rollout(env, _FixedActionAgent(action), 3, {"action_saturation": action_saturation})
    assert row["action_saturation"] == pytest.approx(5 / env.num_actions)


def test_the_table_title_names_a_solver_limit_other_than_the_runs():
    row = {"command": {"lin_vel_x": 0.0, "lin_vel_y": 0.0, "ang_vel_z": 0.0}, "failed_fraction": 0.0,
           "lin_vel_error_xy": 0.1, "ang_vel_error_z": 0.1, "mean_lin_vel_x": 0.0, "mean_lin_vel_y": 0.0,
           "mean_ang_vel_z": 0.0, "action_saturation": 0.0, "mean_episode_length": 10.0, "steps": 10}  # fmt: skip
    older = {"algo": "sac", "task": "g1_walk_flat", "iteration": 3, "sim": "mujoco", "trained_sim": "mjwarp",
             "commands": {"stand": row}}  # fmt: skip
    # an eval JSON from before the limits were recorded (trainrt report reads those too)
    assert "solver iterations" not in format_eval_table(older).splitlines()[0]
    same = {**older, "solver_iterations": 5, "trained_solver_iterations": 5}
    assert "solver iterations" not in format_eval_table(same).splitlines()[0]
    other = {**older, "solver_iterations": 10, "trained_solver_iterations": 5}
    assert "solver iterations 10 (trained with 5)" in format_eval_table(other).splitlines()[0]


def test_the_episode_length_is_shown_against_the_horizon_not_the_steps_taken():
    # The rollout stops at the first check after every row ended (every 50 steps): a 325-step clip whose rows
    # all fell by step 11 took 50 steps, and its table must read 11/325, not 11/50.
    row = {"completed_fraction": 0.0, "failed_fraction": 1.0, "body_pos_error": 0.1, "anchor_pos_error": 0.1,
           "anchor_ori_error": 0.1, "joint_pos_error": 0.1, "action_saturation": 0.0,
           "mean_episode_length": 11.0, "steps": 50, "horizon_steps": 325}  # fmt: skip
    result = {"algo": "flashsac", "task": "g1_motion_tracking", "iteration": 3, "sim": "mujoco",
              "trained_sim": "mujoco", "clip": {"motion_file": "clip.npz"}, "tracking": row}  # fmt: skip
    assert "11/325" in format_eval_table(result)
    older = {**result, "tracking": {k: v for k, v in row.items() if k != "horizon_steps"}}
    assert "11/50" in format_eval_table(older)  # eval JSONs written before the horizon was recorded


def test_a_rollout_records_its_horizon_beside_the_steps_it_took():
    from trainrt.runner.evaluate import _rollout

    cfg = walk_eval_config(cpu_demo_preset("sac", "g1_walk_flat", "mujoco"), (0.0, 0.0, 0.0))
    env = build_env(cfg, num_envs=2)
    (row,) = _rollout(env, _FixedActionAgent(torch.zeros(env.num_actions)), 3, {})
    assert row["steps"] == 3 and row["horizon_steps"] == 3


def test_a_per_second_rollout_averages_each_second_per_group():
    from trainrt.runner.evaluate import _rollout

    cfg = walk_eval_config(cpu_demo_preset("sac", "g1_walk_flat", "mujoco"), (0.0, 0.0, 0.0))
    env = build_env(cfg, num_envs=4)
    per_second_steps = round(1.0 / env.step_dt)
    row_values = torch.tensor([1.0, 1.0, 3.0, 5.0], dtype=torch.float64)
    metrics = {"value": lambda env: row_values}
    steps = per_second_steps + 3  # a whole second, then 3 steps of the next
    first, second = _rollout(
        env, _DefaultPoseAgent(env.num_actions), steps, metrics, groups=2, per_second=True
    )
    assert first["per_second"]["t_s"] == pytest.approx([0.0, per_second_steps * env.step_dt])
    assert first["per_second"]["value"] == [1.0, 1.0]  # both of its rows hold 1.0 at every step
    assert second["per_second"]["value"] == [4.0, 4.0]  # (3 + 5) / 2
    # standing in the default pose for a second and a bit: every row runs through every step
    assert first["failed_fraction"] == second["failed_fraction"] == 0.0
    assert first["per_second"]["running_fraction"] == second["per_second"]["running_fraction"] == [1.0, 1.0]
    (plain,) = _rollout(env, _DefaultPoseAgent(env.num_actions), 3, metrics)
    assert "per_second" not in plain
