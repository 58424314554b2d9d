"""Terrain in the env: the grid from the run seed in the model, every env on its tile, the level curriculum,
height scans against the generated heights, and the fail-closed errors (a toy floating box, CPU MuJoCo)."""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import mujoco
import pytest
import torch
from managers_toy_scene import TOY_XML, toy_cfg

import simcore
from simcore._src.capability import Capability, declared_capabilities
from simcore._src.mujoco_backend import MujocoBackend
from trainrt.envs import ManagerBasedRlEnv, SceneCfg
from trainrt.managers import CurriculumTermCfg, EventTermCfg, ObsGroupCfg, ObsTermCfg, TerminationTermCfg
from trainrt.mdp import ResetRootStateUniform
from trainrt.terrain import (
    FlatCfg,
    PyramidSlopeCfg,
    RandomRoughCfg,
    TerrainGridCfg,
    generate_terrain,
)
from trainrt.terrain.mdp import HeightScan, RootHeightAboveTerrain, TerrainLevels, terrain_out_of_bounds


def _without_floor(xml: str) -> str:
    spec = mujoco.MjSpec.from_string(xml)
    spec.delete(spec.geom("floor"))
    return spec.to_xml()


BOX_XML = _without_floor(TOY_XML)
"""The toy scene without its floor plane: the terrain, and ``load_model``'s floor below it, stand in."""

SLOPE = 0.2  # rise over run at every level (a fixed slope: the analytic height is known everywhere)
INIT_HEIGHT = 0.5
SCAN = {"size": (0.4, 0.2), "resolution": 0.1, "offset": 0.0, "clip": (-5.0, 5.0)}


def _grid(**changes) -> TerrainGridCfg:
    types = {
        "flat": FlatCfg(),
        "up": PyramidSlopeCfg(slope_range=(SLOPE, SLOPE), platform_width=0.4),
        "down": PyramidSlopeCfg(slope_range=(SLOPE, SLOPE), platform_width=0.4, inverted=True),
    }
    base = {
        "size": 2.0,
        "num_rows": 3,
        "num_cols": 3,
        "border_width": 0.5,
        "types": types,
        "difficulty_jitter": False,
        "max_init_level": 2,
    }
    return TerrainGridCfg(**{**base, **changes})


@pytest.fixture(scope="module")
def box_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("scene") / "box.xml"
    path.write_text(BOX_XML)
    return path


def _factory(path):
    def build(heightfields=()):
        low = min((float(f.heights.min()) for f in heightfields), default=1.0)
        return simcore.load_model(path, heightfields=heightfields, floor_height=low - 1.0)

    return build


def _cfg(path, grid=None, *, pose_range=None, curriculum=True, scan=True):
    cfg = toy_cfg()
    scene = SceneCfg(
        model_factory=_factory(path), bodies=("base",), init_root_height=INIT_HEIGHT, terrain=grid or _grid()
    )
    pose = (
        pose_range
        if pose_range is not None
        else {"x": (-0.1, 0.1), "y": (-0.1, 0.1), "yaw": (-math.pi, math.pi)}
    )
    events = {"reset_root": EventTermCfg(ResetRootStateUniform, "reset", params={"pose_range": pose})}
    observations = dict(cfg.observations)
    if scan:
        observations["scan"] = ObsGroupCfg({"heights": ObsTermCfg(HeightScan, params=dict(SCAN))})
    changes = {"scene": scene, "events": events, "observations": observations, "episode_length_s": 1.0}
    if curriculum:
        changes["curriculum"] = {
            "levels": CurriculumTermCfg(TerrainLevels, params={"command_name": "target"})
        }
    return dataclasses.replace(cfg, **changes)


def _env(path, grid=None, *, num_envs=6, seed=3, sim="mujoco", **kwargs) -> ManagerBasedRlEnv:
    return ManagerBasedRlEnv(_cfg(path, grid, **kwargs), sim=sim, num_envs=num_envs, device="cpu", seed=seed)


