"""Model loading: MJCF -> MjModel with a headless variant, a floor, solver options and PD position servos.

Cold path only (runs once at construction); NumPy is used here on host-side model arrays.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from simcore._src.terrain_mesh import TERRAIN_GEOM_GROUP, TerrainMesh, add_terrain_mesh

# BeyondMimic-style gains: each joint is a second-order system with its reflected rotor inertia (armature) as
# the dominant inertia; a 10 Hz natural frequency and a damping ratio of 2 (overdamped) give stiff but calm
# tracking that a 50 Hz policy can command without exciting oscillations.
PD_NATURAL_FREQUENCY_HZ = 10.0
PD_DAMPING_RATIO = 2.0

FLOOR_NAME = "floor"

SELF_COLLISION_SENSOR = "self_collision"
"""Name of the contact sensor ``load_model(self_collision_pairs=...)`` adds: per world, the number of contacts
between the robot's own geoms (one float, ``data="found"``)."""

_MAX_COLLISION_PAIRS = 31  # contype/conaffinity bits 1..31; bit 0 is the floor's


@dataclass(frozen=True)
class PdGains:
    """Per-actuator PD servo gains: stiffness kp, damping kd and effort limit, each shaped ``(nu,)``."""

    kp: np.ndarray
    kd: np.ndarray
    effort_limit: np.ndarray

    def __post_init__(self) -> None:
        for name in ("kp", "kd", "effort_limit"):  # lists and tuples are taken as (nu,) float arrays
            try:
                object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.float64))
            except (TypeError, ValueError):
                raise ValueError(f"PdGains.{name} must be numbers, got {getattr(self, name)!r}") from None
        shapes = {self.kp.shape, self.kd.shape, self.effort_limit.shape}
        if len(shapes) != 1 or self.kp.ndim != 1:
            raise ValueError(f"PdGains arrays must share one (nu,) shape, got {sorted(shapes)}")
        for name in ("kp", "kd", "effort_limit"):
            values = getattr(self, name)
            if not np.all(np.isfinite(values)) or np.any(values < 0):
                raise ValueError(f"PdGains.{name} must be finite and non-negative, got {values}")


def pd_gains_from_armature(
    model: mujoco.MjModel,
    natural_frequency_hz: float = PD_NATURAL_FREQUENCY_HZ,
    damping_ratio: float = PD_DAMPING_RATIO,
) -> PdGains:
    """Derive PD gains from each actuated joint's armature: kp = I w^2, kd = 2 zeta I w.

    The effort limit is the joint's actuator force range (the motor's rated peak torque) or, where the joint has
    none, the motor's control range.
    """
    if model.nu == 0:
        raise ValueError("model has no actuators; PD gains need one actuator per joint")
    omega = 2.0 * math.pi * natural_frequency_hz
    kp, kd, limit = np.zeros(model.nu), np.zeros(model.nu), np.zeros(model.nu)
    for i in range(model.nu):
        if model.actuator_trntype[i] != mujoco.mjtTrn.mjTRN_JOINT:
            raise NotImplementedError(
                f"actuator {i} does not drive a joint; only joint actuators get PD gains"
            )
        joint = model.actuator_trnid[i, 0]
        armature = float(model.dof_armature[model.jnt_dofadr[joint]])
        if armature <= 0:
            raise ValueError(f"joint {model.joint(joint).name!r} has no armature; pass explicit PdGains")
        kp[i] = armature * omega**2
        kd[i] = 2.0 * damping_ratio * armature * omega
        if model.jnt_actfrclimited[joint]:
            limit[i] = float(np.max(np.abs(model.jnt_actfrcrange[joint])))
        elif model.actuator_ctrllimited[i]:
            limit[i] = float(np.max(np.abs(model.actuator_ctrlrange[i])))
        else:
            raise ValueError(f"actuator {i} has no effort limit (no ctrlrange, no actuatorfrcrange)")
    return PdGains(kp=kp, kd=kd, effort_limit=limit)


def _is_visual_only(geom: mujoco.MjsGeom) -> bool:
    return geom.contype == 0 and geom.conaffinity == 0


def _is_terrain(spec: mujoco.MjSpec, geom: mujoco.MjsGeom) -> bool:
    """The floor, and every colliding geom of the world body (heightfields, steps, static meshes)."""
    if _is_visual_only(geom):
        return False
    return geom.name == FLOOR_NAME or geom.parent.name == spec.worldbody.name


