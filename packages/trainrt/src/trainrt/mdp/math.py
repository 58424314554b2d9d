"""Rotation and sampling helpers over torch tensors: the one quaternion module of trainrt.

Conventions: quaternions are ``(w, x, y, z)`` (MuJoCo's order), unit norm, batched over leading dimensions;
rotation matrices act on column vectors (``v_world = R @ v_body``); Euler angles are extrinsic X-Y-Z
(roll about world x, then pitch about world y, then yaw about world z, i.e. ``R = Rz(yaw) Ry(pitch) Rx(roll)``).
The 6D rotation representation is the first two columns of the rotation matrix, column by column:
``(R00, R10, R20, R01, R11, R21)``.

Every function is elementwise over the batch, fixed-shape and sync-free, so any of them may run per step.
"""

from __future__ import annotations

import math

import torch


def quat_conjugate(q: torch.Tensor) -> torch.Tensor:
    """Conjugate of quaternions ``q`` (..., 4): ``(w, -x, -y, -z)``."""
    return torch.cat((q[..., :1], -q[..., 1:]), dim=-1)


def quat_inv(q: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Inverse of (not necessarily unit) quaternions ``q`` (..., 4): conjugate over squared norm."""
    return quat_conjugate(q) / q.square().sum(dim=-1, keepdim=True).clamp_min(eps)


def quat_normalize(q: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """Unit quaternions from ``q`` (..., 4)."""
    return q / q.norm(dim=-1, keepdim=True).clamp_min(eps)


def quat_mul(q1: torch.Tensor, q2: torch.Tensor) -> torch.Tensor:
    """Hamilton product ``q1 * q2`` (..., 4): rotate by ``q2`` first, then by ``q1``."""
    w1, x1, y1, z1 = q1.unbind(-1)
    w2, x2, y2, z2 = q2.unbind(-1)
    return torch.stack(
        (
            w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
            w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
            w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
            w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
        ),
        dim=-1,
    )


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
    return torch.stack(
        (
            cy * cp * cr + sy * sp * sr,
            cy * cp * sr - sy * sp * cr,
            cy * sp * cr + sy * cp * sr,
            sy * cp * cr - cy * sp * sr,
        ),
        dim=-1,
    )


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
    w, x, y, z = q.unbind(-1)
    return torch.stack(
        (
            1.0 - 2.0 * (y * y + z * z),
            2.0 * (x * y + w * z),
            2.0 * (x * z - w * y),
            2.0 * (x * y - w * z),
            1.0 - 2.0 * (x * x + z * z),
            2.0 * (y * z + w * x),
        ),
        dim=-1,
    )


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
