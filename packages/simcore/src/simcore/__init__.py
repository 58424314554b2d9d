"""simcore: a simulation contract over MuJoCo (CPU) and MuJoCo Warp (GPU).

Capability-declared backends with fixed-shape torch state carriers, read plans and ray casts negotiated by name, terrain (heightfields, collision meshes), packed
masked reset transactions, and a CUDA graph lifecycle (capture, replay, invalidate, eager fallback).
Public names live here; implementation lives in ``simcore._src``.
"""

from simcore._src.backend import SimBackend
from simcore._src.capability import Capability
from simcore._src.config import SimConfig
from simcore._src.diagnostics import BackendDiagnostics
from simcore._src.factory import make_backend, set_backend_log_level
from simcore._src.graph import CapturedWork, garbage_held_during_capture
from simcore._src.kernel_cache import KernelCache, kernel_cache, set_kernel_cache_dir
from simcore._src.model import (
    HEIGHTFIELD_BLOCK_M,
    SELF_COLLISION_SENSOR,
    TERRAIN_GEOM_GROUP,
    Heightfield,
    PdGains,
    add_heightfield,
    check_actuated_joints,
    heightfield_blocks,
    load_model,
    pd_gains_from_armature,
)
from simcore._src.pose import pose_qpos, standing_root_height
from simcore._src.ray_cast import RayCast, RayPattern
from simcore._src.read_plan import ReadPlan
from simcore._src.reset import ResetSpec
from simcore._src.terrain_mesh import TerrainMesh, add_terrain_mesh
from simcore._src.timing import wall_seconds
from simcore._src.wheel import PinnedWheel, WheelMember, asset_dir, fetch_wheel

__all__ = [
    "HEIGHTFIELD_BLOCK_M",
    "SELF_COLLISION_SENSOR",
    "TERRAIN_GEOM_GROUP",
    "BackendDiagnostics",
    "Capability",
    "CapturedWork",
    "Heightfield",
    "KernelCache",
    "PdGains",
    "PinnedWheel",
    "RayCast",
    "RayPattern",
    "ReadPlan",
    "ResetSpec",
    "SimBackend",
    "SimConfig",
    "TerrainMesh",
    "WheelMember",
    "add_heightfield",
    "add_terrain_mesh",
    "asset_dir",
    "check_actuated_joints",
    "fetch_wheel",
    "garbage_held_during_capture",
    "heightfield_blocks",
    "kernel_cache",
    "load_model",
    "make_backend",
    "pd_gains_from_armature",
    "pose_qpos",
    "set_backend_log_level",
    "set_kernel_cache_dir",
    "standing_root_height",
    "wall_seconds",
]