@dataclass(frozen=True, eq=False)
class Heightfield:
    """A heightfield terrain geom ``add_heightfield`` adds to the world body.

    Attributes:
        heights: elevations in meters, shaped ``(nrow, ncol)`` with nrow, ncol >= 2. ``heights[r, c]`` lies at
            ``x = pos[0] + half_extent[0] * (2 c / (ncol - 1) - 1)``, ``y = pos[1] + half_extent[1] * (2 r /
            (nrow - 1) - 1)`` and ``z = pos[2] + heights[r, c]`` (rows run along y, columns along x).
        half_extent: half sizes ``(hx, hy)`` of the field in x and y, meters.
        pos: world position of the field's center at height 0.
        base_thickness: depth of the solid base below the lowest elevation, meters (> 0).
        name: geom name (the hfield asset is named ``<name>_hfield``).
        friction: sliding friction; None takes ``load_model``'s ``floor_friction`` (0.4 outside it).
    """

    heights: np.ndarray
    half_extent: tuple[float, float]
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    base_thickness: float = 0.1
    name: str = "terrain"
    friction: float | None = None

    def __post_init__(self) -> None:
        try:
            heights = np.array(self.heights, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError("Heightfield.heights must be a (nrow, ncol) array of numbers") from None
        if heights.ndim != 2 or min(heights.shape) < 2:
            raise ValueError(
                f"Heightfield.heights must be (nrow, ncol) with nrow, ncol >= 2, got {heights.shape}"
            )
        if not np.isfinite(heights).all():
            raise ValueError("Heightfield.heights must be finite")
        heights.flags.writeable = False
        object.__setattr__(self, "heights", heights)
        extent = tuple(float(v) for v in self.half_extent)
        if len(extent) != 2 or not all(math.isfinite(v) and v > 0 for v in extent):
            raise ValueError(
                f"Heightfield.half_extent must be two positive numbers, got {self.half_extent!r}"
            )
        object.__setattr__(self, "half_extent", extent)
        pos = tuple(float(v) for v in self.pos)
        if len(pos) != 3 or not all(math.isfinite(v) for v in pos):
            raise ValueError(f"Heightfield.pos must be three finite numbers, got {self.pos!r}")
        object.__setattr__(self, "pos", pos)
        if not (math.isfinite(self.base_thickness) and self.base_thickness > 0):
            raise ValueError(f"Heightfield.base_thickness must be positive, got {self.base_thickness!r}")
        if self.friction is not None and not (math.isfinite(self.friction) and self.friction >= 0):
            raise ValueError(f"Heightfield.friction must be a non-negative number, got {self.friction!r}")
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Heightfield.name must be a non-empty string, got {self.name!r}")


_MIN_HFIELD_RANGE = 1e-3  # MuJoCo needs a positive elevation scale; a flat field gets this one

HEIGHTFIELD_BLOCK_M = 8.0
"""Largest side, in meters, of one heightfield geom: ``add_heightfield`` splits a larger field into blocks.

MuJoCo Warp tests a geom against a heightfield's prisms in float32, in the field's own frame. Far from the
field's centre (tens of meters) those tests lose precision: on a 180 m by 100 m field a G1 foot resting on
flat ground 68 m from the centre got a contact 5.6 m deep and the robot was thrown off (MuJoCo, in float64,
found the 1 cm it was). Blocks keep every prism within a few meters of its own geom's origin. Neighbouring
blocks share their edge samples, so the surface is the same; a geom over a seam touches both blocks."""


def _block_edges(samples: int, spacing: float) -> list[tuple[int, int]]:
    """First and last sample of each block along one axis: at most ``HEIGHTFIELD_BLOCK_M`` long, sharing the
    boundary sample with the next block, as even in size as the samples allow."""
    cells = samples - 1
    blocks = max(1, math.ceil(cells * spacing / HEIGHTFIELD_BLOCK_M - 1e-9))
    cuts = [round(i * cells / blocks) for i in range(blocks + 1)]
    return [(a, b) for a, b in itertools.pairwise(cuts) if b > a]


def heightfield_blocks(field: Heightfield) -> list[Heightfield]:
    """``field`` as the blocks ``add_heightfield`` adds (``HEIGHTFIELD_BLOCK_M``): itself when small enough,
    else ``<name>_<row>_<col>`` pieces that together cover the same samples at the same places."""
    nrow, ncol = field.heights.shape
    hx, hy = field.half_extent
    dx, dy = 2.0 * hx / (ncol - 1), 2.0 * hy / (nrow - 1)
    rows, cols = _block_edges(nrow, dy), _block_edges(ncol, dx)
    if len(rows) == 1 and len(cols) == 1:
        return [field]
    blocks = []
    for i, (r0, r1) in enumerate(rows):
        for j, (c0, c1) in enumerate(cols):
            centre = (
                field.pos[0] - hx + 0.5 * (c0 + c1) * dx,
                field.pos[1] - hy + 0.5 * (r0 + r1) * dy,
                field.pos[2],
            )
            blocks.append(
                dataclasses.replace(
                    field,
                    heights=field.heights[r0 : r1 + 1, c0 : c1 + 1],
                    half_extent=(0.5 * (c1 - c0) * dx, 0.5 * (r1 - r0) * dy),
                    pos=centre,
                    name=f"{field.name}_{i}_{j}",
                )
            )
    return blocks


def add_heightfield(spec: mujoco.MjSpec, field: Heightfield, friction: float = 0.4) -> list[mujoco.MjsGeom]:
    """Add ``field`` to ``spec`` before compiling: hfield assets and static geoms on the world body.

    A field no larger than ``HEIGHTFIELD_BLOCK_M`` on each side is one geom named ``field.name``; a larger one
    is split into blocks named ``<name>_<row>_<col>`` (``heightfield_blocks``). Each geom collides with
    everything (contype and conaffinity 1), lies in ``TERRAIN_GEOM_GROUP`` and is opaque (rays skip invisible
    geoms). Its friction is ``field.friction``, else ``friction``. Simulating the compiled model needs a
    backend that declares ``Capability.HEIGHTFIELD``. All worlds share one terrain: place worlds on different
    parts of one field to give them different ground. Returns the geoms added.
    """
    if not isinstance(field, Heightfield):
        raise ValueError(f"expected a simcore.Heightfield, got {type(field).__name__}")
    blocks = heightfield_blocks(field)
    names = {g.name for g in spec.geoms}
    taken = sorted(names & ({field.name} | {b.name for b in blocks}))
    if taken:
        raise ValueError(
            f"the model already has a geom named {taken[0]!r}; give the Heightfield another name"
        )
    return [_add_heightfield_geom(spec, block, friction) for block in blocks]


def _add_heightfield_geom(spec: mujoco.MjSpec, field: Heightfield, friction: float) -> mujoco.MjsGeom:
    """One hfield asset and its geom (``add_heightfield`` after the split)."""
    low = float(field.heights.min())
    scale = float(field.heights.max()) - low
    data = (field.heights - low) / scale if scale > 0 else np.zeros_like(field.heights)
    asset = spec.add_hfield()
    asset.name = f"{field.name}_hfield"
    asset.nrow, asset.ncol = field.heights.shape
    asset.size = [*field.half_extent, max(scale, _MIN_HFIELD_RANGE), field.base_thickness]
    asset.userdata = data.ravel().tolist()
    geom = spec.worldbody.add_geom()
    geom.name = field.name
    geom.type = mujoco.mjtGeom.mjGEOM_HFIELD
    geom.hfieldname = asset.name
    geom.pos = [field.pos[0], field.pos[1], field.pos[2] + low]
    geom.contype, geom.conaffinity = 1, 1
    geom.group = TERRAIN_GEOM_GROUP
    geom.rgba = [0.5, 0.5, 0.5, 1.0]
    sliding = field.friction if field.friction is not None else friction
    geom.friction = [sliding, 0.005, 0.0001]
    return geom


def _strip_visuals(spec: mujoco.MjSpec, collision_meshes: bool = False) -> dict[str, str]:
    """Drop visual-only geoms (no collision, no mass since their density is 0) and unused mesh assets.

    A kept primitive geom that names a mesh uses it to fit its size (``<geom type="box" mesh="...">``), so
    that mesh stays (and its file is read). Returns ``{mesh name: geom name}`` of the meshes kept that way.
    """
    for geom in list(spec.geoms):
        if geom.type == mujoco.mjtGeom.mjGEOM_MESH and not _is_visual_only(geom) and not collision_meshes:
            raise NotImplementedError(
                f"geom {geom.name!r} is a colliding mesh; the headless variant keeps primitive collision only "
                "unless load_model(collision_meshes=True) (its file is then read; it collides as its convex "
                "hull and needs a backend that declares Capability.COLLISION_MESH)"
            )
        if _is_visual_only(geom) and geom.name != FLOOR_NAME:
            spec.delete(geom)
    fitted = {g.meshname: g.name for g in spec.geoms if g.meshname}
    used = {g.meshname for g in spec.geoms if g.meshname}
    for mesh in list(spec.meshes):
        if mesh.name not in used:
            spec.delete(mesh)
    return fitted


def _mesh_use(spec: mujoco.MjSpec, geom_name: str) -> str:
    geom = spec.geom(geom_name)
    return (
        "collides with it"
        if geom is not None and geom.type == mujoco.mjtGeom.mjGEOM_MESH
        else "fits its size to it"
    )


def check_actuated_joints(model: mujoco.MjModel, expected: Sequence[str], robot: str = "model") -> None:
    """``ValueError`` naming the joints without an actuator, the unexpected ones, or the first order mismatch.

    Args:
        model: the compiled model.
        expected: joint names the actuators must drive, in actuator order.
        robot: what to call the model in the message (e.g. ``"G1"``).
    """
    driven = [
        mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, model.actuator_trnid[i, 0])
        for i in range(model.nu)
    ]
    if driven == list(expected):
        return
    missing = [name for name in expected if name not in driven]
    extra = [name for name in driven if name not in expected]
    problems = []
    if missing:
        problems.append(f"no actuator drives joint(s) {missing}")
    if extra:
        problems.append(f"actuators drive unexpected joint(s) {extra}")
    if not problems:
        index = next(i for i, (a, b) in enumerate(zip(driven, expected)) if a != b)
        actuator = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, index)
        problems.append(
            f"actuator {index} ({actuator!r}) drives {driven[index]!r}, expected {expected[index]!r} there"
        )
    raise ValueError(
        f"{robot} actuators do not match its {len(expected)} joints: "
        + "; ".join(problems)
        + f" ({model.nu} actuators); add or fix the <actuator> entries of the MJCF"
    )