def _tile_corner(env, level: int, column: int) -> torch.Tensor:
    """World xy of a tile's first sample (its corner)."""
    cfg = env.terrain.cfg
    origin = env.terrain.curriculum.table[level, column]
    return origin[:2] - (cfg.tile_cells // 2) * cfg.horizontal_scale


# ------------------------------------------------------------------------------------------------- placement
def test_the_terrain_comes_from_the_run_seed_into_the_model(box_path):
    env = _env(box_path, _grid(types={"rough": RandomRoughCfg()}), curriculum=False, scan=False)
    model = env.backend.mj_model
    assert model.nhfield == 1 and model.hfield_nrow[0] * model.hfield_ncol[0] == math.prod(
        env.terrain.cfg.shape
    )
    expected = generate_terrain(dataclasses.replace(env.terrain.cfg, seed=3)).heights
    assert env.terrain.cfg.seed == 3  # the run seed
    low, scale = float(expected.min()), float(expected.max() - expected.min())
    data = torch.tensor(model.hfield_data).double().reshape(expected.shape) * model.hfield_size[0, 2] + low
    torch.testing.assert_close(data, expected.double(), atol=1e-6, rtol=0)
    again = _env(box_path, _grid(types={"rough": RandomRoughCfg()}), curriculum=False, scan=False)
    assert (again.backend.mj_model.hfield_data == model.hfield_data).all()
    other = _env(box_path, _grid(types={"rough": RandomRoughCfg()}), seed=4, curriculum=False, scan=False)
    assert not (other.backend.mj_model.hfield_data == model.hfield_data).all()
    assert scale > 0


def test_resets_start_every_env_on_its_tile_at_the_surface(box_path):
    pose = {"x": (-0.05, 0.05), "y": (-0.05, 0.05), "yaw": (-math.pi, math.pi)}
    env = _env(box_path, num_envs=9, pose_range=pose)
    env.reset()
    curriculum = env.terrain.curriculum
    assert curriculum.columns.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    origins = curriculum.origins()
    root = env.robot.root_pos_w
    assert ((root[:, :2] - origins[:, :2]).abs() <= 0.05 + 1e-6).all()  # the pose range's xy offset
    torch.testing.assert_close(root[:, 2], origins[:, 2] + INIT_HEIGHT)
    # the origin is the tile centre's surface: the platform of a slope of SLOPE over a run of 0.8 m
    run = (2.0 - 0.4) / 2
    kinds = {"flat": 0.0, "up": SLOPE * run, "down": -SLOPE * run}
    for row, column in enumerate(curriculum.columns.tolist()):
        want = kinds[env.terrain.column_types[column]]
        assert origins[row, 2].item() == pytest.approx(want, abs=1e-6)
    # and the rays under the root (0.1 m around it, on the 0.4 m platform) meet that surface
    under = RootHeightAboveTerrain(ObsTermCfg(RootHeightAboveTerrain), env)
    torch.testing.assert_close(under(env), torch.full((9,), INIT_HEIGHT), atol=1e-4, rtol=0)


def test_the_levels_follow_the_seed_and_the_tiles_follow_the_levels(box_path):
    one, two = _env(box_path, num_envs=8), _env(box_path, num_envs=8)
    assert torch.equal(one.terrain.curriculum.levels, two.terrain.curriculum.levels)
    one.terrain.assign_tiles(torch.full((8,), 1), torch.full((8,), 2))
    one.reset()
    torch.testing.assert_close(one.robot.root_pos_w[:, 2], torch.full((8,), -SLOPE * 0.8 + INIT_HEIGHT))
    with pytest.raises(ValueError, match=r"levels must lie in \[0, 2\]"):
        one.terrain.assign_tiles(torch.full((8,), 3), torch.zeros(8, dtype=torch.long))


# ------------------------------------------------------------------------------------------------ curriculum
def _end_episodes(env, walked: torch.Tensor, command_speed: torch.Tensor) -> None:
    """Put each root ``walked`` m along x from its tile's centre, command ``command_speed`` m/s, and run the
    curriculum on every row as at an episode end."""
    qpos = env.backend.qpos.clone()
    origins = env.terrain.curriculum.origins()
    qpos[:, 0] = (origins[:, 0] + walked).to(qpos.dtype)
    qpos[:, 1] = origins[:, 1].to(qpos.dtype)
    env.backend.qpos.copy_(qpos)
    env.backend.forward()  # outside the env's step and reset every read recomputes: no bump needed
    command = env.command_manager.command("target")
    command.copy_(torch.stack((command_speed, torch.zeros_like(command_speed)), dim=1))
    env.episode_length_buf.fill_(10)
    env.curriculum_manager.compute(torch.ones(env.num_envs, dtype=torch.bool))


def test_the_curriculum_moves_levels_by_the_distance_walked_against_the_command(box_path):
    env = _env(box_path, num_envs=4)
    env.reset()
    env.terrain.assign_tiles(torch.tensor([1, 1, 1, 0]), torch.zeros(4, dtype=torch.long))
    # episode 1 s: a command of 1 m/s asks for 1 m; a tile is 2 m (moving up needs more than 1 m)
    walked = torch.tensor([1.2, 0.7, 0.3, 0.2])
    speed = torch.tensor([1.0, 1.0, 1.0, 1.0])
    _end_episodes(env, walked, speed)
    # > half a tile: up; between: stays; < half the command's distance: down; at level 0: stays (clamped)
    assert env.terrain.curriculum.levels.tolist() == [2, 1, 0, 0]
    _end_episodes(env, torch.tensor([1.5, 0.0, 0.0, 0.0]), torch.tensor([0.0, 0.0, 0.0, 0.0]))
    assert env.terrain.curriculum.levels.tolist() == [
        2,
        1,
        0,
        0,
    ]  # the top stays the top; a standing command never moves down
    stats = env.episode_stats()
    assert stats["Curriculum/levels/mean_level"] == pytest.approx(0.75)
    assert [stats[f"Curriculum/levels/level_{i}"] for i in range(3)] == pytest.approx([0.5, 0.25, 0.25])


def test_the_curriculum_reports_each_terrain_types_mean_level(box_path):
    env = _env(box_path, num_envs=6)
    env.reset()
    assert env.terrain.column_types == ("flat", "up", "down")
    env.terrain.assign_tiles(torch.tensor([2, 0, 1, 2, 1, 1]), torch.tensor([0, 0, 1, 1, 2, 0]))
    env.curriculum_manager.compute(torch.zeros(6, dtype=torch.bool))  # no episode ended: the levels stay
    stats = env.episode_stats()
    per_type = [stats[f"Curriculum/levels/mean_level/{name}"] for name in ("flat", "up", "down")]
    assert per_type == pytest.approx([(2 + 0 + 1) / 3, (1 + 2) / 2, 1.0])
    assert stats["Curriculum/levels/mean_level"] == pytest.approx(7 / 6)


def test_rows_that_never_stepped_keep_their_level(box_path):
    env = _env(box_path, num_envs=4)
    before = env.terrain.curriculum.levels.clone()
    env.reset()  # the first reset: the roots were nowhere near their tiles
    env.reset()
    assert torch.equal(env.terrain.curriculum.levels, before)


# ------------------------------------------------------------------------------------------------ height scan
def _put_root(env, xy: torch.Tensor, z: float) -> None:
    qpos = env.backend.qpos.clone()
    qpos[:, 0:2] = xy.to(qpos.dtype)
    qpos[:, 2] = z
    qpos[:, 3:7] = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=qpos.dtype)
    env.backend.qpos.copy_(qpos)
    env.backend.forward()  # outside the env's step and reset every read recomputes: no bump needed


