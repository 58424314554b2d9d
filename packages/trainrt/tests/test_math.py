"""``trainrt.mdp.math`` against MuJoCo's own rotation routines (``mju_*``) in float64."""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

from trainrt.mdp import math as rot

NUM = 64


@pytest.fixture
def quats() -> torch.Tensor:
    """Random unit quaternions (NUM, 4) float64, including some with negative w."""
    g = torch.Generator().manual_seed(3)
    return rot.quat_normalize(torch.randn(NUM, 4, generator=g, dtype=torch.float64))


@pytest.fixture
def vecs() -> torch.Tensor:
    g = torch.Generator().manual_seed(4)
    return torch.randn(NUM, 3, generator=g, dtype=torch.float64)


def _np(t: torch.Tensor) -> np.ndarray:
    return t.numpy().astype(np.float64)


def test_quat_mul_matches_mju_mulquat(quats):
    other = quats.roll(1, dims=0)
    expected = np.zeros((NUM, 4))
    for i in range(NUM):
        mujoco.mju_mulQuat(expected[i], _np(quats[i]), _np(other[i]))
    np.testing.assert_allclose(_np(rot.quat_mul(quats, other)), expected, atol=1e-12)


def test_quat_apply_and_inverse_match_mju_rotvecquat(quats, vecs):
    expected, expected_inv, neg = np.zeros((NUM, 3)), np.zeros((NUM, 3)), np.zeros(4)
    for i in range(NUM):
        mujoco.mju_rotVecQuat(expected[i], _np(vecs[i]), _np(quats[i]))
        mujoco.mju_negQuat(neg, _np(quats[i]))
        mujoco.mju_rotVecQuat(expected_inv[i], _np(vecs[i]), neg)
    np.testing.assert_allclose(_np(rot.quat_apply(quats, vecs)), expected, atol=1e-12)
    np.testing.assert_allclose(_np(rot.quat_apply_inverse(quats, vecs)), expected_inv, atol=1e-12)


def test_quat_apply_broadcasts_one_quaternion_over_many_vectors(quats, vecs):
    many = vecs.reshape(NUM, 1, 3).expand(NUM, 5, 3)
    out = rot.quat_apply(quats.unsqueeze(1), many)
    assert out.shape == (NUM, 5, 3)
    torch.testing.assert_close(out[:, 3], rot.quat_apply(quats, vecs))


def test_conjugate_and_inverse(quats):
    neg = np.zeros(4)
    for i in range(NUM):
        mujoco.mju_negQuat(neg, _np(quats[i]))
        np.testing.assert_allclose(_np(rot.quat_conjugate(quats[i])), neg, atol=1e-15)
    scaled = quats * 2.5  # not unit: the inverse divides by the squared norm
    identity = rot.quat_mul(scaled, rot.quat_inv(scaled))
    torch.testing.assert_close(identity, torch.tensor([1.0, 0, 0, 0], dtype=torch.float64).expand(NUM, 4))


