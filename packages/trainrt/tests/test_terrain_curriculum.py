"""The terrain curriculum: initial levels, the up/down/clamp rule, masks, fixed shapes and spawn origins."""

from __future__ import annotations

import pytest
import torch

from trainrt.terrain import PyramidStairsCfg, TerrainCurriculum, TerrainGridCfg, generate_terrain

LEVELS, COLS, TILE = 4, 3, 8.0


def _origins() -> torch.Tensor:
    """Tile (i, j) at (10 j, 100 i, i + 0.1 j): every tile distinct and readable."""
    i = torch.arange(LEVELS, dtype=torch.float32)[:, None].expand(LEVELS, COLS)
    j = torch.arange(COLS, dtype=torch.float32)[None, :].expand(LEVELS, COLS)
    return torch.stack((10 * j, 100 * i, i + 0.1 * j), dim=-1)


def _curriculum(num_envs: int = 6, **kwargs) -> TerrainCurriculum:
    return TerrainCurriculum(_origins(), TILE, num_envs, **kwargs)


def test_initial_levels_and_columns():
    cur = _curriculum(num_envs=6)
    assert cur.levels.shape == (6,) and cur.levels.dtype == torch.int64
    assert torch.count_nonzero(cur.levels) == 0  # max_init_level 0: everyone starts at the bottom
    assert cur.columns.tolist() == [0, 0, 1, 1, 2, 2]
    spread = _curriculum(num_envs=1000, max_init_level=2, generator=torch.Generator().manual_seed(1))
    assert spread.levels.min() == 0 and spread.levels.max() == 2
    again = _curriculum(num_envs=1000, max_init_level=2, generator=torch.Generator().manual_seed(1))
    assert torch.equal(spread.levels, again.levels)  # the generator makes the draw
    capped = _curriculum(num_envs=200, max_init_level=99)
    assert capped.levels.max() == LEVELS - 1


def test_up_down_stay_and_clamp_against_hand_computed_levels():
    cur = _curriculum(num_envs=6)
    cur.levels.copy_(torch.tensor([0, 1, 1, 0, 3, 2]))
    walked = torch.tensor([4.5, 4.5, 1.0, 1.0, 5.0, 3.0])  # half a tile is 4 m
    commanded = torch.tensor([10.0, 10.0, 3.0, 3.0, 1.0, 5.0])  # down below half of it
    cur.update(torch.ones(6, dtype=torch.bool), walked, commanded)
    # env 0, 1 walked > 4 m: up; env 2, 3 walked 1 < 1.5: down (env 3 clamps at 0); env 4 up clamps at
    # the top (3); env 5 walked 3 m, between 2.5 and 4: stays
    assert cur.levels.tolist() == [1, 2, 0, 0, 3, 2]
    # walking far enough wins over a long command (up, not down)
    cur.update(torch.ones(6, dtype=torch.bool), torch.full((6,), 4.1), torch.full((6,), 100.0))
    assert cur.levels.tolist() == [2, 3, 1, 1, 3, 3]


def test_envs_outside_the_mask_keep_their_level_and_the_tensors_stay():
    cur = _curriculum(num_envs=4)
    levels_ptr, columns_ptr = cur.levels.data_ptr(), cur.columns.data_ptr()
    mask = torch.tensor([True, False, True, False])
    cur.update(mask, torch.full((4,), 5.0), torch.zeros(4))
    assert cur.levels.tolist() == [1, 0, 1, 0]
    cur.update(~mask, torch.zeros(4), torch.full((4,), 10.0))  # down from 0: clamped
    assert cur.levels.tolist() == [1, 0, 1, 0]
    assert cur.levels.shape == (4,) and cur.columns.shape == (4,)
    assert (cur.levels.data_ptr(), cur.columns.data_ptr()) == (levels_ptr, columns_ptr)  # updated in place
    assert cur.columns.tolist() == [0, 0, 1, 2]


def test_origins_follow_levels_and_columns():
    cur = _curriculum(num_envs=3)
    cur.levels.copy_(torch.tensor([2, 0, 3]))
    expected = torch.tensor([[0.0, 200.0, 2.0], [10.0, 0.0, 0.1], [20.0, 300.0, 3.2]])
    torch.testing.assert_close(cur.origins(), expected)
    mask = torch.tensor([True, False, True])
    masked = cur.origins(mask)
    assert masked.shape == (3, 3)
    torch.testing.assert_close(masked, torch.where(mask[:, None], expected, 0.0))
    fallback = torch.full((3, 3), -1.0)
    torch.testing.assert_close(cur.origins(mask, fallback), torch.where(mask[:, None], expected, fallback))


def test_level_distribution_and_mean():
    cur = _curriculum(num_envs=4)
    cur.levels.copy_(torch.tensor([0, 1, 1, 3]))
    assert cur.level_distribution().tolist() == pytest.approx([0.25, 0.5, 0.0, 0.25])
    assert cur.mean_level().item() == pytest.approx(1.25)


def test_a_generated_grid_feeds_the_curriculum():
    cfg = TerrainGridCfg(size=2.0, num_rows=3, num_cols=2, border_width=0.5, types={"s": PyramidStairsCfg()})
    terrain = generate_terrain(cfg)
    cur = TerrainCurriculum(terrain.origins, cfg.size, num_envs=4)
    torch.testing.assert_close(cur.origins(), terrain.origins[0, [0, 0, 1, 1]])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"origins": torch.zeros(3, 3)}, r"origins must be \(num_levels, num_cols, 3\)"),
        ({"tile_size": 0.0}, r"tile_size must be > 0"),
        ({"num_envs": 0}, r"num_envs must be >= 1"),
        ({"max_init_level": -1}, r"max_init_level must be >= 0"),
    ],
)
def test_constructor_validation(kwargs, message):
    args = {"origins": _origins(), "tile_size": TILE, "num_envs": 2} | kwargs
    with pytest.raises(ValueError, match=message):
        TerrainCurriculum(**args)
