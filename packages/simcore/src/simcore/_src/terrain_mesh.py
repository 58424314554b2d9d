"""Static colliding meshes the caller adds to a scene (``load_model(terrain_meshes=...)``): ramps, platforms, the
ground of a clip's scene.

MuJoCo collides a mesh as its convex hull, so a mesh is added as one geom per connected piece, and every piece
must be closed (watertight) and convex: a ramp beside a platform stays two shapes instead of becoming the hull
around both. A piece that is neither is refused by name, with the fix. OBJ files are read as text (``v`` and
``f`` lines only); nothing in a file runs. Cold path (model construction); NumPy on host arrays.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

TERRAIN_GEOM_GROUP = 5
"""Geom group of the terrain: ``load_model`` puts the floor, its heightfields and every other colliding geom of
the world body there, and ``RayPattern`` rays see this group only by default (robot models use groups 0-3)."""

CONVEXITY_TOLERANCE_M = 1e-4
"""A vertex further than this outside the plane of one of its piece's faces makes the piece non-convex."""


@dataclass(frozen=True, eq=False)
class TerrainMesh:
    """A static colliding mesh on the world body (``add_terrain_mesh``, ``load_model(terrain_meshes=...)``).

    Attributes:
        vertices: ``(V, 3)`` vertex positions in the mesh frame, meters.
        faces: ``(F, 3)`` vertex indices of each triangle.
        pos: world position of the mesh frame.
        quat: world orientation of the mesh frame, wxyz (normalized here).
        name: prefix of its geoms and mesh assets (``<name>_<piece>``).
        friction: sliding friction; None takes ``load_model``'s ``floor_friction``.
        source: where the vertices came from (a file path), for messages.
    """

    vertices: np.ndarray
    faces: np.ndarray
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    name: str = "terrain_mesh"
    friction: float | None = None
    source: str = "<arrays>"

    def __post_init__(self) -> None:
        vertices = np.array(self.vertices, dtype=np.float64)
        faces = np.array(self.faces)
        where = f"TerrainMesh {self.name!r} ({self.source})"
        if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) < 4:
            raise ValueError(f"{where}: vertices must be (V >= 4, 3), got shape {vertices.shape}")
        if not np.isfinite(vertices).all():
            raise ValueError(f"{where}: vertices must be finite")
        if (
            faces.ndim != 2
            or faces.shape[1] != 3
            or len(faces) < 4
            or not np.issubdtype(faces.dtype, np.integer)
        ):
            raise ValueError(
                f"{where}: faces must be (F >= 4, 3) vertex indices, got {faces.dtype} {faces.shape}"
            )
        if faces.min() < 0 or faces.max() >= len(vertices):
            raise ValueError(f"{where}: a face names a vertex outside 0..{len(vertices) - 1}")
        for array in (vertices, faces):
            array.flags.writeable = False
        object.__setattr__(self, "vertices", vertices)
        object.__setattr__(self, "faces", faces.astype(np.int64))
        pos = tuple(float(v) for v in self.pos)
        if len(pos) != 3 or not all(math.isfinite(v) for v in pos):
            raise ValueError(f"{where}: pos must be three finite numbers, got {self.pos!r}")
        quat = np.array(self.quat, dtype=np.float64)
        if quat.shape != (4,) or not np.isfinite(quat).all() or np.linalg.norm(quat) < 1e-9:
            raise ValueError(
                f"{where}: quat must be four finite numbers (wxyz), not all zero, got {self.quat!r}"
            )
        object.__setattr__(self, "pos", pos)
        object.__setattr__(self, "quat", tuple(float(v) for v in quat / np.linalg.norm(quat)))
        if self.friction is not None and not (math.isfinite(self.friction) and self.friction >= 0):
            raise ValueError(f"{where}: friction must be a non-negative number, got {self.friction!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"TerrainMesh.name must be a non-empty string, got {self.name!r}")

    @classmethod
    def from_obj(cls, path: str | Path, **kwargs: object) -> TerrainMesh:
        """The mesh of a Wavefront OBJ file (its ``v`` and ``f`` lines; polygons are split into triangles).

        FileNotFoundError naming the file when it does not exist; ValueError naming the line that cannot be
        read. ``kwargs`` are the other fields (``pos``, ``quat``, ``name``, ``friction``).
        """
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"terrain mesh file not found: {path}")
        vertices, faces = read_obj(path)
        return cls(vertices=vertices, faces=faces, source=str(path), **kwargs)

    def world_vertices(self) -> np.ndarray:
        """``(V, 3)`` vertex positions in the world (the mesh frame placed by ``pos`` and ``quat``)."""
        rotation = np.zeros(9)
        mujoco.mju_quat2Mat(rotation, np.array(self.quat))
        return self.vertices @ rotation.reshape(3, 3).T + np.array(self.pos)

    def pieces(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """The connected pieces as ``(vertices, faces)`` with piece-local indices; ValueError naming a piece
        that is not closed or not convex (MuJoCo would collide with its convex hull instead)."""
        parent = list(range(len(self.vertices)))

        def root(i: int) -> int:
            while parent[i] != i:
                parent[i] = parent[parent[i]]
                i = parent[i]
            return i

        for a, b, c in self.faces.tolist():
            for u, v in ((a, b), (b, c)):
                ru, rv = root(u), root(v)
                if ru != rv:
                    parent[ru] = rv
        face_root = np.array([root(int(f[0])) for f in self.faces])
        pieces = []
        for number, key in enumerate(dict.fromkeys(face_root.tolist())):
            faces = self.faces[face_root == key]
            used = np.unique(faces)
            local = np.full(len(self.vertices), -1, dtype=np.int64)
            local[used] = np.arange(len(used))
            vertices, faces = self.vertices[used], local[faces]
            self._check_piece(number, vertices, faces)
            pieces.append((vertices, faces))
        return pieces

    def _check_piece(self, number: int, vertices: np.ndarray, faces: np.ndarray) -> None:
        where = f"TerrainMesh {self.name!r} ({self.source}), piece {number}"
        edges: dict[tuple[int, int], int] = {}
        for tri in faces.tolist():
            for u, v in ((tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0])):
                key = (min(u, v), max(u, v))
                edges[key] = edges.get(key, 0) + 1
        open_edges = [edge for edge, count in edges.items() if count != 2]
        if open_edges:
            raise ValueError(
                f"{where} is not closed (watertight): {len(open_edges)} edge(s) are not shared by exactly two "
                f"faces, e.g. vertices {open_edges[0]}; close the surface (give it a bottom and sides) so it "
                "can collide"
            )
        centroid = vertices.mean(axis=0)
        corners = vertices[faces]
        normals = np.cross(corners[:, 1] - corners[:, 0], corners[:, 2] - corners[:, 0])
        lengths = np.linalg.norm(normals, axis=1, keepdims=True)
        normals = normals / np.maximum(lengths, 1e-12)
        offsets = np.einsum("fk,fk->f", normals, corners[:, 0])
        outward = np.where((normals @ centroid - offsets)[:, None] > 0, -normals, normals)
        outward_offsets = np.einsum("fk,fk->f", outward, corners[:, 0])
        beyond = float((vertices @ outward.T - outward_offsets[None, :]).max())
        if beyond > CONVEXITY_TOLERANCE_M:
            raise ValueError(
                f"{where} is not convex (a vertex lies {beyond:.4f} m outside one of its faces); MuJoCo "
                "collides a mesh as its convex hull: split the piece into convex pieces (separate, unconnected "
                "shapes in the file) or give the terrain as a heightfield"
            )


