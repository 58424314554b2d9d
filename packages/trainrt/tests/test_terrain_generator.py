"""Terrain tiles, the grid that holds them, its validation and its heightfield in a CPU MuJoCo scene."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

import simcore
from trainrt.terrain import (
    MAX_HEIGHTFIELD_CELLS,
    TERRAIN_FUNCTIONS,
    DiscreteBoxesCfg,
    FlatCfg,
    PyramidSlopeCfg,
    PyramidStairsCfg,
    RandomRoughCfg,
    TerrainGridCfg,
    column_types,
    discrete_boxes_tile,
    flat_tile,
    generate_terrain,
    grid_with_changes,
    pyramid_slope_tile,
    pyramid_stairs_tile,
    random_rough_tile,
)

HS = 0.1
CELLS = 40  # a 4 m tile


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ----------------------------------------------------------------------------------------------- tile functions
@pytest.mark.parametrize("difficulty", [0.0, 1.0])
def test_flat_is_zero(difficulty):
    heights = flat_tile(FlatCfg(), difficulty, CELLS, HS, _gen())
    assert heights.shape == (CELLS, CELLS) and heights.dtype == torch.float32
    assert torch.count_nonzero(heights) == 0


@pytest.mark.parametrize("difficulty", [0.0, 1.0])
def test_random_rough_stays_on_its_steps_within_its_range(difficulty):
    cfg = RandomRoughCfg(noise_range=(-0.03, 0.05), noise_step=0.01)
    heights = random_rough_tile(cfg, difficulty, CELLS, HS, _gen())
    assert heights.shape == (CELLS, CELLS)
    assert heights.min() >= -0.03 - 1e-6 and heights.max() <= 0.05 + 1e-6
    steps = (heights.double() + 0.03) / 0.01
    torch.testing.assert_close(steps, steps.round(), atol=1e-5, rtol=0)
    assert len(torch.unique(steps.round())) == 9  # every level of 1600 draws shows up
    assert heights.min() == pytest.approx(-0.03) and heights.max() == pytest.approx(0.05)


@pytest.mark.parametrize(("difficulty", "slope"), [(0.0, 0.1), (1.0, 0.5)])
@pytest.mark.parametrize("inverted", [False, True])
def test_pyramid_slope_heights(difficulty, slope, inverted):
    cfg = PyramidSlopeCfg(slope_range=(0.1, 0.5), platform_width=1.0, inverted=inverted)
    heights = pyramid_slope_tile(cfg, difficulty, CELLS, HS, _gen())
    sign = -1.0 if inverted else 1.0
    peak = slope * (4.0 - 1.0) / 2  # slope * (half tile - half platform)
    assert heights.shape == (CELLS, CELLS)
    assert (sign * heights).max().item() == pytest.approx(peak, abs=1e-6)
    assert heights[CELLS // 2, CELLS // 2].item() == pytest.approx(sign * peak, abs=1e-6)
    assert torch.count_nonzero(heights[0]) == 0 and torch.count_nonzero(heights[:, 0]) == 0  # 0 at the edge
    assert heights[5, 20].item() == pytest.approx(sign * slope * 0.5, abs=1e-6)  # 0.5 m in: rises by slope


def test_pyramid_slope_without_platform_peaks_at_slope_times_half_tile():
    heights = pyramid_slope_tile(
        PyramidSlopeCfg(slope_range=(0.3, 0.3), platform_width=0.0), 1.0, CELLS, HS, _gen()
    )
    assert heights.max().item() == pytest.approx(0.3 * 2.0, abs=1e-6)


@pytest.mark.parametrize(("difficulty", "step"), [(0.0, 0.05), (1.0, 0.2)])
@pytest.mark.parametrize("inverted", [False, True])
def test_pyramid_stairs_steps(difficulty, step, inverted):
    cfg = PyramidStairsCfg(
        step_height_range=(0.05, 0.2), step_width=0.5, platform_width=1.0, inverted=inverted
    )
    heights = pyramid_stairs_tile(cfg, difficulty, CELLS, HS, _gen())
    sign = -1.0 if inverted else 1.0
    assert heights.shape == (CELLS, CELLS)
    profile = sign * heights[CELLS // 2, : CELLS // 2 + 1].double()  # edge to centre along x
    levels = torch.unique(profile)
    torch.testing.assert_close(torch.diff(levels), torch.full((len(levels) - 1,), step, dtype=torch.float64))
    # (4 m - 1 m platform) / 2 / 0.5 m = 3 steps; the platform keeps the top
    assert profile.max().item() == pytest.approx(3 * step) and profile[0].item() == 0.0
    assert torch.all(profile[:5] == 0) and profile[5].item() == pytest.approx(step)  # 5 cells = 0.5 m a step
    assert heights[15:26, 15:26].unique().numel() == 1  # a flat platform of at least 1 m


@pytest.mark.parametrize(("difficulty", "height"), [(0.0, 0.02), (1.0, 0.15)])
def test_discrete_boxes_heights_and_platform(difficulty, height):
    cfg = DiscreteBoxesCfg(
        height_range=(0.02, 0.15), width_range=(0.3, 0.6), num_boxes=30, platform_width=1.0
    )
    heights = discrete_boxes_tile(cfg, difficulty, CELLS, HS, _gen())
    assert heights.shape == (CELLS, CELLS)
    values = torch.unique(heights).tolist()
    assert values == pytest.approx([-height, 0.0, height])
    assert heights.abs().max().item() == pytest.approx(height)
    assert torch.count_nonzero(heights[15:26, 15:26]) == 0  # the centre platform stays flat
    assert (heights > 0).any() and (heights < 0).any()


def test_every_cfg_kind_has_a_tile_function():
    kinds = {c.kind for c in (FlatCfg, RandomRoughCfg, PyramidSlopeCfg, PyramidStairsCfg, DiscreteBoxesCfg)}
    assert kinds == set(TERRAIN_FUNCTIONS)


# ----------------------------------------------------------------------------------------------- grid
def _grid(**kwargs) -> TerrainGridCfg:
    base = dict(
        size=2.0,
        num_rows=3,
        num_cols=4,
        horizontal_scale=0.1,
        vertical_scale=0.005,
        border_width=1.0,
        types={"stairs": PyramidStairsCfg(proportion=1.0), "rough": RandomRoughCfg(proportion=1.0)},
        seed=3,
    )
    base.update(kwargs)
    return TerrainGridCfg(**base)


def test_grid_shape_border_and_origins():
    cfg = _grid()
    terrain = generate_terrain(cfg)
    nrow, ncol = 3 * 20 + 2 * 10 + 1, 4 * 20 + 2 * 10 + 1
    assert terrain.heights.shape == (nrow, ncol) == cfg.shape and terrain.heights.dtype == torch.float32
    h = terrain.heights
    for border in (h[:10], h[-11:], h[:, :10], h[:, -11:]):
        assert torch.count_nonzero(border) == 0
    assert terrain.origins.shape == (3, 4, 3)
    # the field is centred on the origin, samples 0.1 m apart: tile (i, j)'s centre lies at the sample
    # 10 + 20 * index + 10 along each axis
    half_x, half_y = (ncol - 1) * 0.1 / 2, (nrow - 1) * 0.1 / 2
    assert terrain.heightfield.half_extent == pytest.approx((half_x, half_y))
    for i in range(3):
        for j in range(4):
            r, c = 20 + 20 * i, 20 + 20 * j
            expected = (c * 0.1 - half_x, r * 0.1 - half_y, h[r, c].item())
            assert terrain.origins[i, j].tolist() == pytest.approx(expected, abs=1e-5)
    # stairs columns spawn on their platform: the surface height there
    assert terrain.column_types == ("stairs", "stairs", "rough", "rough")
    assert (terrain.origins[:, :2, 2] > 0).all()
    heights = terrain.heightfield.heights
    assert heights.shape == (nrow, ncol) and heights[20, 20] == pytest.approx(h[20, 20].item())


def test_grid_heights_are_multiples_of_the_vertical_scale():
    terrain = generate_terrain(_grid(vertical_scale=0.02))
    steps = terrain.heights.double() / 0.02
    torch.testing.assert_close(steps, steps.round(), atol=1e-4, rtol=0)


def test_rows_grow_in_difficulty():
    terrain = generate_terrain(_grid(types={"stairs": PyramidStairsCfg(step_height_range=(0.0, 0.2))}))
    d = terrain.difficulties
    assert d.shape == (3,) and torch.all(torch.diff(d) > 0)
    assert torch.all((d >= torch.arange(3) / 3) & (d < (torch.arange(3) + 1) / 3))
    fixed = generate_terrain(_grid(difficulty_jitter=False, types={"stairs": PyramidStairsCfg()}))
    assert fixed.difficulties.tolist() == pytest.approx([0.0, 0.5, 1.0])
    platform = fixed.origins[:, 0, 2]
    # 2 m tile, 1 m platform, 0.3 m steps: one step, of 0.05 / 0.125 / 0.2 m
    assert platform.tolist() == pytest.approx([0.05, 0.125, 0.2], abs=1e-6)


@pytest.mark.parametrize("jitter", [True, False])
def test_a_difficulty_range_draws_every_row_like_one_level(jitter):
    """``level_difficulties(k)`` as the ``difficulty_range``: each row at the difficulty row ``k`` of the full
    grid is drawn at (inside its band with jitter, exactly without), so every tile is like that level's."""
    stairs = {"stairs": PyramidStairsCfg(step_height_range=(0.0, 0.2))}
    full = _grid(num_rows=4, difficulty_jitter=jitter, types=stairs)
    low, high = full.level_difficulties(2)
    assert (low, high) == ((0.5, 0.75) if jitter else pytest.approx((2 / 3, 2 / 3)))
    level = generate_terrain(dataclasses.replace(full, difficulty_range=(low, high)))
    d = level.difficulties
    if jitter:
        assert torch.all((d >= low) & (d < high)) and torch.all(torch.diff(d) > 0)
    else:
        assert d.tolist() == pytest.approx([2 / 3] * 4)
        # every row's stairs are the full grid's row 2: the same platform height
        reference = generate_terrain(full).origins[2, 0, 2]
        assert level.origins[:, 0, 2].tolist() == pytest.approx([float(reference)] * 4, abs=1e-6)
    with pytest.raises(ValueError, match=r"level must be an int in \[0, 3\], got 4"):
        full.level_difficulties(4)


