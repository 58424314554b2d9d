"""``task.*`` overrides from the command line: motion clip, episode length and per-term changes, validated
against the task's own config and rebuilt from ``config.json``."""

from __future__ import annotations

import json
import shutil

import pytest
from g1_assets import require_g1_assets

from trainrt.config import OverrideError, TrainConfig, apply_overrides, cpu_demo_preset
from trainrt.robots import G1
from trainrt.runner.build import build_env, make_env_cfg
from trainrt.tasks import make_task_cfg
from trainrt.tasks.g1_motion_tracking.env_cfg import DEFAULT_MOTION_FILE
from trainrt.tasks.term_overrides import merge_term_overrides


@pytest.fixture(scope="module", autouse=True)
def _assets():
    require_g1_assets()


def _cfg(task: str, *overrides: str) -> TrainConfig:
    return apply_overrides(cpu_demo_preset("sac", task, "mujoco"), list(overrides))


def test_defaults_change_nothing():
    for task in ("g1_walk_flat", "g1_motion_tracking"):
        built, plain = make_env_cfg(_cfg(task)), make_task_cfg(task)
        assert {n: t.weight for n, t in built.rewards.items()} == {
            n: t.weight for n, t in plain.rewards.items()
        }
        assert built.events.keys() == plain.events.keys() and built.episode_length_s == plain.episode_length_s


def test_valid_overrides_change_the_built_env():
    cfg = _cfg(
        "g1_walk_flat",
        "task.rewards.action_rate_l2.weight=-0.05",
        "task.rewards.track_lin_vel_xy_exp.params.std=0.25",
        "task.commands.twist.params.lin_vel_x=[0.5,0.5]",
        "task.events.push_robot.enabled=false",
        "task.events.foot_friction.params.friction_range=[0.6,0.9]",
        "task.terminations.fell_over.params.limit_angle=1.0",
        "task.episode_length_s=4",
    )
    env = build_env(cfg, num_envs=2)
    assert env.cfg.rewards["action_rate_l2"].weight == -0.05
    assert env.cfg.rewards["track_lin_vel_xy_exp"].params["std"] == 0.25
    assert env.command_manager.get_term("twist").params["lin_vel_x"] == (0.5, 0.5)
    assert "push_robot" not in env.cfg.events
    assert env.cfg.events["foot_friction"].params["friction_range"] == (0.6, 0.9)
    assert env.cfg.terminations["fell_over"].params["limit_angle"] == 1.0
    assert env.max_episode_length == round(4 / env.step_dt)
    # a term's other params and every other term keep the task's values
    reference = make_task_cfg("g1_walk_flat")
    assert env.cfg.rewards["track_lin_vel_xy_exp"].params["command_name"] == "twist"
    assert env.cfg.rewards["alive"].weight == reference.rewards["alive"].weight


def test_observation_overrides_change_the_built_env():
    plain = build_env(_cfg("g1_walk_flat"), num_envs=2)
    cfg = _cfg(
        "g1_walk_flat",
        "task.observations.policy.joint_vel.scale=0.05",
        "task.observations.policy.joint_vel.clip=[-50,50]",
        "task.observations.policy.joint_vel.noise.n_max=1.0",
        "task.observations.policy.base_ang_vel.history_length=3",
        "task.observations.critic.foot_height.enabled=false",
        "task.observations.critic.command.params.command_name=gait",
    )
    env = build_env(cfg, num_envs=2)
    policy, critic = env.cfg.observations["policy"].terms, env.cfg.observations["critic"].terms
    assert policy["joint_vel"].scale == 0.05 and policy["joint_vel"].clip == (-50.0, 50.0)
    assert (policy["joint_vel"].noise.n_min, policy["joint_vel"].noise.n_max) == (-1.5, 1.0)
    assert critic["joint_vel"].scale is None  # the critic's own copy of the term is untouched
    dims, plain_dims = env.observation_manager.group_obs_dim, plain.observation_manager.group_obs_dim
    assert dims["policy"] == plain_dims["policy"] + 2 * 3  # base_ang_vel: 3 frames of 3 instead of 1
    gait, twist = (plain.command_manager.command(name).shape[1] for name in ("gait", "twist"))
    assert dims["critic"] == plain_dims["critic"] - 2 + gait - twist  # foot_height (2 feet) gone
    assert critic["command"].params == {"command_name": "gait"}
    assert "foot_height" not in critic
    assert make_task_cfg("g1_walk_flat").observations["policy"].terms["joint_vel"].noise.n_max == 1.5


