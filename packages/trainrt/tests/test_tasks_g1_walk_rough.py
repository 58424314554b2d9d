"""``g1_walk_rough``: the G1 walk on the terrain grid builds and steps on CPU MuJoCo, its evaluation puts each
terrain type's rows on their tiles at the middle level and reports falls per type, and a tiny training run
logs the curriculum's levels into ``run_summary.json``."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch
from g1_assets import require_g1_assets
from test_runner_train import tiny_config

from trainrt.envs import ManagerBasedRlEnv
from trainrt.mdp.math import quat_apply
from trainrt.runner import OffPolicyRunner
from trainrt.runner.build import make_env_cfg
from trainrt.runner.evaluate import evaluate_task, format_eval_table
from trainrt.tasks import make_task_cfg, task_spec
from trainrt.tasks.velocity.rough_env_cfg import ROUGH_NCONMAX, ROUGH_TERRAIN
from trainrt.tasks.velocity.rough_evaluation import ROUGH_EVAL_COMMANDS

TYPES = tuple(ROUGH_TERRAIN.types)


@pytest.fixture(autouse=True)
def _g1_assets():
    require_g1_assets()


def test_the_rough_walk_builds_and_steps_with_height_scans_and_a_curriculum():
    cfg = make_task_cfg("g1_walk_rough")
    flat = make_task_cfg("g1_walk_flat")
    assert flat.scene.terrain is None and cfg.scene.terrain == ROUGH_TERRAIN
    env = ManagerBasedRlEnv(cfg, sim="mujoco", num_envs=2, device="cpu", seed=0)
    assert env.backend.nconmax == ROUGH_NCONMAX and flat.scene.nconmax is None  # rough ground touches more
    scan = 17 * 11  # a 1.6 m x 1.0 m grid, 0.1 m apart
    flat_env_dims = {"policy": 98, "critic": 106}
    assert env.obs_dims == {group: dim + scan for group, dim in flat_env_dims.items()}
    env.reset()
    levels = env.terrain.curriculum.levels
    assert ((levels >= 0) & (levels <= ROUGH_TERRAIN.max_init_level)).all()
    start = env.robot.root_pos_w.clone()
    for _ in range(3):
        result = env.step(torch.zeros(env.num_envs, env.num_actions))
    assert not result.terminated.any() and result.valid.all()
    assert ((env.robot.root_pos_w[:, :2] - start[:, :2]).norm(dim=1) < 0.2).all()  # standing on its tile
    env.check_term_outputs()
    stats = env.episode_stats()
    assert stats["Curriculum/terrain_levels/mean_level"] == pytest.approx(levels.float().mean().item())


class _Zeros:
    def __init__(self, env):
        self.num_actions = env.num_actions

    def act(self, obs, deterministic=True):
        return torch.zeros(next(iter(obs.values())).shape[0], self.num_actions)


def test_the_evaluation_runs_every_terrain_type_at_its_middle_level(tmp_path):
    spec = task_spec("g1_walk_rough").evaluation_spec()
    names = [s.name for s in spec.scenarios]
    assert names == [f"{t}/{c}" for t in TYPES for c in ROUGH_EVAL_COMMANDS]
    assert spec.horizon is not None and "horizon_s" in spec.options
    cfg = tiny_config(tmp_path / "run", "sac", "g1_walk_rough")
    result = evaluate_task(cfg, {}, num_envs=2, steps=3, policy=_Zeros, log=lambda line: None)
    assert set(result["terrain"]) == set(TYPES)
    assert (
        result["grid"]["seed"] == cfg.training.seed and result["grid"]["num_levels"] == ROUGH_TERRAIN.num_rows
    )
    assert all(r["level"] == ROUGH_TERRAIN.num_rows // 2 for r in result["terrain"].values())
    assert all(0.0 <= r["failed_fraction"] <= 1.0 for r in result["terrain"].values())
    assert list(result["commands"]) == names
    first = result["commands"][names[0]]
    assert first["terrain"] == TYPES[0] and first["command"]["lin_vel_x"] == 0.5 and first["num_envs"] == 2
    assert result["flat_lin_vel_error_xy"] == pytest.approx(
        sum(result["commands"][f"flat/{c}"]["lin_vel_error_xy"] for c in ROUGH_EVAL_COMMANDS) / 2
    )
    shown = {"algo": "sac", "task": "g1_walk_rough", "iteration": 1, "sim": "mujoco", "trained_sim": "mujoco"}
    table = format_eval_table({**result, **shown})
    flat_error = result["flat_lin_vel_error_xy"]
    assert (
        f"per terrain type, every row at difficulty 0.50-0.60 (flat ground: lin vel err {flat_error:.3f} m/s)"
        in table
    )
    assert all(f"| {name} " in table for name in TYPES)
    assert result["grid"]["difficulty_range"] == pytest.approx([0.5, 0.6])  # every row like the middle level


def test_the_evaluation_setup_puts_each_block_on_its_type_at_the_middle_level(tmp_path):
    spec = task_spec("g1_walk_rough").evaluation_spec()
    cfg = spec.config(tiny_config(tmp_path / "run", "sac", "g1_walk_rough"))
    from trainrt.runner.build import build_env

    chosen = spec.select([f"{t}/forward_1.0" for t in ("stairs_up", "slope_down")])
    env = build_env(cfg, num_envs=2 * len(chosen))
    env.reset()
    spec.setup(env, chosen, 2)
    terrain = env.terrain
    assert terrain.curriculum.levels.tolist() == [5, 5, 5, 5]
    types = [terrain.column_types[c] for c in terrain.curriculum.columns.tolist()]
    assert types == ["stairs_up", "stairs_up", "slope_down", "slope_down"]
    assert terrain.curriculum.columns[0] != terrain.curriculum.columns[1]  # a block spreads over its columns
    origins = terrain.curriculum.origins()
    assert ((env.robot.root_pos_w[:, :2] - origins[:, :2]).abs() <= 0.5 + 1e-5).all()
    torch.testing.assert_close(env.command_manager.command("twist")[:, 0], torch.ones(4))
    # a 20 m walk stays on its type at the middle level: every row of the grid is drawn like the training
    # grid's middle level, and every env faces +y, along its column (rows run along y)
    low, high = ROUGH_TERRAIN.level_difficulties(ROUGH_TERRAIN.num_rows // 2)
    assert (low, high) == (0.5, 0.6)
    assert ((terrain.difficulties >= low) & (terrain.difficulties < high)).all()
    forward = quat_apply(env.robot.root_quat_w, torch.tensor([[1.0, 0.0, 0.0]]).expand(4, 3))
    torch.testing.assert_close(forward, torch.tensor([[0.0, 1.0, 0.0]]).expand(4, 3), atol=1e-5, rtol=0)
    # the training run's own grid and headings are the task's
    trained = make_env_cfg(tiny_config(tmp_path / "run2", "sac", "g1_walk_rough"))
    assert trained.scene.terrain == ROUGH_TERRAIN
    assert trained.events["reset_base"].params["pose_range"]["yaw"] == (-math.pi, math.pi)


def test_a_tiny_rough_run_logs_the_terrain_levels_in_its_summary(tmp_path):
    run_dir = tmp_path / "rough"
    lines: list[str] = []
    summary = OffPolicyRunner(tiny_config(run_dir, "sac", "g1_walk_rough"), log=lines.append).run()
    assert summary.status == "completed"
    stats = json.loads((run_dir / "run_summary.json").read_text())["episode_statistics"]
    shares = [stats[f"Curriculum/terrain_levels/level_{i}"] for i in range(ROUGH_TERRAIN.num_rows)]
    assert sum(shares) == pytest.approx(1.0)
    mean = sum(i * share for i, share in enumerate(shares))
    assert stats["Curriculum/terrain_levels/mean_level"] == pytest.approx(mean)
    assert all(share == 0.0 for share in shares[ROUGH_TERRAIN.max_init_level + 1 :])
    rows = [row for text in lines for row in text.splitlines() if row.startswith("curriculum")]
    assert rows and "terrain_levels/mean_level" in rows[0]  # the console block's curriculum row
    # the shares and each type's mean level stay out of the console: the summary keeps them
    assert not any("level_0" in row or "mean_level/" in row for text in lines for row in text.splitlines())
    assert {f"Curriculum/terrain_levels/mean_level/{t}" for t in TYPES} <= set(stats)


def test_the_physics_benchmark_steps_the_rough_walk_on_its_terrain(tmp_path):
    from trainrt.runner.bench import physics_backend

    backend = physics_backend(tiny_config(tmp_path / "run", "sac", "g1_walk_rough"))
    assert backend.mj_model.nhfield > 1 and backend.nconmax == ROUGH_NCONMAX  # the grid in simcore's blocks
    backend.step()
    assert torch.isfinite(backend.qpos).all()


def _rough_with_levels_out_of_range():
    cfg = make_task_cfg("g1_walk_rough")
    cfg.scene.terrain = dataclasses.replace(cfg.scene.terrain, max_init_level=ROUGH_TERRAIN.num_rows)
    return cfg


def test_a_terrain_that_cannot_be_built_is_refused_before_the_run_directory_exists(tmp_path):
    from trainrt.config import TaskSection
    from trainrt.tasks.registry import register_task, unregister_task

    register_task(
        "rough_bad_levels",
        env_cfg=_rough_with_levels_out_of_range,
        presets={"sac": "trainrt.tasks.g1_walk_rough.presets:sac_g1_walk_rough"},
        evaluation="trainrt.tasks.velocity.rough_evaluation:rough_walk_evaluation",
    )
    try:
        run_dir = tmp_path / "run"
        cfg = tiny_config(run_dir, "sac", "g1_walk_rough")
        cfg = cfg.model_copy(update={"task": TaskSection(name="rough_bad_levels")})
        with pytest.raises(
            ValueError, match=r"max_init_level must be an int in \[0, num_rows - 1\] = \[0, 9\]"
        ):
            OffPolicyRunner(cfg, log=lambda line: None).run()
        assert not run_dir.exists()
    finally:
        unregister_task("rough_bad_levels")


@pytest.mark.slow
def test_random_actions_on_the_whole_grid_under_mujoco_warp_never_throw_a_robot():
    """The rough walk's grid is 180 m by 100 m. MuJoCo Warp (float32) once gave a G1 foot resting on flat ground
    68 m from the field's centre a contact 5.6 m deep, throwing the robot at hundreds of rad/s within one step;
    simcore now splits the field into blocks of at most ``simcore.HEIGHTFIELD_BLOCK_M``. With one block this
    test fails at the second step (a velocity of 368 on Warp's CPU device, these seeds); falling robots stay
    near 30. CPU MuJoCo (float64) never threw one."""
    import simcore

    cfg = make_task_cfg("g1_walk_rough")
    env = ManagerBasedRlEnv(cfg, sim="mjwarp", num_envs=32, device="cpu", seed=1)
    terrain = env.backend.mj_model
    blocks = [
        terrain.geom(g).name for g in range(terrain.ngeom) if terrain.geom_type[g] == 1
    ]  # mjGEOM_HFIELD
    assert len(blocks) > 1 and all(name.startswith("terrain_") for name in blocks)
    assert all(size <= simcore.HEIGHTFIELD_BLOCK_M / 2 + 1e-6 for size in terrain.hfield_size[:, :2].ravel())
    env.reset()
    generator = torch.Generator().manual_seed(0)
    fastest = 0.0
    for _ in range(45):
        action = torch.rand((env.num_envs, env.num_actions), generator=generator) * 2 - 1
        env.step(action)
        fastest = max(fastest, float(env.backend.state_tensors()["qvel"].abs().max()))
    assert fastest < 100.0, (
        f"a robot was thrown: a joint or root velocity reached {fastest:.0f}"
    )  # ~30 falling
    assert int(env.nonfinite_resets) == 0
