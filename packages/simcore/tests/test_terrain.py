"""Terrain (heightfields, collision meshes) and ray casts as declared capabilities, on both backends.

Tiny handmade scenes: a ball and a cube over a heightfield, a ball on a convex mesh slab, a box step.
mjwarp runs on Warp's CPU device here, so worlds are few and horizons short.
"""

from __future__ import annotations

from typing import ClassVar

import mujoco
import numpy as np
import pytest
import torch
from simcore_scenes import BACKENDS, ball_and_cube_xml, cpu_config, load_xml, rest

import simcore
from simcore import Capability
from simcore._src.capability import declared_capabilities
from simcore._src.mujoco_backend import MujocoBackend

BODIES_XML = ball_and_cube_xml(ball_pos="0.13 0.07 0.2", cube_pos="-0.33 0.21 0.2")

MESH_XML = """
<mujoco model="mesh_terrain">
  <option timestep="0.005"/>
  <asset>
    <mesh name="slab" vertex="-1 -1 0  1 -1 0  1 1 0  -1 1 0  -1 -1 0.1  1 -1 0.1  1 1 0.1  -1 1 0.1"/>
  </asset>
  <worldbody>
    <geom name="slab" type="mesh" mesh="slab" pos="0 0 0"/>
    <body name="ball" pos="0.1 0.1 0.2">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.05" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""

STEP_XML = """
<mujoco model="box_step">
  <worldbody>
    <geom name="step" type="box" pos="0.5 0 0.1" size="0.2 0.5 0.1"/>
    <body name="base" pos="0 0 0.8">
      <freejoint/>
      <geom name="base" type="box" size="0.1 0.1 0.05" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""


def _wavy_heights(n: int = 21) -> np.ndarray:
    x = np.linspace(-1.0, 1.0, n)
    gx, gy = np.meshgrid(x, x)
    return 0.15 * np.sin(2.0 * gx) * np.cos(3.0 * gy) + 0.05 * gx


def _flat_with_bump() -> simcore.Heightfield:
    heights = np.full((11, 11), 0.1)
    heights[0, 0] = 0.3  # away from the bodies: the field is not flat, the bodies rest on its 0.1 plateau
    return simcore.Heightfield(heights, half_extent=(1.0, 1.0))


# ----------------------------------------------------------------------------------------------- loading
def test_heightfield_validates_its_fields():
    with pytest.raises(ValueError, match="nrow, ncol >= 2"):
        simcore.Heightfield(np.zeros(5), (1.0, 1.0))
    with pytest.raises(ValueError, match="finite"):
        simcore.Heightfield(np.full((3, 3), np.nan), (1.0, 1.0))
    with pytest.raises(ValueError, match="half_extent"):
        simcore.Heightfield(np.zeros((3, 3)), (1.0, -1.0))
    with pytest.raises(ValueError, match="base_thickness"):
        simcore.Heightfield(np.zeros((3, 3)), (1.0, 1.0), base_thickness=0.0)


def test_load_model_adds_a_heightfield_at_its_elevations(tmp_path):
    heights = _wavy_heights()
    field = simcore.Heightfield(heights, half_extent=(1.0, 0.8), pos=(0.2, -0.1, 0.05))
    model = load_xml(tmp_path, BODIES_XML, add_floor=False, heightfields=[field])
    geom = model.geom("terrain")
    assert geom.type[0] == mujoco.mjtGeom.mjGEOM_HFIELD
    assert geom.group[0] == simcore.TERRAIN_GEOM_GROUP
    assert (geom.contype[0], geom.conaffinity[0]) == (1, 1)
    assert model.geom("ball").conaffinity[0] == 0  # robot geoms still touch the terrain only
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    nrow, ncol = heights.shape
    geomgroup = np.zeros(6, np.uint8)
    geomgroup[simcore.TERRAIN_GEOM_GROUP] = 1
    for r, c in [(0, 0), (3, 17), (10, 10), (20, 5), (nrow - 1, ncol - 1)]:
        x = 0.2 + 1.0 * (2 * c / (ncol - 1) - 1)
        y = -0.1 + 0.8 * (2 * r / (nrow - 1) - 1)
        x, y = np.clip([x, y], [-0.8 + 1e-6, -0.9 + 1e-6], [1.2 - 1e-6, 0.7 - 1e-6])
        dist = mujoco.mj_ray(
            model, data, np.array([x, y, 2.0]), np.array([0, 0, -1.0]), geomgroup, 1, -1, None
        )
        assert 2.0 - dist == pytest.approx(0.05 + heights[r, c], abs=1e-6)


def test_add_heightfield_to_a_spec_and_duplicate_names(tmp_path):
    spec = mujoco.MjSpec.from_string(BODIES_XML)
    (geom,) = simcore.add_heightfield(spec, simcore.Heightfield(np.zeros((4, 5)), (2.0, 1.0), name="ground"))
    assert geom.name == "ground"
    model = spec.compile()
    assert model.nhfield == 1 and (model.hfield_nrow[0], model.hfield_ncol[0]) == (4, 5)
    with pytest.raises(ValueError, match="already has a geom named 'ground'"):
        simcore.add_heightfield(spec, simcore.Heightfield(np.zeros((4, 5)), (2.0, 1.0), name="ground"))


