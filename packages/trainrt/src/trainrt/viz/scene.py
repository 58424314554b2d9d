"""What a frame shows: primitive geoms posed by CPU MuJoCo, a follow camera, and the decorations we add.

Every renderer draws the same ``FrameScene``: the posed geoms of the model (robot and floor), an optional
translucent ghost (the tracking reference), and extra primitives such as command arrows. Posing is CPU
MuJoCo forward kinematics (``mj_kinematics``) on a private ``MjData``; the training state is never touched.
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
DRAWN_GEOM_TYPES: dict[int, str] = {
    GEOM_PLANE: "plane",
    GEOM_SPHERE: "sphere",
    GEOM_CAPSULE: "capsule",
    GEOM_ELLIPSOID: "ellipsoid",
    GEOM_CYLINDER: "cylinder",
    GEOM_BOX: "box",
}
"""Geom types every renderer draws (the headless G1 uses only these)."""

ROBOT_RGBA = np.array([0.72, 0.74, 0.80, 1.0])
FOOT_RGBA = np.array([0.35, 0.37, 0.42, 1.0])
GHOST_RGBA = np.array([1.0, 0.55, 0.15, 0.40])
COMMAND_RGBA = np.array([0.15, 0.80, 0.25, 1.0])
VELOCITY_RGBA = np.array([0.20, 0.45, 0.95, 1.0])
ARROW_RADIUS = 0.02


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
class FrameScene:
    """One frame: solid geoms (robot, floor, arrows), an optional translucent ghost, the camera target.

    Attributes:
        solid: opaque geoms.
        ghost: translucent geoms drawn over the solid ones (their alpha is ``rgba[:, 3]``); may be empty.
        lookat: the camera's look-at point (3,).
        shadow_xy: ground points (K, 2) under which a soft contact shadow is drawn (software renderer).
        caption: text lines drawn in the top-left corner (frames of at least 120 rows).
    """

    solid: GeomBatch
    ghost: GeomBatch
    lookat: np.ndarray
    shadow_xy: np.ndarray = field(default_factory=lambda: np.zeros((0, 2)))
    caption: list[str] = field(default_factory=list)


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
    """Poses the geoms of a MuJoCo model for given ``qpos`` rows with CPU MuJoCo (a private model copy).

    Robot geoms (those not on the world body) get an opaque palette; the floor keeps its colour; geoms of
    a type no renderer draws (meshes, height fields) fail here with ``NotImplementedError`` naming them.

    Args:
        model: the model the states belong to (the env's ``backend.mj_model`` or ``simcore.load_model``).
    """

    @cold_path
    def __init__(self, model: mujoco.MjModel) -> None:
        self.model = copy.deepcopy(model)
        self.data = mujoco.MjData(self.model)
        m = self.model
        unsupported = [
            f"{mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or g} ({mujoco.mjtGeom(int(m.geom_type[g])).name})"
            for g in range(m.ngeom)
            if int(m.geom_type[g]) not in DRAWN_GEOM_TYPES
        ]
        if unsupported:
            raise NotImplementedError(
                f"the renderers draw {sorted(DRAWN_GEOM_TYPES.values())} geoms; this model also has "
                f"{unsupported}"
            )
        self.robot_geoms = np.array([g for g in range(m.ngeom) if int(m.geom_bodyid[g]) != 0], dtype=np.int64)
        self.world_geoms = np.array([g for g in range(m.ngeom) if int(m.geom_bodyid[g]) == 0], dtype=np.int64)
        rgba = m.geom_rgba.astype(np.float64).copy()
        names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or "" for g in range(m.ngeom)]
        for g in self.robot_geoms:
            rgba[g] = FOOT_RGBA if "foot" in names[g] or "ankle" in names[g] else ROBOT_RGBA
        for g in self.world_geoms:
            rgba[g, 3] = 1.0
        self.rgba = rgba
        m.geom_rgba[:] = rgba  # the GL renderer reads the model's colours
        free = [j for j in range(m.njnt) if int(m.jnt_type[j]) == int(mujoco.mjtJoint.mjJNT_FREE)]
        self.root_qpos_address = int(m.jnt_qposadr[free[0]]) if free else None
        self.joint_qpos_address = {
            mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j): int(m.jnt_qposadr[j])
            for j in range(m.njnt)
            if int(m.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        }

    @cold_path
    def qpos_from_pose(
        self,
        root_pos: np.ndarray,
        root_quat: np.ndarray,
        joint_names: tuple[str, ...] | list[str],
        joint_pos: np.ndarray,
    ) -> np.ndarray:
        """A full ``qpos`` (nq,): ``qpos0`` with the root pose (3,), (4,) wxyz and named joint angles (J,)."""
        qpos = self.model.qpos0.astype(np.float64).copy()
        if self.root_qpos_address is not None:
            a = self.root_qpos_address
            qpos[a : a + 3] = root_pos
            qpos[a + 3 : a + 7] = root_quat
        for name, value in zip(joint_names, joint_pos):
            qpos[self.joint_qpos_address[name]] = value
        return qpos

    @cold_path
    def pose(self, qpos: np.ndarray, geoms: np.ndarray, rgba: np.ndarray | None = None) -> GeomBatch:
        """The ``geoms`` (G,) posed at ``qpos`` (nq,); colours ``rgba`` (4,) for all, or the palette."""
        if len(geoms) == 0:
            return GeomBatch.empty()
        self.data.qpos[:] = qpos
        mujoco.mj_kinematics(self.model, self.data)
        m, d = self.model, self.data
        colours = np.broadcast_to(rgba, (len(geoms), 4)).copy() if rgba is not None else self.rgba[geoms]
        return GeomBatch(
            m.geom_type[geoms].astype(np.int64),
            m.geom_size[geoms].astype(np.float64),
            d.geom_xpos[geoms].astype(np.float64).copy(),
            d.geom_xmat[geoms].reshape(-1, 3, 3).astype(np.float64).copy(),
            colours,
        )

    @cold_path
    def root_position(self, qpos: np.ndarray) -> np.ndarray:
        """The root position (3,) of ``qpos`` (the origin when the model has no free joint)."""
        if self.root_qpos_address is None:
            return np.zeros(3)
        return np.asarray(qpos[self.root_qpos_address : self.root_qpos_address + 3], dtype=np.float64)

    @cold_path
    def scene(
        self,
        qpos: np.ndarray,
        *,
        camera: FollowCamera,
        ghost_qpos: np.ndarray | None = None,
        extra: GeomBatch | None = None,
        caption: list[str] | None = None,
    ) -> FrameScene:
        """The frame of a robot at ``qpos`` (nq,), with an optional ghost at ``ghost_qpos`` and extra geoms."""
        qpos = np.asarray(qpos, dtype=np.float64)
        solid = self.pose(qpos, self.world_geoms).concat(self.pose(qpos, self.robot_geoms))
        if extra is not None:
            solid = solid.concat(extra)
        root = self.root_position(qpos)
        shadows = [root[:2]]
        ghost = GeomBatch.empty()
        if ghost_qpos is not None:
            ghost = self.pose(np.asarray(ghost_qpos, dtype=np.float64), self.robot_geoms, GHOST_RGBA)
        lookat = np.array([root[0], root[1], camera.height])
        return FrameScene(solid, ghost, lookat, np.array(shadows), list(caption or []))
