"""Rotation and sampling helpers over torch tensors: the one quaternion module of trainrt.

Conventions: quaternions are ``(w, x, y, z)`` (MuJoCo's order), unit norm, batched over leading dimensions;
rotation matrices act on column vectors (``v_world = R @ v_body``); Euler angles are extrinsic X-Y-Z
(roll about world x, then pitch about world y, then yaw about world z, i.e. ``R = Rz(yaw) Ry(pitch) Rx(roll)``).
The 6D rotation representation is the first two columns of the rotation matrix, column by column:
``(R00, R10, R20, R01, R11, R21)``.

Every function is elementwise over the batch, fixed-shape and sync-free, so any of them may run per step.
The products behind ``quat_mul``, ``quat_to_6d`` and ``quat_from_euler_xyz`` are gathered by a fixed table
from one tensor of factors (an outer product, or the stacked half-angle cosines and sines), which launches a
handful of kernels instead of one per scalar operation (inside a CUDA graph each small kernel costs a few
microseconds); the sums keep the textbook order, so the values are bit for bit those of the written-out
formulas.
"""

from __future__ import annotations

import math

import torch

from trainrt.hotpath import cold_path

# Hamilton product: output component k is sum_m sign[k][m] * q1[i] * q2[j] for the (i, j) = pairs[k][m] below,
# summed left to right in the textbook order.
_QUAT_MUL_PAIRS = (
    ((0, 0), (1, 1), (2, 2), (3, 3)),  # w = w1 w2 - x1 x2 - y1 y2 - z1 z2
    ((0, 1), (1, 0), (2, 3), (3, 2)),  # x = w1 x2 + x1 w2 + y1 z2 - z1 y2
    ((0, 2), (1, 3), (2, 0), (3, 1)),  # y = w1 y2 - x1 z2 + y1 w2 + z1 x2
    ((0, 3), (1, 2), (2, 1), (3, 0)),  # z = w1 z2 + x1 y2 - y1 x2 + z1 w2
)
_QUAT_MUL_SIGNS = ((1, -1, -1, -1), (1, 1, 1, -1), (1, -1, 1, 1), (1, 1, -1, 1))
# 6D: output k is offset[k] + scale[k] * (q[i] q[j] + sign[k] * q[i'] q[j']) for pairs[k] = ((i, j), (i', j')).
_QUAT_6D_PAIRS = (
    ((2, 2), (3, 3)),  # 1 - 2 (y y + z z)
    ((1, 2), (0, 3)),  # 2 (x y + w z)
    ((1, 3), (0, 2)),  # 2 (x z - w y)
    ((1, 2), (0, 3)),  # 2 (x y - w z)
    ((1, 1), (3, 3)),  # 1 - 2 (x x + z z)
    ((2, 3), (0, 1)),  # 2 (y z + w x)
)
_QUAT_6D_SIGNS = (1, 1, -1, -1, 1, 1)
_QUAT_6D_SCALES = (-2.0, 2.0, 2.0, 2.0, -2.0, 2.0)
_QUAT_6D_OFFSETS = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)
# Euler angles: output k is a[0] a[1] a[2] + sign[k] * b[0] b[1] b[2] over the half-angle cosines and sines
# (cr, sr, cp, sp, cy, sy) = indices 0..5, for (a, b) = triples[k].
_EULER_TRIPLES = (
    ((4, 2, 0), (5, 3, 1)),  # w = cy cp cr + sy sp sr
    ((4, 2, 1), (5, 3, 0)),  # x = cy cp sr - sy sp cr
    ((4, 3, 0), (5, 2, 1)),  # y = cy sp cr + sy cp sr
    ((5, 2, 0), (4, 3, 1)),  # z = sy cp cr - cy sp sr
)
_EULER_SIGNS = (1, -1, 1, -1)
_tables: dict[tuple[str, torch.device, torch.dtype], tuple[torch.Tensor, ...]] = {}