def test_a_large_heightfield_is_split_into_blocks_with_the_same_surface(tmp_path, monkeypatch):
    """A 20 m x 9 m field at 0.25 m spacing becomes 3 x 2 blocks no longer than ``HEIGHTFIELD_BLOCK_M`` that share
    their edge samples; rays find the same surface as through the one-piece field, seams included."""
    rng = np.random.default_rng(3)
    heights = rng.uniform(-0.05, 0.15, size=(37, 81))
    field = simcore.Heightfield(heights, half_extent=(10.0, 4.5), pos=(30.0, -12.0, 0.02), name="ground")
    blocks = simcore.heightfield_blocks(field)
    assert [b.name for b in blocks] == [f"ground_{i}_{j}" for i in range(2) for j in range(3)]
    for block in blocks:
        assert max(block.half_extent) * 2 <= simcore.HEIGHTFIELD_BLOCK_M
        nrow, ncol = block.heights.shape
        x0 = block.pos[0] - block.half_extent[0]  # the block's first sample lies on the field's grid
        y0 = block.pos[1] - block.half_extent[1]
        c0, r0 = round((x0 - 20.0) / 0.25), round((y0 + 16.5) / 0.25)
        np.testing.assert_array_equal(block.heights, heights[r0 : r0 + nrow, c0 : c0 + ncol])
    assert sum(b.heights.shape[1] - 1 for b in blocks[:3]) == 80  # columns tile the field, edges shared
    assert sum(b.heights.shape[0] - 1 for b in blocks[::3]) == 36

    split = load_xml(tmp_path, BODIES_XML, add_floor=False, heightfields=[field])
    monkeypatch.setattr(simcore._src.model, "HEIGHTFIELD_BLOCK_M", 1e9)
    whole = load_xml(tmp_path, BODIES_XML, add_floor=False, heightfields=[field])
    assert (split.nhfield, whole.nhfield) == (6, 1)
    geomgroup = np.zeros(6, np.uint8)
    geomgroup[simcore.TERRAIN_GEOM_GROUP] = 1
    points = np.column_stack([rng.uniform(20.01, 39.99, 400), rng.uniform(-16.49, -7.51, 400)])
    seams = [(b.pos[0] + b.half_extent[0], -12.0 + 0.3) for b in blocks[:2]]  # on the column seams
    models = (split, whole)
    datas = [mujoco.MjData(m) for m in models]
    for m, d in zip(models, datas, strict=True):
        mujoco.mj_forward(m, d)
    for x, y in [*points, *seams]:
        hits = [
            mujoco.mj_ray(m, d, np.array([x, y, 3.0]), np.array([0, 0, -1.0]), geomgroup, 1, -1, None)
            for m, d in zip(models, datas, strict=True)
        ]
        assert hits[0] == pytest.approx(hits[1], abs=1e-6), (x, y)  # heights are stored as float32


def test_colliding_meshes_are_refused_unless_asked_for(tmp_path):
    with pytest.raises(NotImplementedError, match="collision_meshes=True"):
        load_xml(tmp_path, MESH_XML)
    model = load_xml(tmp_path, MESH_XML, collision_meshes=True, add_floor=False)
    slab = model.geom("slab")
    assert slab.type[0] == mujoco.mjtGeom.mjGEOM_MESH
    assert (slab.contype[0], slab.conaffinity[0], slab.group[0]) == (1, 1, simcore.TERRAIN_GEOM_GROUP)


def test_world_body_geoms_are_terrain(tmp_path):
    model = load_xml(tmp_path, STEP_XML)
    for name in ("step", "floor"):
        geom = model.geom(name)
        assert (geom.contype[0], geom.conaffinity[0], geom.group[0]) == (1, 1, simcore.TERRAIN_GEOM_GROUP)
    assert (model.geom("base").contype[0], model.geom("base").conaffinity[0]) == (1, 0)


# ----------------------------------------------------------------------------------------------- capabilities
def test_the_floor_can_lie_under_a_terrain_with_pits(tmp_path):
    pit = np.zeros((11, 11))
    pit[3:8, 3:8] = -0.4
    model = load_xml(
        tmp_path, BODIES_XML, heightfields=[simcore.Heightfield(pit, (1.0, 1.0))], floor_height=-1.4
    )
    floor = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")
    assert model.geom_pos[floor, 2] == pytest.approx(-1.4)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    # straight down at the pit's centre the rays meet the pit's floor (-0.4), not the plane at 0
    geomid = np.zeros(1, dtype=np.int32)
    distance = mujoco.mj_ray(
        model, data, np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, -1.0]), None, 1, -1, geomid
    )
    assert distance == pytest.approx(1.4, abs=1e-6) and geomid[0] != floor
    with pytest.raises(ValueError, match="floor_height must be a finite number"):
        load_xml(tmp_path, BODIES_XML, floor_height=float("nan"))


def test_both_backends_declare_terrain_and_rays():
    from simcore._src.mjwarp_backend import MjwarpBackend

    wanted = {Capability.HEIGHTFIELD, Capability.COLLISION_MESH, Capability.RAY_CAST}
    assert wanted <= declared_capabilities(MujocoBackend)
    assert wanted <= declared_capabilities(MjwarpBackend)


class _Flat(MujocoBackend):
    """A backend that declares the CPU backend's set minus terrain and rays."""

    capabilities: ClassVar[frozenset[Capability]] = declared_capabilities(MujocoBackend) - {
        Capability.HEIGHTFIELD,
        Capability.COLLISION_MESH,
        Capability.RAY_CAST,
    }