def _add_floor(spec: mujoco.MjSpec, floor_friction: float, floor_height: float = 0.0) -> None:
    """Add a ground plane named ``floor`` and route contacts through geom collision bits.

    Explicit contact pairs against the floor are removed: foot friction then comes from the foot geoms
    (MuJoCo takes the larger of the two geoms' friction), so per-world friction randomization of the foot geoms
    is what the physics sees. The floor's own friction is the lower bound.
    """
    for pair in list(spec.pairs):
        spec.delete(pair)
    if not any(g.name == FLOOR_NAME for g in spec.geoms):
        floor = spec.worldbody.add_geom()
        floor.name = FLOOR_NAME
        floor.type = mujoco.mjtGeom.mjGEOM_PLANE
        floor.size = [0.0, 0.0, 0.05]
        floor.pos = [0.0, 0.0, floor_height]
    for geom in spec.geoms:
        if geom.name == FLOOR_NAME:
            geom.contype, geom.conaffinity = 1, 1
            geom.friction = [floor_friction, 0.005, 0.0001]
            geom.group = TERRAIN_GEOM_GROUP


def _mark_terrain(spec: mujoco.MjSpec) -> None:
    """Every terrain geom (``_is_terrain``) collides with the robot and lies in ``TERRAIN_GEOM_GROUP``."""
    for geom in spec.geoms:
        if _is_terrain(spec, geom):
            geom.contype, geom.conaffinity = 1, 1
            geom.group = TERRAIN_GEOM_GROUP