def test_euler_to_quat_matches_mujoco_extrinsic_xyz_and_round_trips():
    g = torch.Generator().manual_seed(5)
    roll = (torch.rand(NUM, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
    pitch = (torch.rand(NUM, generator=g, dtype=torch.float64) * 2 - 1) * (math.pi / 2 - 0.05)
    yaw = (torch.rand(NUM, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
    q = rot.quat_from_euler_xyz(roll, pitch, yaw)
    expected = np.zeros(4)
    for i in range(NUM):
        euler = np.array([roll[i].item(), pitch[i].item(), yaw[i].item()])
        mujoco.mju_euler2Quat(expected, euler, "XYZ")  # uppercase: extrinsic (world-axis) rotations
        sign = np.sign(np.dot(expected, _np(q[i])))
        np.testing.assert_allclose(_np(q[i]), sign * expected, atol=1e-12)
    r2, p2, y2 = rot.euler_xyz_from_quat(q)
    torch.testing.assert_close(torch.stack((r2, p2, y2)), torch.stack((roll, pitch, yaw)))


def test_quat_to_matrix_and_6d_match_mju_quat2mat(quats):
    matrices = rot.quat_to_matrix(quats)
    expected = np.zeros(9)
    for i in range(NUM):
        mujoco.mju_quat2Mat(expected, _np(quats[i]))
        np.testing.assert_allclose(_np(matrices[i]).reshape(9), expected, atol=1e-12)
    six = rot.quat_to_6d(quats)
    torch.testing.assert_close(six, rot.matrix_to_6d(matrices))
    torch.testing.assert_close(six[:, :3], matrices[:, :, 0])
    torch.testing.assert_close(six[:, 3:], matrices[:, :, 1])


def test_quat_error_magnitude_matches_mju_subquat(quats):
    other = rot.quat_normalize(quats.roll(1, dims=0) + 0.3 * quats)
    diff = np.zeros(3)
    expected = np.zeros(NUM)
    for i in range(NUM):
        mujoco.mju_subQuat(diff, _np(quats[i]), _np(other[i]))
        expected[i] = np.linalg.norm(diff)
    np.testing.assert_allclose(_np(rot.quat_error_magnitude(quats, other)), expected, atol=1e-9)
    # Sign invariance: q and -q are the same rotation.
    torch.testing.assert_close(rot.quat_error_magnitude(quats, -quats), torch.zeros(NUM, dtype=torch.float64))


def test_yaw_quat_keeps_heading_and_drops_tilt(quats):
    yq = rot.yaw_quat(quats)
    torch.testing.assert_close(yq[:, 1:3], torch.zeros(NUM, 2, dtype=torch.float64))
    heading = np.zeros((NUM, 3))
    for i in range(NUM):
        mujoco.mju_rotVecQuat(heading[i], np.array([1.0, 0.0, 0.0]), _np(quats[i]))
    expected_yaw = np.arctan2(heading[:, 1], heading[:, 0])
    np.testing.assert_allclose(_np(rot.yaw_from_quat(yq)), expected_yaw, atol=1e-12)
    np.testing.assert_allclose(_np(rot.yaw_from_quat(quats)), expected_yaw, atol=1e-12)


def test_wrap_to_pi_keeps_the_angle():
    angles = torch.linspace(-20.0, 20.0, 401, dtype=torch.float64)
    wrapped = rot.wrap_to_pi(angles)
    assert bool(((wrapped >= -math.pi) & (wrapped < math.pi)).all())
    torch.testing.assert_close(torch.sin(wrapped), torch.sin(angles))
    torch.testing.assert_close(torch.cos(wrapped), torch.cos(angles))


def test_sample_uniform_bounds_shape_and_reproducibility():
    low = torch.tensor([-1.0, 0.0, 2.0])
    high = torch.tensor([1.0, 0.5, 2.0])
    a = rot.sample_uniform(low, high, (500, 3), torch.Generator().manual_seed(9))
    b = rot.sample_uniform(low, high, (500, 3), torch.Generator().manual_seed(9))
    assert a.shape == (500, 3) and a.dtype == torch.float32
    torch.testing.assert_close(a, b)
    assert bool((a >= low).all()) and bool((a <= high).all())
    assert a[:, 0].min() < -0.9 and a[:, 0].max() > 0.9  # it spans the range
    torch.testing.assert_close(a[:, 2], torch.full((500,), 2.0))


def _quat_mul_written_out(q1: torch.Tensor, q2: torch.Tensor) -> torch.Tensor:
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


def _quat_to_6d_written_out(q: torch.Tensor) -> torch.Tensor:
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_table_quaternion_products_equal_the_written_out_formulas_bit_for_bit(dtype):
    """The gathered-product forms launch a few kernels; their values are those of the scalar formulas."""
    g = torch.Generator().manual_seed(5)
    a = rot.quat_normalize(torch.randn(NUM, 5, 4, generator=g, dtype=torch.float64)).to(dtype)
    b = rot.quat_normalize(torch.randn(NUM, 1, 4, generator=g, dtype=torch.float64)).to(dtype)
    for q1, q2 in ((a, b), (b, a), (a, a.flip(0))):  # broadcasting both ways
        assert torch.equal(rot.quat_mul(q1, q2), _quat_mul_written_out(q1, q2))
    assert torch.equal(rot.quat_to_6d(a), _quat_to_6d_written_out(a))
    assert torch.equal(rot.quat_conjugate(a), torch.cat((a[..., :1], -a[..., 1:]), dim=-1))
    assert rot.quat_mul(a, b).dtype == dtype and rot.quat_mul(a.float(), b.double()).dtype == torch.float64


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_table_euler_quaternion_equals_the_written_out_formula_bit_for_bit(dtype):
    g = torch.Generator().manual_seed(6)
    rpy = ((torch.rand(NUM, 3, generator=g, dtype=torch.float64) * 2 - 1) * math.pi).to(dtype)
    roll, pitch, yaw = rpy[:, 0], rpy[:, 1], rpy[:, 2]  # strided columns, as the callers pass them
    cr, sr = torch.cos(0.5 * roll), torch.sin(0.5 * roll)
    cp, sp = torch.cos(0.5 * pitch), torch.sin(0.5 * pitch)
    cy, sy = torch.cos(0.5 * yaw), torch.sin(0.5 * yaw)
    expected = torch.stack(
        (
            cy * cp * cr + sy * sp * sr,
            cy * cp * sr - sy * sp * cr,
            cy * sp * cr + sy * cp * sr,
            sy * cp * cr - cy * sp * sr,
        ),
        dim=-1,
    )
    assert torch.equal(rot.quat_from_euler_xyz(roll, pitch, yaw), expected)