def test_a_backend_without_terrain_capabilities_refuses_at_load(tmp_path):
    hfield_model = load_xml(tmp_path, BODIES_XML, heightfields=[_flat_with_bump()])
    with pytest.raises(NotImplementedError, match=r"lacks HEIGHTFIELD for geom\(s\) \['terrain'\]") as err:
        _Flat(hfield_model, cpu_config(1))
    assert "use a backend that declares them" in str(err.value)
    mesh_model = load_xml(tmp_path, MESH_XML, collision_meshes=True)
    with pytest.raises(NotImplementedError, match=r"lacks COLLISION_MESH for geom\(s\) \['slab'\]"):
        _Flat(mesh_model, cpu_config(1))
    flat = _Flat(load_xml(tmp_path, BODIES_XML), cpu_config(1))  # primitives only: fine
    with pytest.raises(NotImplementedError, match="lacks RAY_CAST"):
        flat.ray_cast("ball", simcore.RayPattern.grid((0.2, 0.2), 0.1))


# ----------------------------------------------------------------------------------------------- contact parity
@pytest.mark.slow
def test_bodies_resting_on_a_heightfield_agree_across_backends(tmp_path):
    model = load_xml(tmp_path, BODIES_XML, add_floor=False, heightfields=[_flat_with_bump()])
    cpu_qpos, cpu_contacts = rest("mujoco", model, 30)
    warp_qpos, warp_contacts = rest("mjwarp", model, 30)
    torch.testing.assert_close(warp_qpos, cpu_qpos, atol=1e-4, rtol=0)
    assert cpu_qpos[0, 2].item() == pytest.approx(0.15, abs=2e-3)  # the ball rests on the 0.1 plateau
    assert cpu_qpos[0, 9].item() == pytest.approx(0.15, abs=2e-3)  # and so does the cube
    assert warp_contacts == cpu_contacts > 0


@pytest.mark.slow
def test_a_ball_resting_on_a_collision_mesh_agrees_across_backends(tmp_path):
    model = load_xml(tmp_path, MESH_XML, collision_meshes=True, add_floor=False)
    cpu_qpos, cpu_contacts = rest("mujoco", model, 30)
    warp_qpos, warp_contacts = rest("mjwarp", model, 30)
    torch.testing.assert_close(warp_qpos, cpu_qpos, atol=1e-4, rtol=0)
    assert cpu_qpos[0, 2].item() == pytest.approx(0.15, abs=2e-3)
    assert warp_contacts == cpu_contacts > 0


# ----------------------------------------------------------------------------------------------- ray casts
def test_ray_pattern_grid_and_validation():
    pattern = simcore.RayPattern.grid((0.4, 0.2), 0.1, height=0.5)
    assert pattern.num_rays == 5 * 3
    np.testing.assert_allclose(pattern.offsets[:2], [[-0.2, -0.1, 0.5], [-0.1, -0.1, 0.5]])
    np.testing.assert_allclose(pattern.directions, np.tile([0, 0, -1.0], (15, 1)))
    with pytest.raises(ValueError, match="max_distance"):
        simcore.RayPattern(np.zeros((1, 3)), max_distance=0)
    with pytest.raises(ValueError, match="alignment"):
        simcore.RayPattern(np.zeros((1, 3)), alignment="pitch")
    with pytest.raises(ValueError, match="geom_groups"):
        simcore.RayPattern(np.zeros((1, 3)), geom_groups=(6,))
    with pytest.raises(ValueError, match="non-zero"):
        simcore.RayPattern(np.zeros((1, 3)), directions=(0, 0, 0))


def _reference_distances(backend: simcore.SimBackend, cast: simcore.RayCast) -> np.ndarray:
    """``mujoco.mj_ray`` from every origin along every direction, on a fresh MjData of each world's qpos."""
    model = backend.mj_model
    out = np.zeros((backend.num_envs, cast.num_rays))
    for world in range(backend.num_envs):
        data = mujoco.MjData(model)
        data.qpos[:] = backend.qpos[world].double().numpy()
        mujoco.mj_forward(model, data)
        origins = cast.origin_w[world].double().numpy()
        directions = cast.direction_w[world].double().numpy()
        for ray in range(cast.num_rays):
            out[world, ray] = mujoco.mj_ray(
                model, data, origins[ray], directions[ray], cast.geomgroup, 1, -1, None
            )
    return out


