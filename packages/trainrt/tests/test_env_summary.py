"""The env's start-up summary: one line per manager, the full tables left to ``str(env)``."""

from __future__ import annotations

from managers_toy_scene import make_env, toy_cfg

from trainrt.envs.env_description import _name_list


def test_summary_has_one_line_per_manager_with_its_term_count_and_names():
    env = make_env(toy_cfg(metrics={}, curriculum={}))
    lines = env.summary().splitlines()
    assert lines[0] == str(env).splitlines()[0], "the same header as the full tables"
    assert lines[1:] == [
        "  action: 1 term: joint_pos",
        "  observation: 6 terms (policy 4, critic 2): joint_pos, joint_vel, actions, target, root",
        "  reward: 1 term: alive",
        "  termination: 1 term: time_out",
        "  event: 1 term: reset_root",
        "  command: 1 term: target",
        "  curriculum: 0 terms",
        "  metric: 0 terms",
    ]
    assert len(str(env).splitlines()) > len(lines), "str(env) keeps the full tables"


def test_summary_lines_fit_the_width_and_count_the_names_left_out():
    env = make_env(toy_cfg())
    lines = env.summary(width=48).splitlines()[1:]
    # a line runs past the width only to show its first name
    assert lines[1] == "  observation: 6 terms (policy 4, critic 2): joint_pos, +4 more"
    assert all(len(line) <= 48 for line in lines if not line.startswith("  observation"))
    names = [f"term_{i}" for i in range(10)]
    assert _name_list(names, 31) == "term_0, term_1, term_2, +7 more"
    assert _name_list(names, 30) == "term_0, term_1, +8 more"
    assert _name_list(names, 1000) == ", ".join(names)
    assert _name_list(["a_very_long_single_name"], 5) == "a_very_long_single_name", "one name always shows"


def test_the_summary_names_the_ground_the_task_adds():
    from types import SimpleNamespace

    from trainrt.envs.env_description import scene_line
    from trainrt.terrain import TerrainMeshCfg

    grid = SimpleNamespace(
        num_levels=10,
        tile_size=8.0,
        column_types=["flat", "rough", "rough", "stairs_up", "flat"],
        cfg=SimpleNamespace(max_init_level=5),
    )
    slope = TerrainMeshCfg(file="/clips/terrain_slope.obj", pos=(1.0, 0.0, 0.5))

    def env(terrain, meshes=()):
        return SimpleNamespace(
            terrain=terrain, cfg=SimpleNamespace(scene=SimpleNamespace(terrain_meshes=meshes))
        )

    assert scene_line(env(grid)) == (
        "  scene: terrain grid of 10 levels x 5 columns of 8 m tiles (flat 2, rough 2, stairs_up 1), first levels 0-5"
    )
    assert scene_line(env(None, (slope,))) == "  scene: mesh terrain_slope.obj at (1, 0, 0.5) in every world"
    assert scene_line(env(grid, (slope,))).count("; ") == 1
    assert scene_line(env(None)) is None  # the model's own floor: no line
    flat = make_env(toy_cfg(metrics={}, curriculum={}))
    assert not any(line.startswith("  scene:") for line in flat.summary().splitlines())