@cold_path
def _table(name: str, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    """The gather indices and factors of ``name`` on ``device`` (built once per device and dtype)."""
    key = (name, device, dtype)
    table = _tables.get(key)
    if table is None:
        if name == "mul":
            index = [[4 * i + j for i, j in row] for row in _QUAT_MUL_PAIRS]
            table = (
                torch.tensor(index, dtype=torch.long, device=device),
                torch.tensor(_QUAT_MUL_SIGNS, dtype=dtype, device=device),
            )
        elif name == "6d":
            index = [[4 * i + j for i, j in row] for row in _QUAT_6D_PAIRS]
            table = (
                torch.tensor(index, dtype=torch.long, device=device),
                torch.tensor([[1, s] for s in _QUAT_6D_SIGNS], dtype=dtype, device=device),
                torch.tensor(_QUAT_6D_SCALES, dtype=dtype, device=device),
                torch.tensor(_QUAT_6D_OFFSETS, dtype=dtype, device=device),
            )
        elif name == "euler":
            table = (
                torch.tensor(_EULER_TRIPLES, dtype=torch.long, device=device),
                torch.tensor(_EULER_SIGNS, dtype=dtype, device=device),
            )
        elif name == "conjugate":
            table = (torch.tensor((1.0, -1.0, -1.0, -1.0), dtype=dtype, device=device),)
        else:
            raise ValueError(f"unknown quaternion table {name!r}; valid: {', '.join(TABLES)}")
        _tables[key] = table
    return table


TABLES = ("mul", "6d", "euler", "conjugate")
"""The quaternion tables `_table` builds."""


@cold_path
def build_tables(device: torch.device | str, dtype: torch.dtype = torch.float32) -> None:
    """Build every table for ``device`` and ``dtype`` now. A function torch.compile traces before any eager
    call built a table would build it inside the trace, with dynamo guarding on the cache not holding it:
    the next call, after an eager one filled the cache, would compile again."""
    device = torch.empty(0, device=device).device  # "cuda" -> "cuda:0", as the tensors' own device reads
    for name in TABLES:
        _table(name, device, dtype)


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    """Conjugate of quaternions ``q`` (..., 4): ``(w, -x, -y, -z)``."""
    (signs,) = _table("conjugate", q.device, q.dtype)
    return q * signs


def quat_inv(q: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Inverse of (not necessarily unit) quaternions ``q`` (..., 4): conjugate over squared norm."""
    return quat_conjugate(q) / q.square().sum(dim=-1, keepdim=True).clamp_min(eps)


def quat_normalize(q: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Unit quaternions from ``q`` (..., 4)."""
    return q / q.norm(dim=-1, keepdim=True).clamp_min(eps)


def quat_mul(q1: torch.Tensor, q2: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``q1 * q2`` (..., 4): rotate by ``q2`` first, then by ``q1``."""
    products = q1.unsqueeze(-1) * q2.unsqueeze(-2)  # (..., 4, 4): q1[i] * q2[j]
    index, signs = _table("mul", products.device, products.dtype)
    terms = products.flatten(-2)[..., index] * signs  # (..., 4 outputs, 4 signed products)
    return terms[..., 0] + terms[..., 1] + terms[..., 2] + terms[..., 3]


def quat_apply(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``v`` (..., 3) by unit quaternions ``q`` (..., 4); broadcasts leading dimensions."""
    w, xyz = q[..., :1], q[..., 1:]
    t = 2.0 * torch.linalg.cross(xyz, v, dim=-1)
    return v + w * t + torch.linalg.cross(xyz, t, dim=-1)


def quat_apply_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate vectors ``v`` (..., 3) by the inverse of unit quaternions ``q`` (..., 4)."""
    return quat_apply(quat_conjugate(q), v)


def quat_from_angle_axis(angle: torch.Tensor, axis: torch.Tensor) -> torch.Tensor:
    """Quaternions (..., 4) rotating by ``angle`` (...) radians about unit ``axis`` (..., 3)."""
    half = 0.5 * angle.unsqueeze(-1)
    return torch.cat((torch.cos(half), torch.sin(half) * axis), dim=-1)


def quat_from_euler_xyz(roll: torch.Tensor, pitch: torch.Tensor, yaw: torch.Tensor) -> torch.Tensor:
    """Quaternions (..., 4) of extrinsic X-Y-Z Euler angles (...): ``q = qz(yaw) * qy(pitch) * qx(roll)``."""
    cr, sr = torch.cos(0.5 * roll), torch.sin(0.5 * roll)
    cp, sp = torch.cos(0.5 * pitch), torch.sin(0.5 * pitch)
    cy, sy = torch.cos(0.5 * yaw), torch.sin(0.5 * yaw)
    halves = torch.stack((cr, sr, cp, sp, cy, sy), dim=-1)
    index, signs = _table("euler", halves.device, halves.dtype)
    factors = halves[..., index]  # (..., 4 outputs, 2 products, 3 factors)
    products = factors[..., 0] * factors[..., 1] * factors[..., 2]
    return products[..., 0] + products[..., 1] * signs


def euler_xyz_from_quat(q: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Extrinsic X-Y-Z Euler angles ``(roll, pitch, yaw)`` (each (...)) of unit quaternions ``q`` (..., 4).

    Roll and yaw lie in (-pi, pi], pitch in [-pi/2, pi/2]; the inverse of :func:`quat_from_euler_xyz`.
    """
    w, x, y, z = q.unbind(-1)
    roll = torch.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    pitch = torch.asin((2.0 * (w * y - z * x)).clamp(-1.0, 1.0))
    yaw = torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
    return roll, pitch, yaw


def yaw_from_quat(q: torch.Tensor) -> torch.Tensor:
    """Heading angle (...) in (-pi, pi] of the body x axis of unit quaternions ``q`` (..., 4)."""
    w, x, y, z = q.unbind(-1)
    return torch.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))


def yaw_quat(q: torch.Tensor) -> torch.Tensor:
    """The yaw-only part of unit quaternions ``q`` (..., 4): a rotation about world z by their heading."""
    half = 0.5 * yaw_from_quat(q)
    zero = torch.zeros_like(half)
    return torch.stack((torch.cos(half), zero, zero, torch.sin(half)), dim=-1)


def quat_to_matrix(q: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (..., 3, 3) of unit quaternions ``q`` (..., 4)."""
    w, x, y, z = q.unbind(-1)
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    rows = (
        1.0 - 2.0 * (yy + zz), 2.0 * (xy - wz), 2.0 * (xz + wy),
        2.0 * (xy + wz), 1.0 - 2.0 * (xx + zz), 2.0 * (yz - wx),
        2.0 * (xz - wy), 2.0 * (yz + wx), 1.0 - 2.0 * (xx + yy),
    )  # fmt: skip
    return torch.stack(rows, dim=-1).reshape(*q.shape[:-1], 3, 3)


def matrix_to_6d(m: torch.Tensor) -> torch.Tensor:
    """6D representation (..., 6) of rotation matrices ``m`` (..., 3, 3): first column, then second column."""
    return torch.cat((m[..., :, 0], m[..., :, 1]), dim=-1)


def quat_to_6d(q: torch.Tensor) -> torch.Tensor:
    """6D representation (..., 6) of unit quaternions ``q`` (..., 4); see :func:`matrix_to_6d`."""
    # The first two matrix columns directly, without building the third.
    products = q.unsqueeze(-1) * q.unsqueeze(-2)  # (..., 4, 4): q[i] * q[j]
    index, signs, scales, offsets = _table("6d", products.device, products.dtype)
    pairs = products.flatten(-2)[..., index] * signs  # (..., 6, 2)
    return offsets + scales * (pairs[..., 0] + pairs[..., 1])


def quat_error_magnitude(q1: torch.Tensor, q2: torch.Tensor) -> torch.Tensor:
    """Angle (...) in [0, pi] of the rotation between unit quaternions ``q1`` and ``q2`` (..., 4)."""
    diff = quat_mul(quat_conjugate(q1), q2)
    return 2.0 * torch.atan2(diff[..., 1:].norm(dim=-1), diff[..., 0].abs())


def wrap_to_pi(angle: torch.Tensor) -> torch.Tensor:
    """Angles wrapped into [-pi, pi)."""
    return torch.remainder(angle + math.pi, 2.0 * math.pi) - math.pi


def sample_uniform(
    low: float | torch.Tensor,
    high: float | torch.Tensor,
    shape: tuple[int, ...] | torch.Size,
    generator: torch.Generator,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Uniform samples in ``[low, high)`` of ``shape``, drawn from ``generator`` on the generator's device.

    ``low`` and ``high`` are floats or tensors broadcastable to ``shape``.
    """
    unit = torch.rand(shape, generator=generator, device=generator.device, dtype=dtype)
    return low + (high - low) * unit