def test_grid_changes_reach_the_grid_and_its_types_and_name_what_is_valid():
    grid = _grid(types={"a": FlatCfg(proportion=0.5), "s": PyramidStairsCfg()})
    changed = grid_with_changes(
        grid,
        {"num_rows": 5, "difficulty_range": [0.2, 0.4], "types": {"s": {"step_height_range": [0.1, 0.15]}}},
    )
    assert changed.num_rows == 5 and changed.difficulty_range == (0.2, 0.4)
    assert (
        changed.types["s"] == PyramidStairsCfg(step_height_range=(0.1, 0.15))
        and changed.types["a"] == grid.types["a"]
    )
    assert dataclasses.replace(changed, num_rows=3, difficulty_range=(0.0, 1.0), types=grid.types) == grid
    for changes, message in (
        ({"num_row": 5}, r"task.terrain: unknown fields \['num_row'\]; valid fields: \['border_width', "),
        (
            {"types": {"x": {}}},
            r"task.terrain.types: unknown terrain types \['x'\]; this grid has \['a', 's'\]",
        ),
        (
            {"types": {"a": {"kind": "stairs"}}},
            r"task.terrain.types.a: unknown fields \['kind'\]; valid fields: ",
        ),
        (
            {"types": {"s": {"step_width": 0}}},
            r"task.terrain.types.s: PyramidStairsCfg.step_width must be > 0",
        ),
        (
            {"max_init_level": 3},
            r"task.terrain: TerrainGridCfg.max_init_level must be an int in .* = \[0, 2\], got 3",
        ),
        ({"types": {"a": {"proportion": 0.0}, "s": {"proportion": 0.0}}}, r"proportions must sum to > 0"),
    ):
        with pytest.raises(ValueError, match=message):
            grid_with_changes(grid, changes)


