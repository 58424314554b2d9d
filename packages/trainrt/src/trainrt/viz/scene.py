"""What a frame shows: the render model posed by CPU MuJoCo, a follow camera, and the decorations we add.

Every renderer draws the same ``FrameScene``: the posed render model (robot and world: the robot's visual
meshes, the terrain; see ``trainrt.viz.visual``), an optional translucent ghost (the tracking reference, a
second pose of the robot) and extra primitives such as command arrows. Posing is CPU MuJoCo forward
kinematics (``mj_kinematics``) on private ``MjData``; the training state is never touched.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field

import mujoco
import numpy as np

from trainrt.hotpath import cold_path

GEOM_PLANE = int(mujoco.mjtGeom.mjGEOM_PLANE)
GEOM_SPHERE = int(mujoco.mjtGeom.mjGEOM_SPHERE)
GEOM_CAPSULE = int(mujoco.mjtGeom.mjGEOM_CAPSULE)
GEOM_ELLIPSOID = int(mujoco.mjtGeom.mjGEOM_ELLIPSOID)
GEOM_CYLINDER = int(mujoco.mjtGeom.mjGEOM_CYLINDER)
GEOM_BOX = int(mujoco.mjtGeom.mjGEOM_BOX)
GEOM_MESH = int(mujoco.mjtGeom.mjGEOM_MESH)
GEOM_HFIELD = int(mujoco.mjtGeom.mjGEOM_HFIELD)
PRIMITIVE_GEOM_TYPES: dict[int, str] = {
    GEOM_PLANE: "plane",
    GEOM_SPHERE: "sphere",
    GEOM_CAPSULE: "capsule",
    GEOM_ELLIPSOID: "ellipsoid",
    GEOM_CYLINDER: "cylinder",
    GEOM_BOX: "box",
}
"""Geom types of decorations (arrows) that every renderer draws itself."""
DRAWN_GEOM_TYPES: dict[int, str] = {**PRIMITIVE_GEOM_TYPES, GEOM_MESH: "mesh", GEOM_HFIELD: "hfield"}
"""Geom types of a model every renderer draws (MuJoCo's ray casts and its OpenGL renderer)."""

ROBOT_RGBA = np.array([0.72, 0.74, 0.80, 1.0])
FOOT_RGBA = np.array([0.35, 0.37, 0.42, 1.0])
GHOST_RGBA = np.array([1.0, 0.55, 0.15, 0.30])
COMMAND_RGBA = np.array([0.15, 0.80, 0.25, 1.0])
VELOCITY_RGBA = np.array([0.20, 0.45, 0.95, 1.0])
ARROW_RADIUS = 0.02
_GROUND_PROBES = ((1.3e-4, 0.7e-4), (-0.9e-4, 1.1e-4), (0.6e-4, -1.4e-4))


@dataclass
class GeomBatch:
    """Posed primitive geoms, world frame.

    Attributes:
        kinds: MuJoCo geom types (G,), one of ``DRAWN_GEOM_TYPES``.
        sizes: MuJoCo geom sizes (G, 3): radius / half-length / half-extents by type.
        pos: geom centres (G, 3).
        mats: geom orientations, local-to-world rotation matrices (G, 3, 3).
        rgba: colours in [0, 1] (G, 4).
    """

    kinds: np.ndarray
    sizes: np.ndarray
    pos: np.ndarray
    mats: np.ndarray
    rgba: np.ndarray

    @classmethod
    def empty(cls) -> GeomBatch:
        """A batch of no geoms."""
        return cls(
            np.zeros(0, dtype=np.int64),
            np.zeros((0, 3)),
            np.zeros((0, 3)),
            np.zeros((0, 3, 3)),
            np.zeros((0, 4)),
        )

    def __len__(self) -> int:
        return len(self.kinds)

    def concat(self, other: GeomBatch) -> GeomBatch:
        """This batch followed by ``other``."""
        return GeomBatch(
            np.concatenate([self.kinds, other.kinds]),
            np.concatenate([self.sizes, other.sizes]),
            np.concatenate([self.pos, other.pos]),
            np.concatenate([self.mats, other.mats]),
            np.concatenate([self.rgba, other.rgba]),
        )


@dataclass(frozen=True)
class FollowCamera:
    """A free camera that looks at the robot's root from a fixed distance and angle (MuJoCo conventions).

    Attributes:
        distance: metres from the look-at point.
        azimuth: degrees about the world z axis (0 looks along +x).
        elevation: degrees above the horizontal (negative looks down).
        fovy: vertical field of view, degrees.
        height: z of the look-at point (the root's x, y are followed; its z is not, so the view is steady).
    """

    distance: float = 3.2
    azimuth: float = 150.0
    elevation: float = -15.0
    fovy: float = 45.0
    height: float = 0.7

    def frame(self, lookat: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Camera position, forward, right and up unit vectors (each (3,)) for a look-at point (3,)."""
        az, el = math.radians(self.azimuth), math.radians(self.elevation)
        forward = np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), math.sin(el)])
        right = np.cross(forward, [0.0, 0.0, 1.0])
        right /= np.linalg.norm(right)
        up = np.cross(right, forward)
        return lookat - self.distance * forward, forward, right, up


@dataclass
class ModelLayer:
    """A posed model drawn whole: by MuJoCo's ray casts (software) or MuJoCo's scene (OpenGL).

    Attributes:
        model: the render model.
        data: its ``MjData`` posed with ``mj_kinematics``.
        geomgroup: geom groups drawn by MuJoCo's scene (6,) uint8.
        ray_groups: geom groups rays are cast against (6,) uint8 (the same shapes, see ``trainrt.viz.visual``).
        rgba: colour of every geom (ngeom, 4); alpha below 1 makes the layer translucent.
        static: whether world-body geoms are drawn (the ghost layer draws the robot only).
    """

    model: mujoco.MjModel
    data: mujoco.MjData
    geomgroup: np.ndarray
    ray_groups: np.ndarray
    rgba: np.ndarray
    static: bool = True


@dataclass
class FrameScene:
    """One frame: the posed model, an optional translucent ghost of it, decorations, the camera target.

    Attributes:
        solid: opaque decoration primitives (arrows), ``PRIMITIVE_GEOM_TYPES``.
        ghost: translucent decoration primitives (their alpha is ``rgba[:, 3]``); may be empty.
        lookat: the camera's look-at point (3,).
        shadow_xy: ground points (K, 2) under which a soft contact shadow is drawn (software renderer).
        caption: text lines drawn in the top-left corner (frames of at least 120 rows).
        model: the robot and its world, or None.
        ghost_model: the translucent reference pose of the robot, or None.
    """

    solid: GeomBatch
    ghost: GeomBatch
    lookat: np.ndarray
    shadow_xy: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    caption: list[str] = field(default_factory=list)
    model: ModelLayer | None = None
    ghost_model: ModelLayer | None = None


def _rotation_to(direction: np.ndarray) -> np.ndarray:
    """A rotation matrix (3, 3) whose z axis is the unit vector ``direction`` (3,)."""
    z = direction / np.linalg.norm(direction)
    helper = np.array([1.0, 0.0, 0.0]) if abs(z[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
    x = np.cross(helper, z)
    x /= np.linalg.norm(x)
    return np.stack([x, np.cross(z, x), z], axis=1)


@cold_path
def arrow_geoms(start: np.ndarray, vector: np.ndarray, rgba: np.ndarray) -> GeomBatch:
    """A capsule from ``start`` (3,) along ``vector`` (3,); empty when the vector is (near) zero."""
    length = float(np.linalg.norm(vector))
    if length < 1e-3:
        return GeomBatch.empty()
    return GeomBatch(
        np.array([GEOM_CAPSULE]),
        np.array([[ARROW_RADIUS, length / 2.0, 0.0]]),
        (start + vector / 2.0)[None],
        _rotation_to(vector)[None],
        np.asarray(rgba, dtype=np.float64)[None],
    )


class ScenePoser:
    """Poses a render model for given ``qpos`` rows with CPU MuJoCo (a private model copy).

    Args:
        model: the model drawn: a render model (``trainrt.viz.visual.render_model_for``) or the simulated one.
        source: the model the states belong to when it is not ``model`` (their joints are matched by name,
            ``JointMap``); None: states are ``model``'s.
        geomgroup: geom groups drawn (6,); None draws every group.
        ray_groups: geom groups the software renderer casts rays against (6,); None: ``geomgroup``.
        palette: colour the robot with a uniform grey palette (primitive models); False keeps the model's
            own colours and materials (visual meshes).

    Geoms of a type no renderer draws (``DRAWN_GEOM_TYPES``) fail here with ``NotImplementedError``.
    """

    @cold_path
    def __init__(
        self,
        model: mujoco.MjModel,
        *,
        source: mujoco.MjModel | None = None,
        geomgroup: np.ndarray | None = None,
        ray_groups: np.ndarray | None = None,
        palette: bool = True,
    ) -> None:
        from trainrt.viz.visual import JointMap

        self.model = copy.deepcopy(model)
        self.data = mujoco.MjData(self.model)
        self.ghost_data = mujoco.MjData(self.model)
        self.joint_map = JointMap(source, self.model) if source is not None else None
        groups = np.ones(6, dtype=np.uint8) if geomgroup is None else np.asarray(geomgroup, dtype=np.uint8)
        self.geomgroup = groups
        self.ray_groups = groups if ray_groups is None else np.asarray(ray_groups, dtype=np.uint8)
        m = self.model
        either = groups | self.ray_groups
        drawn = [g for g in range(m.ngeom) if 0 <= m.geom_group[g] < 6 and either[int(m.geom_group[g])]]
        unsupported = [
            f"{mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or g} ({mujoco.mjtGeom(int(m.geom_type[g])).name})"
            for g in drawn
            if int(m.geom_type[g]) not in DRAWN_GEOM_TYPES
        ]
        if unsupported:
            raise NotImplementedError(
                f"the renderers draw {sorted(DRAWN_GEOM_TYPES.values())} geoms; this model also has "
                f"{unsupported}"
            )
        self.robot_geoms = np.array([g for g in drawn if int(m.geom_bodyid[g]) != 0], dtype=np.int64)
        self.world_geoms = np.array([g for g in drawn if int(m.geom_bodyid[g]) == 0], dtype=np.int64)
        rgba = m.geom_rgba.astype(np.float64).copy()
        default = np.array([0.5, 0.5, 0.5, 1.0])
        for g in range(m.ngeom):
            mat = int(m.geom_matid[g])
            if mat >= 0 and np.allclose(rgba[g], default):
                rgba[g] = m.mat_rgba[mat]
        if palette:
            names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(m.ngeom)]
            for g in self.robot_geoms:
                rgba[g] = FOOT_RGBA if "foot" in names[g] or "ankle" in names[g] else ROBOT_RGBA
            m.geom_rgba[self.robot_geoms] = rgba[
                self.robot_geoms
            ]  # the GL renderer reads the model's colours
        rgba[:, 3] = 1.0
        self.rgba = rgba
        ghost = np.broadcast_to(GHOST_RGBA, rgba.shape).copy()
        self.ghost_rgba = ghost
        free = [j for j in range(m.njnt) if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE)]
        self.root_qpos_address = int(m.jnt_qposadr[free[0]]) if free else None
        self.joint_qpos_address = {
            mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j): int(m.jnt_qposadr[j])
            for j in range(m.njnt)
            if int(m.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        }

    def render_qpos(self, qpos: np.ndarray) -> np.ndarray:
        """The render model's qpos (nq,) of a state ``qpos`` of the source model."""
        qpos = np.asarray(qpos, dtype=np.float64)
        return self.joint_map(qpos) if self.joint_map is not None else qpos

    @cold_path
    def qpos_from_pose(
        self,
        root_pos: np.ndarray,
        root_quat: np.ndarray,
        joint_names: tuple[str, ...] | list[str],
        joint_pos: np.ndarray,
    ) -> np.ndarray:
        """A render-model ``qpos`` (nq,): ``qpos0`` with the root pose (3,), (4,) wxyz and named joints (J,)."""
        qpos = self.model.qpos0.astype(np.float64).copy()
        if self.root_qpos_address is not None:
            a = self.root_qpos_address
            qpos[a : a + 3] = root_pos
            qpos[a + 3 : a + 7] = root_quat
        for name, value in zip(joint_names, joint_pos):
            qpos[self.joint_qpos_address[name]] = value
        return qpos

    @cold_path
    def root_position(self, qpos: np.ndarray) -> np.ndarray:
        """The root position (3,) of a render-model ``qpos`` (the origin when the model has no free joint)."""
        if self.root_qpos_address is None:
            return np.zeros(3)
        return np.asarray(qpos[self.root_qpos_address : self.root_qpos_address + 3], dtype=np.float64)

    @cold_path
    def ground_height(self, point: np.ndarray) -> float:
        """Height of the world's geoms under ``point`` (3,): a ray cast down against the world's geom groups
        (0 when they share a group with the robot, or nothing is hit), so the camera rises with the terrain."""
        m = self.model
        world = {int(m.geom_group[g]) for g in self.world_geoms if self.ray_groups[int(m.geom_group[g])]}
        robot = {int(m.geom_group[g]) for g in self.robot_geoms}
        if not world or world & robot or max(world) > 5:
            return 0.0
        groups = np.zeros(6, dtype=np.uint8)
        groups[sorted(world)] = 1
        geomid = np.zeros(1, dtype=np.int32)
        hits = []
        for dx, dy in _GROUND_PROBES:  # a ray through a mesh vertex or edge can slip between its triangles
            start = np.array([point[0] + dx, point[1] + dy, point[2] + 2.0])
            dist = mujoco.mj_ray(m, self.data, start, np.array([0.0, 0.0, -1.0]), groups, 1, -1, geomid)
            if dist >= 0:
                hits.append(float(start[2] - dist))
        return max(hits) if hits else 0.0

    @cold_path
    def body_position(self, qpos: np.ndarray, body: str) -> np.ndarray:
        """World position (3,) of ``body`` of the render model at a source-model state ``qpos``."""
        self.data.qpos[:] = self.render_qpos(qpos)
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.xpos[self.model.body(body).id].copy()

    @cold_path
    def scene(
        self,
        qpos: np.ndarray,
        *,
        camera: FollowCamera,
        ghost_qpos: np.ndarray | None = None,
        extra: GeomBatch | None = None,
        caption: list[str] | None = None,
        render_space: bool = False,
    ) -> FrameScene:
        """The frame of a robot at state ``qpos`` (the source model's (nq_source,); the render model's with
        ``render_space``, as ``qpos_from_pose`` gives) with an optional ghost at the render-model
        ``ghost_qpos`` and extra decoration geoms."""
        qpos = np.asarray(qpos, dtype=np.float64) if render_space else self.render_qpos(qpos)
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        layer = ModelLayer(self.model, self.data, self.geomgroup, self.ray_groups, self.rgba, True)
        ghost_layer = None
        if ghost_qpos is not None and len(self.robot_geoms):
            self.ghost_data.qpos[:] = np.asarray(ghost_qpos, dtype=np.float64)
            mujoco.mj_kinematics(self.model, self.ghost_data)
            ghost_layer = ModelLayer(
                self.model, self.ghost_data, self.geomgroup, self.ray_groups, self.ghost_rgba, False
            )
        root = self.root_position(qpos)
        lookat = np.array([root[0], root[1], self.ground_height(root) + camera.height])
        solid = extra if extra is not None else GeomBatch.empty()
        return FrameScene(
            solid, GeomBatch.empty(), lookat, root[None, :2].copy(), list(caption or []), layer, ghost_layer
        )