def read_obj(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(vertices (V, 3), triangles (F, 3))`` of an OBJ file's ``v`` and ``f`` lines (other lines are skipped;
    ``f`` entries may be ``i``, ``i/t``, ``i/t/n`` or ``i//n``, negative indices count from the end)."""
    vertices: list[list[float]] = []
    faces: list[list[int]] = []
    with open(path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields or fields[0] not in ("v", "f"):
                continue
            try:
                if fields[0] == "v":
                    vertices.append([float(v) for v in fields[1:4]])
                    if len(fields) < 4:
                        raise ValueError("a vertex needs x y z")
                    continue
                indices = [int(entry.split("/")[0]) for entry in fields[1:]]
                if len(indices) < 3 or 0 in indices:
                    raise ValueError("a face needs three or more 1-based vertex indices")
                indices = [i - 1 if i > 0 else len(vertices) + i for i in indices]
                faces.extend([indices[0], indices[k], indices[k + 1]] for k in range(1, len(indices) - 1))
            except ValueError as err:
                raise ValueError(f"{path}, line {number} ({line.strip()[:60]!r}): {err}") from None
    if not vertices or not faces:
        raise ValueError(f"{path} holds no mesh: an OBJ terrain needs 'v x y z' and 'f i j k' lines")
    return np.array(vertices, dtype=np.float64), np.array(faces, dtype=np.int64)


def add_terrain_mesh(spec: mujoco.MjSpec, mesh: TerrainMesh, friction: float = 0.4) -> list[mujoco.MjsGeom]:
    """Add ``mesh`` to ``spec`` before compiling: a mesh asset and a static geom on the world body per piece
    (``<name>_<piece>``), colliding with everything, in ``TERRAIN_GEOM_GROUP`` (rays see it), with friction
    ``mesh.friction`` or ``friction``. Simulating the compiled model needs ``Capability.COLLISION_MESH``."""

    if not isinstance(mesh, TerrainMesh):
        raise ValueError(f"expected a simcore.TerrainMesh, got {type(mesh).__name__}")
    taken = {g.name for g in spec.geoms} | {m.name for m in spec.meshes}
    geoms = []
    for number, (vertices, faces) in enumerate(mesh.pieces()):
        name = f"{mesh.name}_{number}"
        if name in taken:
            raise ValueError(
                f"the model already has a geom or mesh named {name!r}; give the TerrainMesh another name"
            )
        asset = spec.add_mesh()
        asset.name = name
        asset.uservert = vertices.ravel().tolist()
        asset.userface = faces.ravel().tolist()
        geom = spec.worldbody.add_geom()
        geom.name = name
        geom.type = mujoco.mjtGeom.mjGEOM_MESH
        geom.meshname = name
        geom.pos = list(mesh.pos)
        geom.quat = list(mesh.quat)
        geom.contype, geom.conaffinity = 1, 1
        geom.group = TERRAIN_GEOM_GROUP
        geom.rgba = [0.55, 0.5, 0.45, 1.0]
        geom.friction = [mesh.friction if mesh.friction is not None else friction, 0.005, 0.0001]
        geoms.append(geom)
    return geoms