def test_nested_ranges_merge_key_by_key():
    env_cfg = make_env_cfg(
        _cfg("g1_motion_tracking", "task.events.push_robot.params.velocity_range.x=[-1,1]")
    )
    push = env_cfg.events["push_robot"].params["velocity_range"]
    reference = make_task_cfg("g1_motion_tracking").events["push_robot"].params["velocity_range"]
    assert push["x"] == (-1.0, 1.0)
    assert {k: v for k, v in push.items() if k != "x"} == {k: v for k, v in reference.items() if k != "x"}


def test_a_pattern_override_wins_over_the_tasks_own_per_joint_entries():
    # Per-joint dicts are {pattern: value}, first match wins: the override's entries must come first.
    def scales(*overrides: str) -> list[float]:
        env = build_env(_cfg("g1_walk_flat", *overrides), num_envs=1)
        try:
            return env.action_manager.get_term("joint_pos").scale.tolist()
        finally:
            env.close()

    task = scales()
    assert len(set(task)) > 1 and 0.5 not in task
    assert scales('task.actions.joint_pos.params.scale={".*": 0.5}') == [0.5] * len(task)
    one = scales('task.actions.joint_pos.params.scale={"left_hip_pitch_joint": 0.5}')
    names = build_env(_cfg("g1_walk_flat"), num_envs=1).action_manager.get_term("joint_pos").joint_names
    hip = names.index("left_hip_pitch_joint")
    assert one[hip] == 0.5 and one[:hip] + one[hip + 1 :] == task[:hip] + task[hip + 1 :]


def test_an_evaluations_pattern_wins_over_the_runs_when_merged():
    run = {"joint_pos": {"params": {"scale": {"left_.*": 0.3}}}}
    evaluation = {"joint_pos": {"params": {"scale": {".*": 0.5}}}}
    merged = merge_term_overrides(run, evaluation)
    assert list(merged["joint_pos"]["params"]["scale"].items()) == [(".*", 0.5), ("left_.*", 0.3)]
    assert run == {"joint_pos": {"params": {"scale": {"left_.*": 0.3}}}}  # inputs untouched


def test_resolved_overrides_round_trip_through_config_json(tmp_path):
    cfg = _cfg(
        "g1_motion_tracking",
        "task.rewards.action_rate_l2.weight=-0.05",
        "task.motion_file=motion_crawl_slope.npz",
    )
    path = tmp_path / "config.json"
    path.write_text(cfg.model_dump_json())
    again = TrainConfig.model_validate(json.loads(path.read_text()))
    assert again == cfg
    assert make_env_cfg(again).rewards["action_rate_l2"].weight == -0.05


def test_terrain_changes_reach_the_grid_and_round_trip_through_config_json(tmp_path):
    cfg = _cfg(
        "g1_walk_rough",
        "task.terrain.num_rows=4",
        "task.terrain.max_init_level=1",
        "task.terrain.difficulty_range=[0.2,0.6]",
        "task.terrain.types.stairs_up.proportion=0",
        "task.terrain.types.boxes.height_range=[0.05,0.1]",
    )
    grid = make_env_cfg(cfg).scene.terrain
    task_grid = make_task_cfg("g1_walk_rough").scene.terrain
    assert (grid.num_rows, grid.max_init_level, grid.difficulty_range) == (4, 1, (0.2, 0.6))
    assert grid.types["stairs_up"].proportion == 0 and grid.types["boxes"].height_range == (0.05, 0.1)
    assert grid.types["rough"] == task_grid.types["rough"] and grid.num_cols == task_grid.num_cols
    path = tmp_path / "config.json"
    path.write_text(cfg.model_dump_json())
    assert make_env_cfg(TrainConfig.model_validate(json.loads(path.read_text()))).scene.terrain == grid