def test_columns_follow_the_proportions():
    types = {
        "a": FlatCfg(proportion=0.5),
        "b": FlatCfg(proportion=0.0),
        "c": FlatCfg(proportion=0.3),
        "d": FlatCfg(proportion=0.2),
    }
    cols = column_types(_grid(num_cols=10, types=types))
    assert cols == ("a",) * 5 + ("c",) * 3 + ("d",) * 2
    assert column_types(_grid(num_cols=1, types=types)) == ("a",)
    assert column_types(
        _grid(num_cols=4, types={"x": FlatCfg(proportion=3.0), "y": FlatCfg(proportion=1.0)})
    ) == (
        "x",
        "x",
        "x",
        "y",
    )


def test_the_seed_makes_the_terrain():
    types = {"rough": RandomRoughCfg(), "boxes": DiscreteBoxesCfg()}
    one, two = generate_terrain(_grid(types=types)), generate_terrain(_grid(types=types))
    assert torch.equal(one.heights, two.heights) and torch.equal(one.origins, two.origins)
    other = generate_terrain(_grid(types=types, seed=4))
    assert not torch.equal(one.heights, other.heights)


# ----------------------------------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_rows": 0}, r"TerrainGridCfg.num_rows must be an int >= 1, got 0"),
        ({"num_cols": 2.5}, r"TerrainGridCfg.num_cols must be an int >= 1"),
        ({"size": 0.0}, r"TerrainGridCfg.size must be > 0"),
        ({"horizontal_scale": -0.1}, r"TerrainGridCfg.horizontal_scale must be > 0"),
        ({"vertical_scale": math.nan}, r"TerrainGridCfg.vertical_scale must be a finite number"),
        ({"border_width": -1.0}, r"TerrainGridCfg.border_width must be >= 0"),
        ({"size": 0.2}, r"TerrainGridCfg.size must span at least 4 cells"),
        ({"types": {}}, r"TerrainGridCfg.types must name at least one terrain type"),
        ({"types": {"a": FlatCfg(proportion=0.0)}}, r"proportions must sum to > 0"),
        ({"types": {"a": "flat"}}, r"TerrainGridCfg.types\['a'\] must be a terrain type cfg"),
        ({"difficulty_range": (0.6, 0.5)}, r"TerrainGridCfg.difficulty_range must have min <= max"),
        ({"difficulty_range": (-0.1, 0.5)}, r"TerrainGridCfg.difficulty_range must lie in \[0, 1\]"),
        ({"difficulty_range": (0.5, 1.5)}, r"TerrainGridCfg.difficulty_range must lie in \[0, 1\]"),
        (
            {"num_rows": 50, "num_cols": 50, "size": 8.0},
            rf"4021 x 4021 heightfield .* over the limit of MAX_HEIGHTFIELD_CELLS = {MAX_HEIGHTFIELD_CELLS}",
        ),
    ],
)
def test_grid_validation_names_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _grid(**kwargs)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: FlatCfg(proportion=-1.0), r"FlatCfg.proportion must be >= 0"),
        (lambda: RandomRoughCfg(noise_range=(0.1, -0.1)), r"RandomRoughCfg.noise_range must have min <= max"),
        (lambda: RandomRoughCfg(noise_range=(0.0, math.inf)), r"RandomRoughCfg.noise_range must be a finite"),
        (lambda: RandomRoughCfg(noise_step=0.0), r"RandomRoughCfg.noise_step must be > 0"),
        (
            lambda: PyramidSlopeCfg(slope_range=(-0.1, 0.2)),
            r"PyramidSlopeCfg.slope_range must lie in \[0.0, inf\)",
        ),
        (
            lambda: PyramidStairsCfg(step_height_range=(0.1,)),
            r"PyramidStairsCfg.step_height_range must be a \(min",
        ),
        (lambda: PyramidStairsCfg(step_width=0.0), r"PyramidStairsCfg.step_width must be > 0"),
        (
            lambda: PyramidStairsCfg(platform_width=math.nan),
            r"PyramidStairsCfg.platform_width must be a finite",
        ),
        (
            lambda: DiscreteBoxesCfg(height_range=(0.0, math.nan)),
            r"DiscreteBoxesCfg.height_range must be a finite",
        ),
        (lambda: DiscreteBoxesCfg(width_range=(0.0, 1.0)), r"DiscreteBoxesCfg.width_range\[0\] must be > 0"),
        (lambda: DiscreteBoxesCfg(num_boxes=-1), r"DiscreteBoxesCfg.num_boxes must be an int >= 0"),
    ],
)
def test_type_validation_names_the_field(build, message):
    with pytest.raises(ValueError, match=message):
        build()


