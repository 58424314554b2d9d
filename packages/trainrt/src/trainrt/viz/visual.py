"""The render model: the robot's MJCF with its visual meshes, the simulated model's terrain, one floor.

Training simulates a headless model (``simcore.load_model`` drops the visual meshes; collision stays
primitive). Rendering loads the robot's MJCF again with its meshes, copies every world geom of the simulated
model into it (the floor, terrain heightfields, scene meshes), gives the floor and the terrain one checkered
material, and maps each simulated ``qpos`` onto it by joint name (``JointMap``). When a mesh file is missing it
says so once and draws the robot's collision primitives instead.

Geom groups of the render model: the robot's drawn geoms are in ``ROBOT_GROUP``, its collision geoms (when
visual meshes are drawn) in ``HIDDEN_GROUP``, the world in ``WORLD_GROUP``. A heightfield is there twice:
as itself in ``HFIELD_GROUP`` (MuJoCo's OpenGL renderer and the viewer draw it) and as a triangle mesh twin
in ``RAY_TERRAIN_GROUP`` (MuJoCo's ray casts into a mesh use a bounding volume tree; into a large heightfield
they are far too slow for the software renderer). ``DRAWN_GROUPS`` is what the OpenGL renderers and the
viewer show, ``RAY_GROUPS`` what the software renderer casts against.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import mujoco
import numpy as np

from trainrt.hotpath import cold_path

if TYPE_CHECKING:
    from trainrt.viz.scene import ScenePoser

ROBOT_GROUP, HIDDEN_GROUP, WORLD_GROUP = 2, 4, 5
HFIELD_GROUP, RAY_TERRAIN_GROUP = 1, 3
DRAWN_GROUPS = np.array([0, 1, 1, 0, 0, 1], dtype=np.uint8)
"""Geom groups the OpenGL renderers and the viewer show (``mjvOption.geomgroup``)."""
RAY_GROUPS = np.array([0, 0, 1, 1, 0, 1], dtype=np.uint8)
"""Geom groups the software renderer casts rays against (``mj_multiRay``'s ``geomgroup``)."""
_MAX_TERRAIN_MESH_VERTICES = 500_000

FLOOR_RGB1 = (0.46, 0.49, 0.54)
FLOOR_RGB2 = (0.36, 0.39, 0.44)
FLOOR_CHECKER_M = 0.5
"""Floor look in every renderer: squares of ``FLOOR_CHECKER_M`` metres in two greys (the terrain too)."""
FLOOR_HALF_EXTENT_M = 30.0
FLOOR_MATERIAL = "render_floor"

_REPORTED: set[str] = set()


def _say_once(message: str) -> None:
    """Print ``message`` to stderr the first time it comes up in this process."""
    if message not in _REPORTED:
        _REPORTED.add(message)
        print(message, file=sys.stderr)


def _is_visual_only(geom: mujoco.MjsGeom) -> bool:
    return geom.contype == 0 and geom.conaffinity == 0


def missing_mesh_files(spec: mujoco.MjSpec, mjcf_path: Path) -> list[str]:
    """The mesh files ``spec`` (loaded from ``mjcf_path``) names that do not exist."""
    meshdir = mjcf_path.parent / (spec.meshdir or "")
    missing = []
    for mesh in spec.meshes:
        if mesh.file and not (meshdir / mesh.file).is_file():
            missing.append(str(meshdir / mesh.file))
    return missing


def _robot_geoms(spec: mujoco.MjSpec, visual: bool) -> None:
    """Group the robot's geoms: visual-only ones drawn and collision ones hidden (``visual``), or collision
    ones drawn and visual ones (with their meshes) removed. The MJCF's own world geoms go: the simulated
    model's world is copied instead."""
    for geom in list(spec.geoms):
        if geom.parent.name == spec.worldbody.name:
            spec.delete(geom)
        elif _is_visual_only(geom):
            if visual:
                geom.group = ROBOT_GROUP
            else:
                spec.delete(geom)
        else:
            geom.group = HIDDEN_GROUP if visual else ROBOT_GROUP
    used = {g.meshname for g in spec.geoms if g.meshname}
    for mesh in list(spec.meshes):
        if mesh.name not in used:
            spec.delete(mesh)


def _add_floor_material(spec: mujoco.MjSpec) -> None:
    texture = spec.add_texture()
    texture.name = FLOOR_MATERIAL
    texture.type = mujoco.mjtTexture.mjTEXTURE_2D
    texture.builtin = mujoco.mjtBuiltin.mjBUILTIN_CHECKER
    texture.rgb1, texture.rgb2 = list(FLOOR_RGB1), list(FLOOR_RGB2)
    texture.width = texture.height = 256
    material = spec.add_material()
    material.name = FLOOR_MATERIAL
    material.textures[int(mujoco.mjtTextureRole.mjTEXROLE_RGB)] = FLOOR_MATERIAL
    material.texuniform = True
    material.texrepeat = [1.0 / FLOOR_CHECKER_M] * 2  # texture repeats per metre: one square each
    material.reflectance = 0.0


def _copy_world(spec: mujoco.MjSpec, sim: mujoco.MjModel) -> None:
    """Add the world-body geoms of ``sim`` (floor, heightfields, meshes, primitives) to ``spec``, drawn only."""
    fields = [
        int(sim.geom_dataid[g])
        for g in range(sim.ngeom)
        if int(sim.geom_type[g]) == int(mujoco.mjtGeom.mjGEOM_HFIELD)
    ]
    samples = sum(int(sim.hfield_nrow[h]) * int(sim.hfield_ncol[h]) for h in fields)
    stride = max(1, int(np.ceil(np.sqrt(samples / _MAX_TERRAIN_MESH_VERTICES))))  # one budget for all blocks
    for g in range(sim.ngeom):
        if int(sim.geom_bodyid[g]) != 0:
            continue
        kind = int(sim.geom_type[g])
        geom = spec.worldbody.add_geom()
        geom.name = mujoco.mj_id2name(sim, mujoco.mjtObj.mjOBJ_GEOM, g) or f"world_geom_{g}"
        geom.type = mujoco.mjtGeom(kind)
        geom.pos, geom.quat = sim.geom_pos[g].tolist(), sim.geom_quat[g].tolist()
        geom.size = sim.geom_size[g].tolist()
        geom.rgba = sim.geom_rgba[g].tolist()
        geom.contype = geom.conaffinity = 0
        geom.group = WORLD_GROUP
        if kind == int(mujoco.mjtGeom.mjGEOM_PLANE):
            half = [v if v > 0 else FLOOR_HALF_EXTENT_M for v in sim.geom_size[g, :2]]
            geom.size = [*half, 0.05]
            geom.material = FLOOR_MATERIAL
        elif kind == int(mujoco.mjtGeom.mjGEOM_HFIELD):
            h = int(sim.geom_dataid[g])
            nrow, ncol, adr = int(sim.hfield_nrow[h]), int(sim.hfield_ncol[h]), int(sim.hfield_adr[h])
            field = spec.add_hfield()
            field.name = f"{geom.name}_render"
            field.nrow, field.ncol = nrow, ncol
            field.size = sim.hfield_size[h].tolist()
            field.userdata = sim.hfield_data[adr : adr + nrow * ncol].tolist()
            geom.hfieldname = field.name
            geom.material = FLOOR_MATERIAL
            geom.group = HFIELD_GROUP
            _add_terrain_mesh(spec, geom, sim, h, stride)
        elif kind == int(mujoco.mjtGeom.mjGEOM_MESH):
            m = int(sim.geom_dataid[g])
            va, vn = int(sim.mesh_vertadr[m]), int(sim.mesh_vertnum[m])
            fa, fn = int(sim.mesh_faceadr[m]), int(sim.mesh_facenum[m])
            mesh = spec.add_mesh()
            mesh.name = f"{geom.name}_render"
            mesh.uservert = sim.mesh_vert[va : va + vn].ravel().tolist()
            mesh.userface = sim.mesh_face[fa : fa + fn].ravel().tolist()
            mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL
            geom.meshname = mesh.name
            geom.material = FLOOR_MATERIAL


def _add_terrain_mesh(
    spec: mujoco.MjSpec, geom: mujoco.MjsGeom, sim: mujoco.MjModel, h: int, stride: int
) -> None:
    """A triangle-mesh twin of heightfield ``h`` of ``sim`` (drawn by ``geom``) for ray casts, in
    ``RAY_TERRAIN_GROUP``: every ``stride``-th sample and the last, the stride chosen so that the twins of all
    the world's heightfields (simcore splits a large one into blocks) have at most
    ``_MAX_TERRAIN_MESH_VERTICES`` together."""
    nrow, ncol, adr = int(sim.hfield_nrow[h]), int(sim.hfield_ncol[h]), int(sim.hfield_adr[h])
    sx, sy, sz = (float(v) for v in sim.hfield_size[h, :3])
    rows = np.unique(np.append(np.arange(0, nrow, stride), nrow - 1))
    cols = np.unique(np.append(np.arange(0, ncol, stride), ncol - 1))
    heights = sim.hfield_data[adr : adr + nrow * ncol].reshape(nrow, ncol)[np.ix_(rows, cols)] * sz
    x = sx * (2.0 * cols / (ncol - 1) - 1.0)
    y = sy * (2.0 * rows / (nrow - 1) - 1.0)
    xx, yy = np.meshgrid(x, y)
    vertices = np.stack([xx, yy, heights], axis=-1).reshape(-1, 3)
    index = np.arange(len(rows) * len(cols)).reshape(len(rows), len(cols))
    a, b, c, d = index[:-1, :-1], index[:-1, 1:], index[1:, :-1], index[1:, 1:]
    faces = np.concatenate([np.stack([a, b, d], -1).reshape(-1, 3), np.stack([a, d, c], -1).reshape(-1, 3)])
    mesh = spec.add_mesh()
    mesh.name = f"{geom.name}_ray_mesh"
    mesh.uservert = vertices.ravel()
    mesh.userface = faces.ravel()
    mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL
    twin = spec.worldbody.add_geom()
    twin.name = f"{geom.name}_ray"
    twin.type = mujoco.mjtGeom.mjGEOM_MESH
    twin.meshname = mesh.name
    twin.pos, twin.quat = list(geom.pos), list(geom.quat)
    twin.contype = twin.conaffinity = 0
    twin.group = RAY_TERRAIN_GROUP
    twin.material = FLOOR_MATERIAL


def _add_sun(spec: mujoco.MjSpec) -> None:
    light = spec.worldbody.add_light()
    light.name = "render_sun"
    light.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
    light.dir = [-0.35, -0.25, -1.0]
    light.pos = [3.5, 2.5, 10.0]
    light.diffuse = [0.5, 0.5, 0.5]
    light.ambient = [0.1, 0.1, 0.1]
    light.specular = [0.1, 0.1, 0.1]
    light.castshadow = False


@cold_path
def build_render_model(sim: mujoco.MjModel, mjcf_path: str | Path) -> tuple[mujoco.MjModel, bool]:
    """The render model of the robot at ``mjcf_path`` in the world of ``sim``; and whether it has the
    visual meshes (False: a mesh file is missing, said once on stderr, and collision primitives are drawn)."""
    path = Path(mjcf_path)
    spec = mujoco.MjSpec.from_file(str(path))
    missing = missing_mesh_files(spec, path)
    visual = not missing
    if missing:
        _say_once(
            f"render: {len(missing)} mesh file(s) of {path.name} are missing (first: {missing[0]}); drawing the "
            "robot's collision primitives instead. Fetch the robot's assets again (`make setup`) for its meshes."
        )
    _robot_geoms(spec, visual)
    _add_floor_material(spec)
    _copy_world(spec, sim)
    _add_sun(spec)
    model = spec.compile()
    model.vis.headlight.ambient[:] = 0.35
    model.vis.headlight.diffuse[:] = 0.45
    model.vis.headlight.specular[:] = 0.1
    return model, visual


@cold_path
def render_model_for(sim: mujoco.MjModel) -> tuple[mujoco.MjModel, bool]:
    """The render model of the simulated model ``sim``: that of the robot (``trainrt.robots.ROBOTS``) whose
    joints ``sim``'s actuators drive, else ``sim`` itself (primitives, no visual model known), with whether
    it shows visual meshes."""
    from trainrt.robots import ROBOTS

    driven = tuple(
        mujoco.mj_id2name(sim, mujoco.mjtObj.mjOBJ_JOINT, int(sim.actuator_trnid[i, 0]))
        for i in range(sim.nu)
    )
    for robot in ROBOTS.values():
        if robot.joint_names == driven:
            return build_render_model(sim, robot.mjcf_path())
    return sim, False


_QPOS_WIDTH = {
    int(mujoco.mjtJoint.mjJNT_FREE): 7,
    int(mujoco.mjtJoint.mjJNT_BALL): 4,
    int(mujoco.mjtJoint.mjJNT_HINGE): 1,
    int(mujoco.mjtJoint.mjJNT_SLIDE): 1,
}


class JointMap:
    """Maps ``qpos`` of one model onto another by joint name (free, ball, hinge and slide joints).

    Joints of the target that the source lacks keep the target's ``qpos0``.

    Args:
        source: the model the states belong to (the simulated one).
        target: the model they are drawn with (the render model).
    """

    @cold_path
    def __init__(self, source: mujoco.MjModel, target: mujoco.MjModel) -> None:
        names = {mujoco.mj_id2name(source, mujoco.mjtObj.mjOBJ_JOINT, j): j for j in range(source.njnt)}
        src, dst = [], []
        for j in range(target.njnt):
            name = mujoco.mj_id2name(target, mujoco.mjtObj.mjOBJ_JOINT, j)
            s = names.get(name)
            if s is None:
                continue
            if int(source.jnt_type[s]) != int(target.jnt_type[j]):
                raise ValueError(f"joint {name!r} has different types in the simulated and the render model")
            width = _QPOS_WIDTH[int(target.jnt_type[j])]
            src.extend(range(int(source.jnt_qposadr[s]), int(source.jnt_qposadr[s]) + width))
            dst.extend(range(int(target.jnt_qposadr[j]), int(target.jnt_qposadr[j]) + width))
        self.source_index = np.array(src, dtype=np.int64)
        self.target_index = np.array(dst, dtype=np.int64)
        self.qpos0 = target.qpos0.astype(np.float64).copy()
        self.mapped = len(src)

    def __call__(self, qpos: np.ndarray) -> np.ndarray:
        """The target's qpos (nq_target,) for a source ``qpos`` (nq_source,)."""
        out = self.qpos0.copy()
        out[self.target_index] = np.asarray(qpos, dtype=np.float64)[self.source_index]
        return out


@cold_path
def poser_for(sim: mujoco.MjModel) -> ScenePoser:
    """A ``ScenePoser`` that draws states of the simulated model ``sim`` with its render model
    (``render_model_for``): the visual meshes and the world of ``sim``, states mapped by joint name."""
    from trainrt.viz.scene import ScenePoser

    model, visual = render_model_for(sim)
    if model is sim:
        return ScenePoser(sim)
    return ScenePoser(model, source=sim, geomgroup=DRAWN_GROUPS, ray_groups=RAY_GROUPS, palette=not visual)