def _tilted_poses(backend: simcore.SimBackend, body_qpos: int) -> None:
    """World 0 level, world 1 turned 30 degrees in yaw and tilted 10 degrees in roll, world 2 shifted."""
    yaw, roll = np.radians(30.0), np.radians(10.0)
    qy = np.array([np.cos(yaw / 2), 0, 0, np.sin(yaw / 2)])
    qr = np.array([np.cos(roll / 2), np.sin(roll / 2), 0, 0])
    w1, x1, y1, z1 = qy
    w2, x2, y2, z2 = qr
    quat = [
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ]
    qpos = backend.qpos.clone()
    qpos[1, body_qpos + 3 : body_qpos + 7] = torch.tensor(quat, dtype=qpos.dtype)
    qpos[2, body_qpos : body_qpos + 2] += torch.tensor([0.3, -0.2], dtype=qpos.dtype)
    backend.qpos.copy_(qpos)
    backend.forward()


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("alignment", ["yaw", "full"])
def test_height_scan_on_a_heightfield_matches_mj_ray(tmp_path, name, alignment):
    heights = _wavy_heights()
    model = load_xml(tmp_path, BODIES_XML, heightfields=[simcore.Heightfield(heights, (1.0, 1.0))])
    backend = simcore.make_backend(name, model, cpu_config(3))
    pattern = simcore.RayPattern.grid((0.6, 0.4), 0.1, height=0.3, alignment=alignment, max_distance=3.0)
    cast = backend.ray_cast("ball", pattern)
    _tilted_poses(backend, body_qpos=0)
    shape = (3, pattern.num_rays)
    assert cast.distance.shape == cast.hit.shape == cast.hit_height.shape == shape
    assert cast.hit_pos_w.shape == cast.origin_w.shape == (*shape, 3)
    assert bool(cast.hit.all())
    pos, quat = backend.qpos[1, :3].double().numpy(), backend.qpos[1, 3:7].double().numpy()
    if alignment == "yaw":  # offsets turn with the heading only (30 degrees), whatever the roll
        c, s = np.cos(np.radians(30.0)), np.sin(np.radians(30.0))
        turned = pattern.offsets @ np.array([[c, -s, 0], [s, c, 0], [0, 0, 1.0]]).T
    else:
        turned = np.zeros_like(pattern.offsets)
        for ray, offset in enumerate(pattern.offsets):
            mujoco.mju_rotVecQuat(turned[ray], offset, quat)
    np.testing.assert_allclose(cast.origin_w[1].double().numpy(), pos + turned, atol=1e-5)
    reference = _reference_distances(backend, cast)
    assert (reference > 0).all()
    # the rays pass through the ball itself (not terrain): they hit the heightfield below it
    np.testing.assert_allclose(cast.distance.double().numpy(), reference, atol=1e-4)
    hit_z = cast.origin_w[..., 2] + cast.distance * cast.direction_w[..., 2]
    torch.testing.assert_close(cast.hit_height, hit_z)
    if alignment == "yaw":  # directions stay straight down whatever the tilt
        torch.testing.assert_close(cast.direction_w[..., 2], -torch.ones(shape, dtype=cast.distance.dtype))
    else:
        assert float(cast.direction_w[1, :, 2].max()) > -0.99  # the tilted world's rays tilt with it