@pytest.mark.parametrize("sim", ["mujoco", "mjwarp"])
def test_a_height_scan_reads_the_known_heights_of_a_slope(box_path, sim):
    env = _env(box_path, num_envs=2, sim=sim)
    env.reset()
    up = env.terrain.column_types.index("up")
    # over the slope's face that rises along y from the tile's edge: height = SLOPE * (distance from the edge)
    corner = _tile_corner(env, 1, up)
    centre = corner + torch.tensor([1.0, 0.35])
    _put_root(env, centre.expand(2, 2), z=1.5)
    scan = HeightScan(ObsTermCfg(HeightScan, params=dict(SCAN)), env)(env)
    assert scan.shape == (2, 5 * 3)  # x fastest: ray iy * 5 + ix
    ys = torch.tensor([0.25, 0.35, 0.45]).repeat_interleave(5)
    torch.testing.assert_close(scan, (1.5 - SLOPE * ys).expand(2, -1).float(), atol=2e-4, rtol=0)
    # and over flat ground it reads the body's height, clipped
    flat = _tile_corner(env, 0, env.terrain.column_types.index("flat")) + 1.0
    _put_root(env, flat.expand(2, 2), z=1.5)
    clipped = HeightScan(ObsTermCfg(HeightScan, params={**SCAN, "clip": (-1.0, 1.0), "offset": 0.2}), env)
    torch.testing.assert_close(clipped(env), torch.full((2, 15), 1.0))
    low = _tile_corner(env, 0, env.terrain.column_types.index("flat")) + 1.0
    _put_root(env, low.expand(2, 2), z=0.6)
    torch.testing.assert_close(clipped(env), torch.full((2, 15), 0.4), atol=1e-5, rtol=0)


def test_terms_with_the_same_rays_share_one_cast(box_path):
    env = _env(box_path, num_envs=2)
    a = HeightScan(ObsTermCfg(HeightScan, params=dict(SCAN)), env)
    b = HeightScan(ObsTermCfg(HeightScan, params=dict(SCAN)), env)
    c = HeightScan(ObsTermCfg(HeightScan, params={**SCAN, "resolution": 0.2}), env)
    assert a.rays is b.rays and a.rays is not c.rays
    assert env.obs_dims["scan"] == 15


# ---------------------------------------------------------------------------------------------- fail closed
class _NoTerrainBackend(MujocoBackend):
    capabilities: ClassVar[frozenset[Capability]] = declared_capabilities(MujocoBackend) - {
        Capability.HEIGHTFIELD,
        Capability.RAY_CAST,
    }


def _no_terrain_backends(monkeypatch):
    def make(name, model, config, require=()):
        return _NoTerrainBackend(model, config, require=require)

    monkeypatch.setattr(simcore, "make_backend", make)


