"""Terrain meshes the caller adds (``simcore.TerrainMesh``, ``load_model(terrain_meshes=...)``): read from OBJ text,
one colliding geom per closed convex piece, placed where the file and pose say, refused by name when a piece
cannot collide, fail-closed on a backend without ``Capability.COLLISION_MESH``, and the same contacts on both
backends (mjwarp on Warp's CPU device: two worlds, a short horizon)."""

from __future__ import annotations

from typing import ClassVar

import mujoco
import numpy as np
import pytest
import torch
from simcore_scenes import ball_and_cube_xml, cpu_config, load_xml, rest

import simcore
from simcore import Capability
from simcore._src.capability import declared_capabilities, model_capabilities
from simcore._src.mujoco_backend import MujocoBackend

BALL_XML = ball_and_cube_xml(ball_pos="0.0 -0.2 0.4", cube_pos="1.5 0.0 0.4")


def _box(x0, y0, z0, x1, y1, z1, first: int) -> tuple[list[str], list[str]]:
    """OBJ lines of a closed box (8 vertices, 6 quads) whose vertices start at index ``first`` (1-based)."""
    corners = [(x, y, z) for x in (x0, x1) for y in (y0, y1) for z in (z0, z1)]
    quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    vertices = [f"v {x} {y} {z}" for x, y, z in corners]
    faces = ["f " + " ".join(str(first + i) for i in quad) for quad in quads]
    return vertices, faces


def _two_boxes_obj(tmp_path, name: str = "two_boxes.obj") -> str:
    """A low slab (top at z = 0.1) and, apart from it, a tall block (top at z = 0.3): two pieces."""
    slab_v, slab_f = _box(-0.5, -0.5, 0.0, 0.5, 0.5, 0.1, 1)
    block_v, block_f = _box(1.0, -0.5, 0.0, 2.0, 0.5, 0.3, 9)
    path = tmp_path / name
    path.write_text("# two boxes\no boxes\n" + "\n".join(slab_v + block_v + slab_f + block_f) + "\n")
    return str(path)


def _surface(model: mujoco.MjModel, x: float, y: float) -> tuple[float, str]:
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    geom = np.zeros(1, dtype=np.int32)
    start = np.array([x, y, 5.0])
    distance = mujoco.mj_ray(model, data, start, np.array([0.0, 0.0, -1.0]), None, 1, -1, geom)
    return 5.0 - distance, mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, int(geom[0]))


def _load(tmp_path, *meshes: simcore.TerrainMesh, **kwargs) -> mujoco.MjModel:
    return load_xml(tmp_path, BALL_XML, terrain_meshes=meshes, **kwargs)


def test_an_obj_becomes_one_mesh_geom_per_piece_where_its_pose_puts_it(tmp_path):
    mesh = simcore.TerrainMesh.from_obj(_two_boxes_obj(tmp_path), name="ground", pos=(0.0, 0.0, 0.2))
    assert mesh.vertices.shape == (16, 3) and mesh.faces.shape == (24, 3)  # quads split into triangles
    assert [len(v) for v, _ in mesh.pieces()] == [8, 8]
    model = _load(tmp_path, mesh, add_floor=False)
    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, f"ground_{i}") for i in (0, 1)]
    assert min(ids) >= 0
    assert [int(model.geom_type[i]) for i in ids] == [int(mujoco.mjtGeom.mjGEOM_MESH)] * 2
    assert [int(model.geom_group[i]) for i in ids] == [simcore.TERRAIN_GEOM_GROUP] * 2
    assert model_capabilities(model) == {Capability.COLLISION_MESH: ["ground_0", "ground_1"]}
    # tops at 0.1 and 0.3 in the file, raised by pos z = 0.2; between the pieces there is nothing
    assert _surface(model, 0.0, 0.0) == (pytest.approx(0.3, abs=1e-6), "ground_0")
    assert _surface(model, 1.5, 0.0) == (pytest.approx(0.5, abs=1e-6), "ground_1")
    assert _surface(model, 0.75, 0.0)[1] is None
    turned = simcore.TerrainMesh.from_obj(
        _two_boxes_obj(tmp_path), name="ground", quat=(np.cos(np.pi / 4), 0.0, 0.0, np.sin(np.pi / 4))
    )
    np.testing.assert_allclose(
        turned.world_vertices()[8], [0.5, 1.0, 0.0], atol=1e-12
    )  # (1, -0.5) turned 90 deg
    assert _surface(_load(tmp_path, turned, add_floor=False), 0.0, 1.5) == (
        pytest.approx(0.3, abs=1e-6),
        "ground_1",
    )