@pytest.mark.parametrize("name", BACKENDS)
def test_rays_on_a_box_step_and_the_floor_and_misses(tmp_path, name):
    model = load_xml(tmp_path, STEP_XML)
    backend = simcore.make_backend(name, model, cpu_config(2))
    # three rays down: over the floor, over the step, and beyond max_distance; one ray up: nothing there
    offsets = np.array([[0.0, 0.0, 0.0], [0.5, 0.0, 0.0], [-3.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    directions = np.array([[0, 0, -1.0], [0, 0, -1.0], [0, 0, -1.0], [0, 0, 1.0]])
    pattern = simcore.RayPattern(offsets, directions, max_distance=0.75, alignment="world")
    cast = backend.ray_cast("base", pattern)
    qpos = backend.qpos.clone()
    qpos[:, 2] = torch.tensor([0.7, 0.5], dtype=qpos.dtype)
    qpos[:, 0] = torch.tensor([0.0, -0.1], dtype=qpos.dtype)
    backend.qpos.copy_(qpos)
    backend.forward()
    expected = np.array([[0.7, 0.5, 0.7, 0.75], [0.5, 0.3, 0.5, 0.75]])
    expected_hit = np.array([[True, True, True, False], [True, True, True, False]])
    np.testing.assert_allclose(cast.distance.double().numpy(), expected, atol=1e-5)
    np.testing.assert_array_equal(cast.hit.numpy(), expected_hit)
    reference = _reference_distances(backend, cast)
    np.testing.assert_allclose(cast.distance.double().numpy()[:, :3], reference[:, :3], atol=1e-5)
    assert (reference[:, 3] == -1).all()  # MuJoCo's miss; simcore reads max_distance there instead
    # a miss beyond range: lift world 0 so the floor ray is longer than max_distance
    qpos[0, 2] = 2.0
    backend.qpos.copy_(qpos)
    backend.forward()
    assert not bool(cast.hit[0, 0]) and cast.distance[0, 0].item() == pytest.approx(0.75)
    assert cast.hit_pos_w[0, 0, 2].item() == pytest.approx(2.0 - 0.75, abs=1e-6)
    assert not torch.isnan(cast.distance).any() and not torch.isnan(cast.hit_pos_w).any()


@pytest.mark.parametrize("name", BACKENDS)
def test_ray_casts_refresh_in_place_on_step_and_reset(tmp_path, name):
    model = load_xml(tmp_path, STEP_XML)
    backend = simcore.make_backend(name, model, cpu_config(2))
    version = backend.structure_version
    cast = backend.ray_cast("base", simcore.RayPattern(np.zeros((1, 3)), alignment="world"))
    assert backend.structure_version == version + 1
    pointers = [t.data_ptr() for t in (cast.distance, cast.hit, cast.hit_pos_w)]
    first = cast.distance.clone()
    backend.step()
    assert (cast.distance < first).all()  # falling towards the floor
    spec = backend.reset_spec(["qpos", "qvel"])
    payload = {"qpos": backend.qpos.clone(), "qvel": torch.zeros_like(backend.qvel)}
    payload["qpos"][:, 2] = 1.5
    backend.reset(torch.tensor([True, False], device=backend.device), payload, spec)
    assert cast.distance[0].item() == pytest.approx(1.5, abs=1e-5)  # from the base's new height to the floor
    assert cast.distance[1].item() < first[1].item()
    assert [t.data_ptr() for t in (cast.distance, cast.hit, cast.hit_pos_w)] == pointers


@pytest.mark.parametrize("name", BACKENDS)
def test_after_a_reset_only_the_reset_rows_are_recast_to_what_a_full_cast_gives(tmp_path, name):
    model = load_xml(tmp_path, BODIES_XML, heightfields=[simcore.Heightfield(_wavy_heights(), (1.0, 1.0))])
    backend = simcore.make_backend(name, model, cpu_config(4))
    cast = backend.ray_cast("ball", simcore.RayPattern.grid((0.4, 0.2), 0.1, height=0.3))
    for _ in range(3):
        backend.step()
    # a sentinel in the raw distances of the rows the reset leaves alone: a recast row would overwrite it
    rows = torch.tensor([True, False, True, False], device=backend.device)
    cast._raw[~rows] = 0.125
    spec = backend.reset_spec(["qpos", "qvel"])
    payload = {"qpos": backend.qpos.clone(), "qvel": torch.zeros_like(backend.qvel)}
    ball = slice(0, 3)  # the ball's free joint comes first
    payload["qpos"][:, ball] += torch.tensor(
        [0.05, -0.03, 0.1], dtype=payload["qpos"].dtype, device=backend.device
    )
    backend.reset(rows, payload, spec)
    assert bool((cast._raw[~rows] == 0.125).all()), "rows the reset left alone were cast again"
    assert bool((cast._raw[rows] != 0.125).all())
    reset_rows = cast.distance[rows].clone()
    backend.forward()  # a full cast from the same state
    torch.testing.assert_close(cast.distance[rows], reset_rows, rtol=0, atol=0)
    assert bool(cast.hit[rows].all())


def test_ray_cast_rejects_unknown_bodies_and_groups_without_geoms(tmp_path):
    backend = simcore.make_backend("mujoco", load_xml(tmp_path, STEP_XML), cpu_config(1))
    with pytest.raises(ValueError, match="unknown body name 'torso'"):
        backend.ray_cast("torso", simcore.RayPattern(np.zeros((1, 3))))
    with pytest.raises(ValueError, match=r"no visible geom lies in geom groups \[4\]"):
        backend.ray_cast("base", simcore.RayPattern(np.zeros((1, 3)), geom_groups=(4,)))
    every = backend.ray_cast(
        "base", simcore.RayPattern(np.zeros((1, 3)), geom_groups=None, alignment="world")
    )
    assert every.distance[0, 0].item() == pytest.approx(0.05)  # every group: it leaves the base itself


def _mujoco_warp_rays(
    backend: simcore.SimBackend, cast: simcore.RayCast
) -> tuple[torch.Tensor, torch.Tensor]:
    """``mujoco_warp.rays`` from ``cast``'s origins along its directions, seeing its groups: raw distances (-1 for
    none) and the geoms hit, on the CPU."""
    import mujoco_warp as mjw
    import warp as wp

    groups = cast.pattern.geom_groups
    with wp.ScopedDevice(backend._wp_device):
        shape = (backend.num_envs, cast.num_rays)
        dist, geomid = wp.zeros(shape, dtype=float), wp.zeros(shape, dtype=int)
        normal = wp.zeros(shape, dtype=wp.vec3)
        geomgroup = mjw._src.types.vec6(*([-1] * 6 if groups is None else [int(v) for v in cast.geomgroup]))
        pnt = wp.from_torch(cast.origin_w.contiguous(), dtype=wp.vec3)
        vec = wp.from_torch(cast.direction_w.contiguous(), dtype=wp.vec3)
        exclude = wp.full(cast.num_rays, -1, dtype=int)
        mjw.rays(backend._m, backend._d, pnt, vec, geomgroup, True, exclude, dist, geomid, normal)
    return wp.to_torch(dist).cpu(), wp.to_torch(geomid).cpu()


def test_the_mjwarp_cast_skips_terrain_blocks_its_rays_miss_and_returns_what_mujoco_warp_rays_does(tmp_path):
    from types import SimpleNamespace

    from simcore._src.mjwarp_rays import candidate_geoms, has_per_world_geometry, static_boxes

    x, y = np.meshgrid(np.linspace(0.0, 8.0 * np.pi, 161), np.linspace(0.0, 2.0 * np.pi, 41))
    field = simcore.Heightfield(0.1 + 0.05 * np.sin(x) * np.cos(y), (10.0, 2.0))  # 20 m by 4 m: 3 blocks
    model = load_xml(tmp_path, BODIES_XML, heightfields=[field])
    terrain = candidate_geoms(model, (simcore.TERRAIN_GEOM_GROUP,))
    kinds = [int(model.geom_type[g]) for g in terrain]
    assert kinds.count(int(mujoco.mjtGeom.mjGEOM_HFIELD)) == 3
    low, high, boxed = static_boxes(model, terrain, per_world_geometry=False)
    assert boxed.tolist() == [
        int(kind == mujoco.mjtGeom.mjGEOM_HFIELD) for kind in kinds
    ]  # the floor: a plane
    assert (low[boxed == 1, 0] < -9.0).any() and (
        high[boxed == 1, 0] > 9.0
    ).any()  # the blocks span the field
    assert not static_boxes(model, terrain, per_world_geometry=True)[2].any()
    one, four = np.zeros((1, 5, 3)), np.zeros((4, 5, 3))
    assert not has_per_world_geometry(SimpleNamespace(geom_pos=one, body_quat=one, body_mass=four))
    assert has_per_world_geometry(SimpleNamespace(geom_pos=one, body_quat=four))  # a world's own body poses
    backend = simcore.make_backend("mjwarp", model, cpu_config(3))
    # a scan grid and sideways rays, from over the left, middle and right blocks and over the border
    pattern = simcore.RayPattern.grid((2.0, 1.0), 0.25, height=0.4, alignment="full", max_distance=30.0)
    sideways = simcore.RayPattern(
        np.zeros((4, 3)), np.array([[1.0, 0, -0.05], [-1.0, 0.1, -0.02], [0, 1.0, -0.1], [0.3, -1.0, 0.0]]),
        alignment="full", max_distance=30.0,
    )  # fmt: skip
    casts = [backend.ray_cast("ball", pattern), backend.ray_cast("ball", sideways)]
    qpos = backend.qpos.clone()
    qpos[:, 0:3] = torch.tensor([[-6.0, 0.5, 0.6], [0.3, -0.4, 0.5], [9.5, 1.5, 0.7]], dtype=qpos.dtype)
    backend.qpos.copy_(qpos)
    backend.forward()
    for cast in casts:
        raw, _ = _mujoco_warp_rays(backend, cast)
        expected = torch.where((raw >= 0) & (raw <= 30.0), raw, torch.full_like(raw, 30.0))
        torch.testing.assert_close(cast.distance.cpu(), expected, rtol=0, atol=1e-6)
        assert bool(cast.hit.any())


def test_the_box_grid_lists_each_box_in_every_cell_it_overlaps():
    from simcore._src.mjwarp_rays import box_grid

    rng = np.random.default_rng(0)
    low = np.concatenate([rng.uniform(-10.0, 10.0, (40, 2)), np.zeros((40, 1))], axis=1)
    high = low + np.concatenate([rng.uniform(0.2, 4.0, (40, 2)), np.ones((40, 1))], axis=1)
    boxed = (np.arange(40) % 5 != 0).astype(np.int32)  # every fifth geom has no box
    (x0, y0, cell, nx, ny), start, items, unboxed = box_grid(low, high, boxed)
    assert unboxed.tolist() == list(range(0, 40, 5))
    assert len(start) == nx * ny + 1 and start[-1] == len(items)
    for cy in range(ny):
        for cx in range(nx):
            listed = set(items[start[cy * nx + cx] : start[cy * nx + cx + 1]].tolist())
            cell_low = np.array([x0 + cx * cell, y0 + cy * cell])
            overlaps = {
                g
                for g in np.flatnonzero(boxed)
                if (np.minimum(high[g, :2], cell_low + cell) > np.maximum(low[g, :2], cell_low)).all()
            }
            assert overlaps <= listed, f"cell {(cx, cy)} misses boxes {sorted(overlaps - listed)}"
            assert not listed & set(unboxed.tolist())
    # no boxes: one empty cell, every geom in the unboxed list
    assert box_grid(np.zeros((2, 3)), np.zeros((2, 3)), np.zeros(2, dtype=np.int32))[0][3:] == (1, 1)


def test_the_mjwarp_cast_finds_every_block_a_short_ray_reaches_across_the_grid(tmp_path):
    """A 24 m field in 3 x 3 blocks; rays of 3 m from near the blocks' shared corners and edges, down, sideways
    and diagonally across the seams: the grid lets each ray test only the blocks near it, and every distance
    within reach is the one ``mujoco_warp.rays`` finds testing every geom."""
    from simcore._src.mjwarp_rays import box_grid, candidate_geoms, static_boxes

    x, y = np.meshgrid(np.linspace(0.0, 6.0 * np.pi, 97), np.linspace(0.0, 6.0 * np.pi, 97))
    field = simcore.Heightfield(0.1 + 0.08 * np.sin(x) * np.cos(1.3 * y), (12.0, 12.0))
    model = load_xml(tmp_path, BODIES_XML, heightfields=[field])
    terrain = candidate_geoms(model, (simcore.TERRAIN_GEOM_GROUP,))
    (_x0, _y0, _cell, nx, ny), *_ = box_grid(*static_boxes(model, terrain, per_world_geometry=False))
    assert (nx, ny) == (3, 3)
    backend = simcore.make_backend("mjwarp", model, cpu_config(4))
    angles = np.linspace(0.0, 2.0 * np.pi, 12, endpoint=False)
    flat = np.stack([np.cos(angles), np.sin(angles), np.full(12, -0.08)], axis=1)  # nearly level, all around
    steep = np.stack([np.cos(angles), np.sin(angles), np.full(12, -1.0)], axis=1)
    directions = np.concatenate([flat, steep, [[0.0, 0.0, -1.0]]])
    pattern = simcore.RayPattern(
        np.zeros((len(directions), 3)), directions, alignment="world", max_distance=3.0
    )
    cast = backend.ray_cast("ball", pattern)
    qpos = backend.qpos.clone()
    qpos[:, 0:3] = torch.tensor(
        [[4.05, 3.95, 0.35], [-3.98, 4.02, 0.3], [0.0, -4.01, 0.25], [11.5, -11.6, 0.3]], dtype=qpos.dtype
    )  # by the shared corners, an edge, and the field's own corner
    backend.qpos.copy_(qpos)
    backend.forward()
    raw, _ = _mujoco_warp_rays(backend, cast)
    expected = torch.where((raw >= 0) & (raw <= 3.0), raw, torch.full_like(raw, 3.0))
    torch.testing.assert_close(cast.distance.cpu(), expected, rtol=0, atol=1e-6)
    assert 0.3 < float(cast.hit.float().mean()) < 1.0  # hits and misses both


@pytest.mark.parametrize(
    ("groups", "dropped"),
    [((simcore.TERRAIN_GEOM_GROUP,), {"ball", "cube"}), (None, set()), ((0,), {"terrain", "floor"})],
)
def test_the_mjwarp_cast_tests_only_its_groups_and_returns_what_mujoco_warp_rays_does(
    tmp_path, groups, dropped
):

    from simcore._src.mjwarp_rays import candidate_geoms

    model = load_xml(tmp_path, BODIES_XML, heightfields=[simcore.Heightfield(_wavy_heights(), (1.0, 1.0))])
    kept = {model.geom(int(g)).name for g in candidate_geoms(model, groups)}
    named = {model.geom(g).name for g in range(model.ngeom)} - {""}
    assert named - kept == dropped, (
        "a geom outside the pattern's groups is never tested, one inside always is"
    )
    backend = simcore.make_backend("mjwarp", model, cpu_config(3))
    # origins above, beside and inside the bodies, rays down, sideways and up: hits on the robot's own geoms
    # where the groups let the rays see them
    offsets = np.array(
        [[0.0, 0.0, 0.3], [0.0, 0.0, 0.0], [-0.5, 0.0, 0.0], [0.0, 0.0, -0.5], [0.2, 0.1, 0.4]]
    )
    directions = np.array([[0, 0, -1.0], [0, 0, -1.0], [1.0, 0.1, 0.0], [0, 0, 1.0], [0.1, -0.2, -1.0]])
    pattern = simcore.RayPattern(offsets, directions, alignment="full", geom_groups=groups, max_distance=5.0)
    cast = backend.ray_cast("ball", pattern)
    _tilted_poses(backend, body_qpos=0)
    raw, geomid = _mujoco_warp_rays(backend, cast)
    expected = torch.where((raw >= 0) & (raw <= 5.0), raw, torch.full_like(raw, 5.0))
    torch.testing.assert_close(cast.distance.cpu(), expected, rtol=0, atol=1e-6)
    robot = {model.geom(name).id for name in ("ball", "cube")}
    hit = set(geomid.flatten().tolist())
    assert bool(hit & robot) == (groups != (simcore.TERRAIN_GEOM_GROUP,)), (
        "rays meet the robot where they see it"
    )


@pytest.mark.gpu
def test_ray_cast_inside_a_captured_step_matches_eager(tmp_path):
    model = load_xml(tmp_path, BODIES_XML, heightfields=[simcore.Heightfield(_wavy_heights(), (1.0, 1.0))])
    backend = simcore.make_backend("mjwarp", model, simcore.SimConfig(num_envs=4, device="cuda"))
    cast = backend.ray_cast("ball", simcore.RayPattern.grid((0.6, 0.4), 0.1, height=0.3))
    work = simcore.CapturedWork(backend.step, backend=backend, name="scan", require_graph=True)
    work.capture()
    work.replay()
    captured = cast.distance.clone()
    backend.forward()  # eager casts from the same state
    torch.testing.assert_close(cast.distance, captured)
    assert bool(cast.hit.all())
    # a captured reset recasts its rows only, to what an eager full cast gives
    rows = torch.tensor([True, False, True, False], device="cuda")
    spec = backend.reset_spec(["qpos", "qvel"])
    payload = {"qpos": backend.qpos.clone(), "qvel": torch.zeros_like(backend.qvel)}
    payload["qpos"][:, :3] += torch.tensor([0.05, -0.03, 0.1], dtype=payload["qpos"].dtype, device="cuda")
    reset = simcore.CapturedWork(
        lambda: backend.reset(rows, payload, spec), backend=backend, name="reset", require_graph=True
    )
    reset.capture()
    cast._raw[~rows] = 0.125  # a sentinel a recast row would overwrite
    reset.replay()
    assert bool((cast._raw[~rows] == 0.125).all()) and bool((cast._raw[rows] != 0.125).all())
    captured = cast.distance[rows].clone()
    backend.forward()
    torch.testing.assert_close(cast.distance[rows], captured, rtol=0, atol=0)


MJCF_HFIELD_XML = """
<mujoco model="mjcf_hfield">
  <asset>
    <hfield name="bumps" nrow="3" ncol="4" size="1 0.5 0.2 0.05" elevation="0 0 0 0  0 1 1 0  0 0 0 0"/>
  </asset>
  <worldbody>
    <geom name="bumps" type="hfield" hfield="bumps" pos="0 0 0.1"/>
    <body name="base" pos="0 0 1">
      <freejoint/>
      <geom name="base" type="sphere" size="0.05" mass="1"/>
    </body>
  </worldbody>
</mujoco>
"""


@pytest.mark.parametrize("name", BACKENDS)
def test_rays_on_an_mjcf_heightfield_and_a_collision_mesh_match_mj_ray(tmp_path, name):
    patterns = {
        MJCF_HFIELD_XML: simcore.RayPattern.grid((1.6, 0.8), 0.2, alignment="world"),
        MESH_XML: simcore.RayPattern.grid((0.6, 0.6), 0.15, alignment="world"),
    }
    for xml, pattern in patterns.items():
        model = load_xml(tmp_path, xml, collision_meshes=True, add_floor=False)
        terrain = model.geom("slab" if xml is MESH_XML else "bumps")
        assert (terrain.group[0], terrain.conaffinity[0]) == (simcore.TERRAIN_GEOM_GROUP, 1)
        backend = simcore.make_backend(name, model, cpu_config(2))
        cast = backend.ray_cast("ball" if xml is MESH_XML else "base", pattern)
        reference = _reference_distances(backend, cast)
        assert (reference > 0).all()
        np.testing.assert_allclose(cast.distance.double().numpy(), reference, atol=1e-4)


def test_a_backend_compiling_in_the_background_steps_and_casts_the_bits_of_one_built_at_once(
    tmp_path, monkeypatch
):
    """``SimConfig.compile_in_background``: construction and ``ray_cast`` find their Warp modules and return
    while background threads compile them; nothing is launched until the first step, which waits, recomputes
    the derived constants of the randomized masses and runs the first forward (casting the rays). From there
    the backend steps, resets and casts the same bits as one that compiled in its construction, and its
    diagnostics say how long the wait took."""
    from simcore._src.mjwarp_backend import COMPILE_WORKERS_ENV

    monkeypatch.setenv(COMPILE_WORKERS_ENV, "2")
    model = load_xml(tmp_path, BODIES_XML, heightfields=[simcore.Heightfield(_wavy_heights(), (1.0, 1.0))])
    pattern = simcore.RayPattern.grid((0.4, 0.2), 0.1, height=0.3)
    runs = []
    for background in (True, False):
        config = cpu_config(3, randomized_fields=("body_mass",), compile_in_background=background)
        backend = simcore.make_backend("mjwarp", model, config)
        cast = backend.ray_cast("ball", pattern)
        assert backend.compile_pending is background
        assert bool((cast._raw == -1.0).all()) is background  # not cast before the wait
        backend.ctrl.fill_(0.2)
        backend.step()
        assert not backend.compile_pending and backend.wait_compiled() == 0.0
        rows = torch.tensor([True, False, True], device=backend.device)
        payload = {"qpos": backend.qpos.clone(), "qvel": torch.zeros_like(backend.qvel)}
        payload["qpos"][:, 2] += 0.1
        backend.reset(rows, payload, backend.reset_spec(["qpos", "qvel"]))
        backend.step()
        runs.append((backend, cast))
    (late, late_cast), (now, now_cast) = runs
    assert late.compile_ahead["background"] and late.compile_ahead["waited_sec"] >= 0.0
    assert late.compile_ahead["modules"] == now.compile_ahead["modules"] > 10
    late_state, now_state = late.state_tensors(), now.state_tensors()
    assert "model.body_subtreemass" in late_state and list(late_state) == list(now_state)
    for name, value in late_state.items():  # the simulation state and the derived constants
        torch.testing.assert_close(value, now_state[name], rtol=0, atol=0, msg=name)
    torch.testing.assert_close(late_cast.distance, now_cast.distance, rtol=0, atol=0)
    assert bool(late_cast.hit.all())


@pytest.mark.gpu
def test_a_graph_capture_before_the_background_compile_is_waited_for_is_refused(tmp_path):
    """A capture that began while the Warp kernels still compile in the background would record the deferred
    first forward into the graph: the backend refuses, naming the fix; after the wait the capture works."""
    model = load_xml(tmp_path, BODIES_XML, heightfields=[simcore.Heightfield(_wavy_heights(), (1.0, 1.0))])
    config = simcore.SimConfig(num_envs=4, device="cuda", compile_in_background=True)
    backend = simcore.make_backend("mjwarp", model, config)
    assert backend.compile_pending
    stream = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with (
        pytest.raises(RuntimeError, match="wait_compiled"),
        torch.cuda.graph(graph, stream=stream),
        backend.graph_capture_scope(stream),
    ):
        pass
    assert backend.compile_pending  # nothing was waited for inside the capture
    backend.wait_compiled()
    assert not backend.compile_pending
    work = simcore.CapturedWork(backend.step, backend=backend, name="step", require_graph=True)
    work.capture()
    work.replay()
    assert backend.diagnostics().compile_ahead["waited_sec"] >= 0.0


def test_a_ray_cast_added_after_the_first_wait_compiles_in_the_background_too(tmp_path, monkeypatch):
    """A ray cast negotiated once the backend runs (its construction's kernels in) compiles its own module in
    the background; the next step waits for it, casts the new rays, and leaves the state and the distances of
    a backend that compiled everything at once."""
    from simcore._src.mjwarp_backend import COMPILE_WORKERS_ENV

    monkeypatch.setenv(COMPILE_WORKERS_ENV, "2")
    model = load_xml(tmp_path, BODIES_XML, heightfields=[simcore.Heightfield(_wavy_heights(), (1.0, 1.0))])
    runs = []
    for background in (True, False):
        config = cpu_config(2, randomized_fields=("body_mass",), compile_in_background=background)
        backend = simcore.make_backend("mjwarp", model, config)
        backend.step()
        cast = backend.ray_cast("ball", simcore.RayPattern.grid((0.2, 0.2), 0.1, height=0.3))
        assert backend.compile_pending is background
        backend.step()
        runs.append((backend.state_tensors(), cast.distance.clone()))
    (late_state, late_distance), (now_state, now_distance) = runs
    for name, value in late_state.items():
        torch.testing.assert_close(value, now_state[name], rtol=0, atol=0, msg=name)
    torch.testing.assert_close(late_distance, now_distance, rtol=0, atol=0)
    assert bool((late_distance > 0).all())