def _disable_self_collision(spec: mujoco.MjSpec) -> None:
    """Robot geoms collide with the terrain only (contype 1, conaffinity 0): fewer contacts, faster steps."""
    for geom in spec.geoms:
        if not _is_terrain(spec, geom) and not _is_visual_only(geom):
            geom.contype, geom.conaffinity = 1, 0


def _enable_collision_pairs(spec: mujoco.MjSpec, pairs: Sequence[tuple[str, str]]) -> None:
    """Let the collision geoms of each pair's two body groups touch; add the ``SELF_COLLISION_SENSOR``.

    Runs after ``_disable_self_collision`` (robot geoms: contype 1, conaffinity 0). Pair ``k`` gets bit
    ``k + 1``: the first group's geoms set it in ``contype``, the second group's in ``conaffinity``. MuJoCo
    collides two geoms when ``contype`` of one shares a bit with ``conaffinity`` of the other, so exactly the
    listed pairs (and the floor, bit 0) collide, and the broadphase still filters them like any other contact.
    """
    if isinstance(pairs, str) or len(pairs) > _MAX_COLLISION_PAIRS:
        raise ValueError(
            f"self_collision_pairs must be a sequence of at most {_MAX_COLLISION_PAIRS} (pattern, pattern) "
            f"pairs, got {pairs!r}"
        )
    colliding: dict[str, list[mujoco.MjsGeom]] = {}
    for geom in spec.geoms:
        if not _is_terrain(spec, geom) and not _is_visual_only(geom):
            colliding.setdefault(geom.parent.name, []).append(geom)
    roots: set[str] = set()
    for index, pair in enumerate(pairs):
        if len(pair) != 2 or not all(isinstance(p, str) for p in pair):
            raise ValueError(f"self_collision_pairs[{index}] must be two body-name patterns, got {pair!r}")
        groups = []
        for pattern in pair:
            bodies = [name for name in colliding if re.fullmatch(pattern, name)]
            if not bodies:
                raise ValueError(
                    f"self_collision_pairs[{index}]: pattern {pattern!r} matches no body with collision geoms; "
                    f"bodies with collision geoms: {sorted(colliding)}"
                )
            groups.append(bodies)
        shared = sorted(set(groups[0]) & set(groups[1]))
        if shared:
            raise ValueError(f"self_collision_pairs[{index}]: bodies {shared} are on both sides of {pair!r}")
        bit = 1 << (index + 1)
        for body in groups[0]:
            for geom in colliding[body]:
                geom.contype |= bit
        for body in groups[1]:
            for geom in colliding[body]:
                geom.conaffinity |= bit
        for body in groups[0] + groups[1]:
            element = spec.body(body)
            while element.parent.name != spec.worldbody.name:
                element = element.parent
            roots.add(element.name)
    if len(roots) != 1:
        raise NotImplementedError(
            f"self_collision_pairs span the bodies of {sorted(roots)}; pairs within one robot only"
        )
    root = roots.pop()
    sensor = spec.add_sensor()
    sensor.name = SELF_COLLISION_SENSOR
    sensor.type = mujoco.mjtSensor.mjSENS_CONTACT
    sensor.objtype, sensor.objname = mujoco.mjtObj.mjOBJ_XBODY, root
    sensor.reftype, sensor.refname = mujoco.mjtObj.mjOBJ_XBODY, root
    sensor.intprm[0:3] = [1, 0, 1]  # data "found", no reduction, one slot: the count of matching contacts