def test_pieces_that_cannot_collide_are_refused_by_name(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"terrain mesh file not found: .*missing\.obj"):
        simcore.TerrainMesh.from_obj(tmp_path / "missing.obj")
    vertices, faces = _box(0, 0, 0, 1, 1, 1, 1)
    (tmp_path / "open.obj").write_text("\n".join(vertices + faces[:-1]))  # one side missing
    with pytest.raises(ValueError, match=r"piece 0 is not closed \(watertight\)"):
        simcore.TerrainMesh.from_obj(tmp_path / "open.obj").pieces()
    # an L-shaped prism: closed but not convex (its hull would fill the corner)
    outline = [(0, 0), (2, 0), (2, 1), (1, 1), (1, 2), (0, 2)]
    v = [f"v {x} {y} {z}" for z in (0, 1) for x, y in outline]
    f = ["f 1 6 5 4 3 2", "f 7 8 9 10 11 12"] + [
        f"f {i + 1} {(i + 1) % 6 + 1} {(i + 1) % 6 + 7} {i + 7}" for i in range(6)
    ]
    (tmp_path / "l_shape.obj").write_text("\n".join(v + f))
    with pytest.raises(ValueError, match=r"piece 0 is not convex .* split the piece into convex pieces"):
        _load(tmp_path, simcore.TerrainMesh.from_obj(tmp_path / "l_shape.obj"))
    (tmp_path / "bad.obj").write_text("v 0 0 0\nv 1 zero 0\n")
    with pytest.raises(ValueError, match=r"bad\.obj, line 2 \('v 1 zero 0'\)"):
        simcore.TerrainMesh.from_obj(tmp_path / "bad.obj")
    (tmp_path / "empty.obj").write_text("# nothing\n")
    with pytest.raises(ValueError, match="holds no mesh"):
        simcore.TerrainMesh.from_obj(tmp_path / "empty.obj")
    with pytest.raises(ValueError, match="quat must be four finite numbers"):
        simcore.TerrainMesh.from_obj(_two_boxes_obj(tmp_path), quat=(0, 0, 0, 0))
    mesh = simcore.TerrainMesh.from_obj(_two_boxes_obj(tmp_path), name="ground")
    with pytest.raises(ValueError, match="already has a geom or mesh named 'ground_0'"):
        _load(tmp_path, mesh, mesh)


class _NoMeshes(MujocoBackend):
    capabilities: ClassVar[frozenset[Capability]] = declared_capabilities(MujocoBackend) - {
        Capability.COLLISION_MESH
    }


def test_a_backend_without_collision_meshes_refuses_the_model(tmp_path):
    model = _load(tmp_path, simcore.TerrainMesh.from_obj(_two_boxes_obj(tmp_path), name="ground"))
    with pytest.raises(
        NotImplementedError, match=r"lacks COLLISION_MESH for geom\(s\) \['ground_0', 'ground_1'\]"
    ):
        _NoMeshes(model, cpu_config(1))


def test_bodies_resting_on_terrain_mesh_pieces_agree_across_backends(tmp_path):
    model = _load(
        tmp_path, simcore.TerrainMesh.from_obj(_two_boxes_obj(tmp_path), name="ground"), add_floor=False
    )
    cpu_qpos, cpu_contacts = rest("mujoco", model, 30)
    warp_qpos, warp_contacts = rest("mjwarp", model, 30)
    torch.testing.assert_close(warp_qpos, cpu_qpos, atol=1e-4, rtol=0)
    assert cpu_qpos[0, 2].item() == pytest.approx(0.15, abs=2e-3)  # the ball on the slab
    assert cpu_qpos[0, 9].item() == pytest.approx(0.35, abs=2e-3)  # the cube on the block
    assert warp_contacts == cpu_contacts > 0