@pytest.mark.parametrize(
    ("task", "override", "message"),
    [
        ("g1_walk_flat", "task.terrain.num_rows=4", r"task 'g1_walk_flat' has no terrain grid"),
        (
            "g1_walk_rough",
            "task.terrain.num_row=4",
            r"unknown fields \['num_row'\]; valid fields: \[.*'num_rows'",
        ),
        (
            "g1_walk_rough",
            "task.terrain.num_rows=3",
            r"max_init_level must be an int in .* = \[0, 2\], got 5",
        ),
        ("g1_walk_rough", "task.terrain.types.stair.proportion=1", r"unknown terrain types \['stair'\]"),
        ("g1_walk_rough", "task.terrain.types.boxes.num_boxes=-1", r"num_boxes must be an int >= 0"),
        ("g1_walk_rough", "task.terrain.size=inf", r"task.terrain.size must be a finite number"),
    ],
)
def test_bad_terrain_changes_name_the_problem(task, override, message):
    with pytest.raises(OverrideError, match=message):
        _cfg(task, override)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        (
            "task.rewards.no_such_term.weight=1",
            r"unknown term 'no_such_term'; valid terms: \[.*'action_rate_l2'",
        ),
        ("task.rewards.action_rate_l2.wieght=1", r"unknown keys \['wieght'\]; valid keys: \['weight'"),
        (
            "task.rewards.track_lin_vel_xy_exp.params.sdt=1",
            r"unknown params \['sdt'\]; valid params: \[.*'std'",
        ),
        ("task.rewards.action_rate_l2.weight=abc", "weight: expected a number, got 'abc'"),
        ("task.commands.twist.params.lin_vel_x=0.5", "lin_vel_x: expected a list"),
        ("task.commands.twist.params.lin_vel_x=[1,2,3]", "expected 2 values"),
        ("task.events.push_robot.enabled=maybe", "enabled: expected true or false"),
        ("task.events.push_robot.interval_range_s=[3,1]", "0 < low <= high"),
        ("task.episode_length_s=-1", "greater than 0"),
        ("task.motion_file=clip.npz", "tracks no motion clip"),
        ("task.rewardz.alive.weight=1", "valid keys there: name, motion_file"),
        (
            "task.observations.actor.joint_vel.scale=1",
            r"unknown group 'actor'; valid groups: \['critic', 'policy'\]",
        ),
        (
            "task.observations.policy.joint_velo.scale=1",
            r"unknown term 'joint_velo'; valid terms: \[.*'joint_vel'",
        ),
        ("task.observations.policy.joint_vel.weight=1", r"unknown keys \['weight'\]; valid keys: \['params'"),
        ("task.observations.policy.actions.noise.std=0.1", "actions.noise: the term has no noise to change"),
        (
            "task.observations.policy.joint_vel.noise.std=0.1",
            r"unknown fields \['std'\]; UniformNoiseCfg has \['n_max', 'n_min'\]",
        ),
        ("task.observations.policy.joint_vel.noise.n_max=-2", "needs n_min <= n_max"),
        ("task.observations.policy.joint_vel.history_length=1.5", "expected a whole number >= 0"),
        ("task.observations.policy.joint_vel.clip=[1,-1]", "low <= high"),
        ("task.observations.policy.joint_vel.clip=[1]", "clip: expected 2 values"),
        ("task.observations.policy.joint_vel.scale=abc", r"scale: expected a number or a list of numbers"),
        ("task.observations.policy.joint_vel.scale=true", r"scale: expected a number or a list of numbers"),
    ],
)
def test_bad_overrides_name_the_problem(override, message):
    with pytest.raises(OverrideError, match=message) as info:
        _cfg("g1_walk_flat", override)
    assert override.split("=")[0].split(".")[1] in str(info.value)


def test_a_group_with_every_term_disabled_is_refused():
    terms = make_task_cfg("g1_walk_flat").observations["policy"].terms
    off = [f"task.observations.policy.{name}.enabled=false" for name in terms]
    with pytest.raises(OverrideError, match="every term of the group is disabled; keep at least one"):
        _cfg("g1_walk_flat", *off)


def test_motion_file_by_clip_name_and_by_path(tmp_path):
    by_name = build_env(_cfg("g1_motion_tracking", "task.motion_file=motion_crawl_slope.npz"), num_envs=2)
    assert by_name.command_manager.get_term("motion").motion_file.name == "motion_crawl_slope.npz"
    clip = G1.motions_dir() / DEFAULT_MOTION_FILE
    copy = tmp_path / "my_clip.npz"
    shutil.copy(clip, copy)
    cfg = _cfg("g1_motion_tracking", f"task.motion_file={copy}")
    assert cfg.task.motion_file == str(copy.resolve())
    by_path = build_env(cfg, num_envs=2)
    assert by_path.command_manager.get_term("motion").motion_file == copy
    assert by_path.command_manager.get_term("motion").num_frames > 1


def test_unknown_motion_file_lists_the_clips():
    with pytest.raises(OverrideError, match=r"not found \(G1 asset clips: \[.*sub3_largebox_003_mj.npz"):
        _cfg("g1_motion_tracking", "task.motion_file=no_such_clip.npz")