def test_a_backend_without_heightfields_refuses_a_terrain(box_path, monkeypatch):
    _no_terrain_backends(monkeypatch)
    with pytest.raises(
        NotImplementedError, match=r"scene.terrain needs a backend that declares Capability.HEIGHTFIELD"
    ):
        _env(box_path, scan=False)


def test_a_backend_without_ray_casts_refuses_a_height_scan(box_path, monkeypatch):
    _no_terrain_backends(monkeypatch)
    cfg = _cfg(box_path)
    cfg = dataclasses.replace(cfg, scene=dataclasses.replace(cfg.scene, terrain=None), curriculum={})
    with pytest.raises(
        NotImplementedError,
        match=r"HeightScan casts rays: it needs a backend that declares Capability.RAY_CAST",
    ):
        ManagerBasedRlEnv(cfg, sim="mujoco", num_envs=2, device="cpu")


def test_bad_terrain_input_is_named_at_build(box_path):
    with pytest.raises(
        ValueError, match=r"max_init_level must be an int in \[0, num_rows - 1\] = \[0, 2\], got 3"
    ):
        _grid(max_init_level=3)
    with pytest.raises(ValueError, match="over the limit of MAX_HEIGHTFIELD_CELLS"):
        _grid(size=100.0, num_rows=30, num_cols=30)
    with pytest.raises(ValueError, match=r"SceneCfg\.terrain must be a trainrt\.terrain\.TerrainGridCfg"):
        SceneCfg(model_factory=_factory(box_path), terrain={"size": 2.0})
    cfg = _cfg(box_path)
    plain = dataclasses.replace(cfg, scene=dataclasses.replace(cfg.scene, model_factory=lambda: None))
    with pytest.raises(ValueError, match=r"SceneCfg\.terrain needs a model_factory that takes heightfields="):
        ManagerBasedRlEnv(plain, sim="mujoco", num_envs=2, device="cpu")
    flat = dataclasses.replace(cfg, scene=dataclasses.replace(cfg.scene, terrain=None))
    with pytest.raises(ValueError, match=r"TerrainLevels needs a terrain: set SceneCfg\.terrain"):
        ManagerBasedRlEnv(flat, sim="mujoco", num_envs=2, device="cpu")
    edge = {"edge": TerminationTermCfg(terrain_out_of_bounds, time_out=True)}
    flat = dataclasses.replace(flat, curriculum={}, terminations=edge)
    with pytest.raises(ValueError, match=r"terrain_out_of_bounds needs a terrain"):
        ManagerBasedRlEnv(flat, sim="mujoco", num_envs=2, device="cpu").check_term_outputs()


MESH_XML = BOX_XML.replace(
    "<worldbody>",
    '<asset><mesh name="slope" file="terrain_slope.obj"/></asset><worldbody><geom name="slope" type="mesh" mesh="slope"/>',
)


def test_a_missing_terrain_mesh_file_is_named_when_the_env_is_built(tmp_path):
    path = tmp_path / "mesh.xml"
    path.write_text(MESH_XML)
    cfg = _cfg(path, scan=False, curriculum=False)
    scene = SceneCfg(
        model_factory=lambda: simcore.load_model(path, collision_meshes=True),
        bodies=("base",),
        init_root_height=INIT_HEIGHT,
    )
    with pytest.raises(ValueError, match=r"Error opening file 'terrain_slope\.obj'.*its file must exist"):
        ManagerBasedRlEnv(dataclasses.replace(cfg, scene=scene), sim="mujoco", num_envs=2, device="cpu")


def test_the_levels_are_env_state_a_checkpoint_carries(box_path):
    env = _env(box_path, num_envs=4)
    env.reset()
    env.terrain.assign_tiles(torch.tensor([2, 0, 1, 2]), torch.tensor([1, 1, 0, 2]))
    state = env.state_dict()
    assert torch.equal(state["terrain.curriculum.levels"], torch.tensor([2, 0, 1, 2]))
    other = _env(box_path, num_envs=4)
    other.load_state_dict(state)
    assert torch.equal(other.terrain.curriculum.levels, env.terrain.curriculum.levels)
    assert torch.equal(other.terrain.curriculum.columns, env.terrain.curriculum.columns)


def test_an_env_at_the_grid_edge_is_out_of_bounds(box_path):
    env = _env(box_path, num_envs=2)
    env.reset()
    hx, hy = env.terrain.half_extent  # 3 tiles of 2 m and a 0.5 m border: 3.5 m
    assert (hx, hy) == pytest.approx((3.5, 3.5))
    _put_root(env, torch.tensor([[hx - 0.5, 0.0], [0.3, -(hy - 1.2)]]), z=1.0)
    assert terrain_out_of_bounds(env).tolist() == [True, False]  # within 1 m of the edge; 1.2 m from it