def apply_pd_servos(model: mujoco.MjModel, gains: PdGains) -> None:
    """Turn every joint actuator into a force-limited PD position servo: ctrl is the target position."""
    if gains.kp.shape != (model.nu,):
        raise ValueError(f"PdGains has {gains.kp.shape[0]} entries, model has nu={model.nu}")
    model.actuator_gaintype[:] = mujoco.mjtGain.mjGAIN_FIXED
    model.actuator_biastype[:] = mujoco.mjtBias.mjBIAS_AFFINE
    model.actuator_gainprm[:] = 0.0
    model.actuator_biasprm[:] = 0.0
    model.actuator_gainprm[:, 0] = gains.kp
    model.actuator_biasprm[:, 1] = -gains.kp
    model.actuator_biasprm[:, 2] = -gains.kd
    model.actuator_forcelimited[:] = 1
    model.actuator_forcerange[:, 0] = -gains.effort_limit
    model.actuator_forcerange[:, 1] = gains.effort_limit
    model.actuator_ctrllimited[:] = 0


def load_model(
    mjcf_path: str | Path,
    *,
    headless: bool = True,
    timestep: float = 0.005,
    solver_iterations: int = 10,
    ls_iterations: int = 20,
    pd: PdGains | None = None,
    pd_from_armature: bool = False,
    add_floor: bool = True,
    floor_friction: float = 0.4,
    floor_height: float = 0.0,
    self_collision: bool = False,
    self_collision_pairs: Sequence[tuple[str, str]] = (),
    heightfields: Sequence[Heightfield] = (),
    collision_meshes: bool = False,
    terrain_meshes: Sequence[TerrainMesh] = (),
) -> mujoco.MjModel:
    """Load an MJCF file into a physics-ready MjModel.

    Args:
        mjcf_path: path of the MJCF file.
        headless: drop visual-only geoms and unused meshes, so mesh files are never read.
        timestep: physics timestep in seconds.
        solver_iterations: constraint solver iterations (``opt.iterations``).
        ls_iterations: line-search iterations (``opt.ls_iterations``).
        pd: explicit PD servo gains, one entry per actuator.
        pd_from_armature: derive PD gains from joint armature (see ``pd_gains_from_armature``).
        add_floor: add a ground plane named ``floor`` (replacing explicit floor contact pairs).
        floor_friction: sliding friction of the floor, the lower bound of every floor contact.
        floor_height: height of the added floor, meters (below a terrain's lowest point, the floor catches
            what leaves the terrain without filling its pits).
        self_collision: keep robot-robot collisions (off by default: fewer contacts).
        self_collision_pairs: with ``self_collision`` off, enable only these robot-robot contacts: pairs of body
            name patterns (regular expressions, full match); the collision geoms of bodies matching the first
            may touch those of bodies matching the second (at most 31 pairs; MuJoCo still skips parent-child
            bodies). Adds the contact sensor ``SELF_COLLISION_SENSOR`` that counts the robot's own contacts
            per world. Default none: the model is unchanged.
        heightfields: terrain to add to the world body (see ``add_heightfield``; friction defaults to
            ``floor_friction``). The compiled model needs a backend that declares ``Capability.HEIGHTFIELD``.
        collision_meshes: keep colliding mesh geoms (their files are read) instead of refusing them; each
            collides as its convex hull, and the model needs a backend that declares
            ``Capability.COLLISION_MESH``.
        terrain_meshes: static colliding meshes to add to the world body (see ``add_terrain_mesh``: one geom
            per closed convex piece; friction defaults to ``floor_friction``). The compiled model needs a
            backend that declares ``Capability.COLLISION_MESH``.

    Terrain: the floor, the heightfields and every other colliding geom of the world body (a heightfield or
    step the MJCF itself holds) collide with the robot and lie in ``TERRAIN_GEOM_GROUP``, which rays see.
    """
    path = Path(mjcf_path)
    if not path.is_file():
        raise FileNotFoundError(f"MJCF file not found: {path}")
    if timestep <= 0 or not math.isfinite(timestep):
        raise ValueError(f"timestep must be a positive finite number, got {timestep}")
    for name, value in (("solver_iterations", solver_iterations), ("ls_iterations", ls_iterations)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an int, got {value!r}")
    if solver_iterations < 1 or ls_iterations < 1:
        raise ValueError(f"solver/ls iterations must be >= 1, got {solver_iterations}, {ls_iterations}")
    if pd is not None and pd_from_armature:
        raise ValueError("pass either pd or pd_from_armature, not both")
    if self_collision and self_collision_pairs:
        raise ValueError(
            "self_collision=True already keeps every robot-robot contact; drop self_collision_pairs"
        )
    spec = mujoco.MjSpec.from_file(str(path))
    if isinstance(heightfields, Heightfield):
        heightfields = (heightfields,)
    fitted = _strip_visuals(spec, collision_meshes) if headless else {}
    for field in heightfields:
        add_heightfield(spec, field, friction=floor_friction)
    if isinstance(terrain_meshes, TerrainMesh):
        terrain_meshes = (terrain_meshes,)
    for mesh in terrain_meshes:
        add_terrain_mesh(spec, mesh, friction=floor_friction)
    if not math.isfinite(floor_height):
        raise ValueError(f"floor_height must be a finite number, got {floor_height!r}")
    if add_floor:
        _add_floor(spec, floor_friction, floor_height)
    _mark_terrain(spec)
    if not self_collision:
        _disable_self_collision(spec)
    if self_collision_pairs:
        _enable_collision_pairs(spec, self_collision_pairs)
    try:
        model = spec.compile()
    except ValueError as err:
        kept = [f"mesh {mesh!r} (geom {geom!r} {_mesh_use(spec, geom)})" for mesh, geom in fitted.items()]
        why = f"; the headless variant keeps {', '.join(kept)}: its file must exist" if kept else ""
        raise ValueError(f"could not compile {path}: {err}{why}") from err
    model.opt.timestep = timestep
    model.opt.iterations = solver_iterations
    model.opt.ls_iterations = ls_iterations
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    gains = pd_gains_from_armature(model) if pd_from_armature else pd
    if gains is not None:
        apply_pd_servos(model, gains)
    return model