# ----------------------------------------------------------------------------------------------- in a scene
BALL_XML = """
<mujoco model="ball_on_terrain">
  <option timestep="0.005"/>
  <worldbody>
    <body name="ball" pos="0 0 1">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.05" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""


def test_a_ball_comes_to_rest_on_a_stairs_platform(tmp_path):
    cfg = _grid(
        num_rows=2,
        num_cols=2,
        border_width=0.5,
        difficulty_jitter=False,
        types={"stairs": PyramidStairsCfg(step_height_range=(0.05, 0.1), step_width=0.3, platform_width=0.6)},
    )
    terrain = generate_terrain(cfg)
    path = tmp_path / "ball.xml"
    path.write_text(BALL_XML)
    model = simcore.load_model(path, add_floor=False, heightfields=[terrain.heightfield])
    assert model.nhfield == 1
    backend = simcore.make_backend("mujoco", model, simcore.SimConfig(num_envs=1, device="cpu"))
    origin = terrain.origins[1, 1]  # top level: 0.1 m steps, (2 - 0.6) / 2 / 0.3 -> 2 steps: 0.2 m
    assert origin[2].item() == pytest.approx(0.2, abs=1e-6)
    qpos = backend.qpos.clone()
    qpos[0, :3] = origin + torch.tensor([0.0, 0.0, 0.15])
    backend.qpos.copy_(qpos)
    backend.forward()
    for _ in range(300):
        backend.step()
    rest = backend.qpos[0, :3].double()
    assert rest[2].item() == pytest.approx(0.2 + 0.05, abs=0.01)
    assert rest[:2].tolist() == pytest.approx(origin[:2].tolist(), abs=0.01)


def test_rays_read_the_generated_heights_where_the_layout_puts_them(tmp_path):
    """Downward rays at every third sample of a 2 x 3 grid read ``heights[r, c]`` at the world (x, y) the
    module docstring gives: rows along y, columns along x, the field centred on the origin."""
    cfg = _grid(num_rows=2, num_cols=3, border_width=0.3, seed=5)
    terrain = generate_terrain(cfg)
    nrow, ncol = cfg.shape
    rows, cols = torch.meshgrid(torch.arange(0, nrow, 3), torch.arange(0, ncol, 3), indexing="ij")
    rows, cols = rows.reshape(-1), cols.reshape(-1)
    half_x, half_y = terrain.heightfield.half_extent
    xy = torch.stack((cols * 0.1 - half_x, rows * 0.1 - half_y), dim=-1).double()
    path = tmp_path / "ball.xml"
    path.write_text(BALL_XML.replace('pos="0 0 1"', 'pos="0 0 2"'))
    model = simcore.load_model(path, add_floor=False, heightfields=[terrain.heightfield])
    backend = simcore.make_backend("mujoco", model, simcore.SimConfig(num_envs=1, device="cpu"))
    offsets = torch.cat((xy, torch.zeros(len(xy), 1, dtype=torch.float64)), dim=-1).numpy()
    cast = backend.ray_cast("ball", simcore.RayPattern(offsets, alignment="world"))
    backend.forward()
    assert bool(cast.hit.all())
    expected = terrain.heights[rows, cols]
    torch.testing.assert_close(cast.hit_height[0].float().cpu(), expected, atol=1e-3, rtol=0)
    assert expected.std() > 0.01  # the sampled grid is not flat: the layout is tested
