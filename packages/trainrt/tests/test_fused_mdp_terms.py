"""Fused term math changes no value: each rewritten reward, event and command term against the formula it
replaced, on the same state, exactly (``torch.equal``), with the env's generator left in the same state.

Both G1 tasks, on the CPU with the mujoco and mjwarp backends (payload and state dtypes differ between them),
and with mjwarp on CUDA where a GPU is present (marked ``gpu``: CUDA kernels of the fused forms, same check).
"""

from __future__ import annotations

import math

import pytest
import torch

from trainrt import mdp
from trainrt.envs import ManagerBasedRlEnv
from trainrt.mdp.math import quat_apply_inverse, quat_from_euler_xyz, quat_mul, quat_normalize, wrap_to_pi
from trainrt.tasks import make_task_cfg

NUM_ENVS = 4
TASK_NAMES = ("g1_walk_flat", "g1_motion_tracking")
SIMS = ("mujoco", "mjwarp")
MASK = torch.tensor([True, False, True, False])


_CUDA = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]
_ENV_PARAMS = [
    *(pytest.param((t, s, "cpu"), id=f"{t}-{s}") for t in TASK_NAMES for s in SIMS),
    *(pytest.param((t, "mjwarp", "cuda"), id=f"{t}-mjwarp-cuda", marks=_CUDA) for t in TASK_NAMES),
]


@pytest.fixture(scope="module", params=_ENV_PARAMS)
def env(request) -> ManagerBasedRlEnv:
    """An env a few steps into its episodes, with joints pushed past their limits in two rows."""
    task, sim, device = request.param
    try:
        env = ManagerBasedRlEnv(make_task_cfg(task), sim=sim, num_envs=NUM_ENVS, device=device, seed=3)
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")
    except ImportError as err:
        pytest.skip(f"backend {sim} unavailable: {err}")
    env.reset()
    gen = torch.Generator().manual_seed(5)
    for _ in range(3):
        env.step((torch.rand(NUM_ENVS, env.num_actions, generator=gen) * 1.6 - 0.8).to(env.device))
    return env


def _terms_of(manager, cls) -> list:
    return [fn for fn in _callables(manager) if isinstance(fn, cls)]


def _callables(manager) -> list:
    if hasattr(manager, "_evaluated"):
        return [fn for _, fn, _, _ in manager._evaluated]
    out = []
    for value in vars(manager).values():
        if isinstance(value, dict):
            out.extend(value.values())
        elif isinstance(value, list):
            out.extend(v for v in value if callable(v))
    return [getattr(v, "func", v) for v in out]


def _all_event_terms(env, cls) -> list:
    found = []

    def visit(obj, depth=0):
        if isinstance(obj, cls):
            found.append(obj)
        elif depth < 3 and isinstance(obj, dict | list | tuple):
            for v in obj.values() if isinstance(obj, dict) else obj:
                visit(v, depth + 1)
        elif depth < 3 and hasattr(obj, "__dict__") and not isinstance(obj, torch.Tensor | ManagerBasedRlEnv):
            for v in vars(obj).values():
                visit(v, depth + 1)

    visit(env.event_manager)
    return list({id(t): t for t in found}.values())


# --- rewards ------------------------------------------------------------------------------------------------


def _previous_joint_pos_limits(term, env):
    q = env.robot.joint_pos
    below = (term.lower - q).clamp_min(0.0)
    above = (q - term.upper).clamp_min(0.0)
    return (below + above).sum(dim=1)


def _previous_joint_deviation_l1(term, env):
    deviation = env.robot.joint_pos[:, term.joint_ids] - env.robot.default_joint_pos[:, term.joint_ids]
    return (deviation.abs() * term.weights).sum(dim=1)


def _previous_track_lin_vel_xy_exp(env, command_name, std):
    command = env.command_manager.command(command_name)
    error = (command[:, :2] - env.robot.root_lin_vel_b[:, :2]).square().sum(dim=1)
    return torch.exp(-error / std**2)


def _previous_track_ang_vel_z_exp(env, command_name, std):
    command = env.command_manager.command(command_name)
    error = (command[:, 2] - env.robot.root_ang_vel_b[:, 2]).square()
    return torch.exp(-error / std**2)


def _push_joints_past_limits(env) -> None:
    """Rows 0 and 2 read joint positions beyond the range (low side and high side), row 1 inside."""
    layout = mdp.robot_state_layout(env)
    qpos = env.backend.qpos
    limits = env.robot.joint_pos_limits.to(qpos.dtype)
    finite = torch.isfinite(limits).all(dim=1)
    joints = qpos[:, layout.joint_pos]
    joints[0] = torch.where(finite, limits[:, 0] - 0.0371, joints[0])
    joints[2] = torch.where(finite, limits[:, 1] + 0.1234, joints[2])
    qpos[:, layout.joint_pos] = joints


def test_joint_terms_equal_the_previous_formulas(env):
    _push_joints_past_limits(env)
    limit_terms = _terms_of(env.reward_manager, mdp.JointPosLimits)
    limit_terms.append(mdp.JointPosLimits(type("Cfg", (), {"params": {"soft_ratio": 0.8}})(), env))
    for term in limit_terms:
        value = term(env)
        assert value[0] > 0 and value[2] > 0  # the state does exercise both sides of the range
        assert torch.equal(value, _previous_joint_pos_limits(term, env))
    deviation_terms = _terms_of(env.reward_manager, mdp.JointDeviationL1)
    for term in deviation_terms:
        assert torch.equal(term(env), _previous_joint_deviation_l1(term, env))
    with env.state_cache.memoizing():  # shared |deviation| across terms, as inside a step
        for term in deviation_terms:
            assert torch.equal(term(env), _previous_joint_deviation_l1(term, env))


def test_joint_pos_limits_rejects_a_reversed_range(env):
    limits = env.robot.joint_pos_limits
    original = limits.clone()
    try:
        limits.copy_(original.flip(1))
        with pytest.raises(ValueError, match="lower <= upper"):
            mdp.JointPosLimits(type("Cfg", (), {"params": {"soft_ratio": 1.0}})(), env)
    finally:
        limits.copy_(original)


def test_velocity_tracking_terms_equal_the_previous_formulas(env):
    if "twist" not in env.command_manager._terms:
        pytest.skip("no velocity command in this task")
    twist = env.command_manager.get_term("twist")
    twist.vel_command_b.copy_(torch.tensor([[0.7, -0.3, 0.9]]).expand(NUM_ENVS, 3))
    for std in (0.5, 0.3, 1.7):
        assert torch.equal(
            mdp.track_lin_vel_xy_exp(env, "twist", std), _previous_track_lin_vel_xy_exp(env, "twist", std)
        )
        assert torch.equal(
            mdp.track_ang_vel_z_exp(env, "twist", std), _previous_track_ang_vel_z_exp(env, "twist", std)
        )


def test_shared_contact_mask_equals_each_terms_own(env):
    contact_terms = [
        *_terms_of(env.reward_manager, mdp.term_bases.ContactThresholdTerm),
        *[
            t
            for group in env.observation_manager.__dict__.values()
            if isinstance(group, dict | list)
            for t in (group.values() if isinstance(group, dict) else group)
            if isinstance(getattr(t, "func", t), mdp.term_bases.ContactThresholdTerm)
        ],
    ]
    plain = {id(t): t(env).clone() for t in (getattr(t, "func", t) for t in contact_terms)}
    with env.state_cache.memoizing():
        for t in (getattr(t, "func", t) for t in contact_terms):
            assert torch.equal(t(env), plain[id(t)])
            assert torch.equal(mdp.rewards.shared_in_contact(env, t), t.in_contact(env))


def _previous_feet_slip_l2(term, env):
    in_contact = term.in_contact(env)
    speed_sq = env.robot.body_lin_vel_w[:, term.body_ids, :2].square().sum(dim=-1)
    return torch.where(in_contact, speed_sq, 0.0).sum(dim=1)


def test_feet_slip_equals_the_previous_formula(env):
    terms = _terms_of(env.reward_manager, mdp.FeetSlipL2)
    if not terms:
        pytest.skip("no feet slip term in this task")
    for term in terms:
        assert term.in_contact(env).any()  # the state has feet on the ground
        assert torch.equal(term(env), _previous_feet_slip_l2(term, env))


# --- events -------------------------------------------------------------------------------------------------


def _previous_reset_root(term, env, env_mask):
    lay, qpos, qvel = term.layout, env.reset_payload["qpos"], env.reset_payload["qvel"]
    term._draw.uniform_(0.0, 1.0, generator=env.rng)
    pose = term.pose_bounds[0] + (term.pose_bounds[1] - term.pose_bounds[0]) * term._draw[:, :6]
    vel = term.velocity_bounds[0] + (term.velocity_bounds[1] - term.velocity_bounds[0]) * term._draw[:, 6:]
    pos = qpos[:, lay.root_pos].to(torch.float32) + pose[:, :3]
    delta = quat_from_euler_xyz(pose[:, 3], pose[:, 4], pose[:, 5])
    quat = quat_normalize(quat_mul(delta, qpos[:, lay.root_quat].to(torch.float32)))
    ang_vel_b = quat_apply_inverse(quat, vel[:, 3:])
    rows = env_mask.unsqueeze(1)
    qpos[:, lay.root_pos] = torch.where(rows, pos.to(qpos.dtype), qpos[:, lay.root_pos])
    qpos[:, lay.root_quat] = torch.where(rows, quat.to(qpos.dtype), qpos[:, lay.root_quat])
    qvel[:, lay.root_lin_vel] = torch.where(rows, vel[:, :3].to(qvel.dtype), qvel[:, lay.root_lin_vel])
    qvel[:, lay.root_ang_vel] = torch.where(rows, ang_vel_b.to(qvel.dtype), qvel[:, lay.root_ang_vel])


def _previous_reset_joints(term, env, env_mask):
    lay, qpos, qvel = term.layout, env.reset_payload["qpos"], env.reset_payload["qvel"]
    position_range, velocity_range = term.position_range, term.velocity_range
    term._draw.uniform_(0.0, 1.0, generator=env.rng)
    offset = position_range[0] + (position_range[1] - position_range[0]) * term._draw[:, 0]
    velocity = velocity_range[0] + (velocity_range[1] - velocity_range[0]) * term._draw[:, 1]
    q = torch.clamp(qpos[:, lay.joint_pos].to(torch.float32) + offset, term.lower, term.upper)
    rows = env_mask.unsqueeze(1)
    qpos[:, lay.joint_pos] = torch.where(rows, q.to(qpos.dtype), qpos[:, lay.joint_pos])
    qvel[:, lay.joint_vel] = torch.where(rows, velocity.to(qvel.dtype), qvel[:, lay.joint_vel])


def _previous_push(term, env, env_mask):
    qvel = env.backend.qvel
    term._draw.uniform_(0.0, 1.0, generator=env.rng)
    kick = term.bounds[0] + (term.bounds[1] - term.bounds[0]) * term._draw
    root = qvel[:, term._root]
    qvel[:, term._root] = torch.where(env_mask.unsqueeze(1), root + kick.to(qvel.dtype), root)


def _same_effect(env, term, previous, targets) -> None:
    """Run ``previous`` and the term from one snapshot; compare every target tensor and the generator."""
    mask = MASK.to(env.device)
    saved = [t.clone() for t in targets]
    rng_state = env.rng.get_state()
    previous(term, env, mask)
    expected = [t.clone() for t in targets]
    expected_rng = env.rng.get_state()
    for t, s in zip(targets, saved):
        t.copy_(s)
    env.rng.set_state(rng_state)
    term(env, mask)
    for t, e, s in zip(targets, expected, saved):
        assert t.dtype == e.dtype and torch.equal(t, e)
        assert torch.equal(t[~mask], s[~mask])
    assert torch.equal(env.rng.get_state(), expected_rng)


def _payload(env) -> list[torch.Tensor]:
    return [env.reset_payload["qpos"], env.reset_payload["qvel"]]


def test_reset_events_equal_the_previous_formulas(env):
    ranges = {
        "x": (-0.5, 0.5),
        "y": (-0.4, 0.3),
        "z": (0.0, 0.1),
        "roll": (-0.3, 0.2),
        "yaw": (-math.pi, math.pi),
    }
    roots = _all_event_terms(env, mdp.ResetRootStateUniform)
    cfg = type(
        "Cfg", (), {"params": {"pose_range": ranges, "velocity_range": {"x": (-1.0, 1.0), "yaw": (-2, 2)}}}
    )
    roots.append(mdp.ResetRootStateUniform(cfg(), env))
    for term in roots:
        _same_effect(env, term, _previous_reset_root, _payload(env))
    joints = _all_event_terms(env, mdp.ResetJointsAroundDefault)
    cfg = type("Cfg", (), {"params": {"position_range": (-0.3, 0.2), "velocity_range": (-1.5, 0.5)}})
    joints.append(mdp.ResetJointsAroundDefault(cfg(), env))
    for term in joints:
        _same_effect(env, term, _previous_reset_joints, _payload(env))


def test_push_by_velocity_equals_the_previous_formula(env):
    pushes = _all_event_terms(env, mdp.PushByVelocity)
    cfg = type("Cfg", (), {"params": {"velocity_range": {"x": (-0.5, 0.5), "z": (0, 0.2), "yaw": (-1, 1)}}})
    pushes.append(mdp.PushByVelocity(cfg(), env))
    for term in pushes:
        _same_effect(env, term, _previous_push, [env.backend.qvel])


# --- commands -----------------------------------------------------------------------------------------------


def _previous_velocity_resample(term, env_mask):
    term._draw.uniform_(0.0, 1.0, generator=term.env.rng)
    values = term._low + term._span * term._draw[:, :4]
    rows = env_mask.unsqueeze(1)
    term.vel_command_b.copy_(torch.where(rows, values[:, :3], term.vel_command_b))
    term.heading_target.copy_(torch.where(env_mask, values[:, 3], term.heading_target))
    term.is_heading_env.copy_(
        torch.where(env_mask, term._draw[:, 4] < term._rel_heading, term.is_heading_env)
    )
    term.is_standing_env.copy_(
        torch.where(env_mask, term._draw[:, 5] < term._rel_standing, term.is_standing_env)
    )
    term.vel_command_b.masked_fill_((env_mask & term.is_standing_env).unsqueeze(1), 0.0)


def _previous_velocity_update(term):
    heading_error = wrap_to_pi(term.heading_target - term.env.robot.heading_w)
    wz = torch.clamp(term._stiffness * heading_error, term._wz_low, term._wz_high)
    term.vel_command_b[:, 2] = torch.where(term.is_heading_env, wz, term.vel_command_b[:, 2])
    term.vel_command_b.masked_fill_(term.is_standing_env.unsqueeze(1), 0.0)


def _previous_gait_resample(term, env_mask):
    term._draw.uniform_(0.0, 1.0, generator=term.env.rng)
    term.phase.copy_(torch.where(env_mask, term._draw, term.phase))


def _same_command_effect(env, term, previous, current, targets, rounds: int = 6) -> None:
    for _ in range(rounds):  # several draws: standing and heading rows both occur
        saved = [t.clone() for t in targets]
        rng_state = env.rng.get_state()
        previous()
        expected = [t.clone() for t in targets]
        expected_rng = env.rng.get_state()
        for t, s in zip(targets, saved):
            t.copy_(s)
        env.rng.set_state(rng_state)
        current()
        for t, e in zip(targets, expected):
            assert torch.equal(t, e)
        assert torch.equal(env.rng.get_state(), expected_rng)


def test_velocity_command_equals_the_previous_formulas(env):
    if "twist" not in env.command_manager._terms:
        pytest.skip("no velocity command in this task")
    term = env.command_manager.get_term("twist")
    saved = term._rel_heading, term._rel_standing, term._kind_thresholds.clone()
    term._rel_heading, term._rel_standing = 0.5, 0.4  # more standing and heading rows per draw
    term._kind_thresholds.copy_(torch.tensor([0.5, 0.4]))
    targets = [term.vel_command_b, term.heading_target, term.is_heading_env, term.is_standing_env]
    try:
        for mask in (MASK.to(env.device), ~MASK.to(env.device)):
            _same_command_effect(
                env,
                term,
                lambda m=mask: _previous_velocity_resample(term, m),
                lambda m=mask: term.resample(m),
                targets,
            )
        assert term.is_standing_env.any() and term.is_heading_env.any()
        _same_command_effect(env, term, lambda: _previous_velocity_update(term), term._update, targets, 1)
    finally:
        term._rel_heading, term._rel_standing = saved[:2]
        term._kind_thresholds.copy_(saved[2])
    gait = env.command_manager.get_term("gait")
    _same_command_effect(
        env,
        gait,
        lambda: _previous_gait_resample(gait, MASK.to(env.device)),
        lambda: gait.resample(MASK.to(env.device)),
        [gait.phase],
    )


def test_velocity_command_views_share_the_term_buffers(env):
    if "twist" not in env.command_manager._terms:
        pytest.skip("no velocity command in this task")
    term = env.command_manager.get_term("twist")
    term.resample(torch.ones(NUM_ENVS, dtype=torch.bool, device=env.device))
    assert term.vel_command_b.data_ptr() == term._targets.data_ptr()
    assert torch.equal(term.heading_target, term._targets[:, 3])
    assert torch.equal(term.is_standing_env, term._kinds[:, 1])


# --- motion command reset -----------------------------------------------------------------------------------


def _previous_sample_start_frames(m):
    weights = m.bin_failure_rate + m._uniform_ratio / m.num_bins
    size = m._kernel.shape[0]
    padded = torch.cat((weights, weights[-1:].expand(size - 1)))
    smoothed = padded.unfold(0, size, 1) @ m._kernel
    probabilities = smoothed / smoothed.sum()
    m.sampling_probabilities.copy_(probabilities)
    entropy = -(probabilities * torch.log(probabilities.clamp_min(1e-12))).sum()
    m.sampling_entropy.copy_(entropy * m._entropy_scale + m._entropy_offset)
    cdf = torch.cumsum(probabilities, dim=0)
    m._draw.uniform_(0.0, 1.0, generator=m.env.rng)
    bins = torch.searchsorted(cdf, (m._draw[:, 0] * cdf[-1]).contiguous(), right=True)
    bins = bins.clamp_(max=m.num_bins - 1)
    start = ((bins.to(torch.float32) + m._draw[:, 1]) * ((m.num_frames - 1) / m.num_bins)).long()
    return start.clamp_(0, m.num_frames - 2)


def _previous_write_reset_state(m, env_mask):
    env, clip, lay = m.env, m.clip, m.layout
    qpos, qvel = env.reset_payload["qpos"], env.reset_payload["qvel"]
    m._perturb.uniform_(0.0, 1.0, generator=env.rng)
    pose = m.pose_bounds[0] + (m.pose_bounds[1] - m.pose_bounds[0]) * m._perturb[:, :6]
    vel = m.velocity_bounds[0] + (m.velocity_bounds[1] - m.velocity_bounds[0]) * m._perturb[:, 6:]
    frame = m.frame
    root_pos = clip.root_pos_w[frame] + pose[:, :3]
    delta = quat_from_euler_xyz(pose[:, 3], pose[:, 4], pose[:, 5])
    root_quat = quat_normalize(quat_mul(delta, clip.root_quat_w[frame]))
    root_lin_vel = clip.root_lin_vel_w[frame] + vel[:, :3]
    root_ang_vel_b = quat_apply_inverse(root_quat, clip.root_ang_vel_w[frame] + vel[:, 3:])
    m._joint_draw.uniform_(m._joint_offset[0], m._joint_offset[1], generator=env.rng)
    joint_pos = torch.clamp(clip.joint_pos[frame] + m._joint_draw, m._joint_lower, m._joint_upper)
    rows = env_mask.unsqueeze(1)
    for target, cols, value in (
        (qpos, lay.root_pos, root_pos),
        (qpos, lay.root_quat, root_quat),
        (qpos, lay.joint_pos, joint_pos),
        (qvel, lay.root_lin_vel, root_lin_vel),
        (qvel, lay.root_ang_vel, root_ang_vel_b),
        (qvel, lay.joint_vel, clip.joint_vel[frame]),
    ):
        target[:, cols] = torch.where(rows, value.to(target.dtype), target[:, cols])


def _previous_motion_resample(m, env_mask):
    env = m.env
    failed = env.terminated & env_mask
    m._bin_failures_now.scatter_add_(0, m._frame_bins(), failed.to(torch.float32))
    start = _previous_sample_start_frames(m) if m._fixed_start is None else m._fixed_start
    m.frame.copy_(torch.where(env_mask, start, m.frame))
    _previous_write_reset_state(m, env_mask)


@pytest.mark.parametrize("blocks", ["payload blocks", "per-quantity writes"])
def test_motion_reset_equals_the_previous_formulas(env, blocks):
    if "motion" not in env.command_manager._terms:
        pytest.skip("no motion command in this task")
    m = env.command_manager.get_term("motion")
    saved_blocks = m._payload_blocks
    if blocks == "per-quantity writes":
        m._payload_blocks = None
    else:
        assert saved_blocks is not None  # the G1 layout takes the one-select path
    gen = torch.Generator().manual_seed(11)
    m.bin_failure_rate.copy_(torch.rand(m.num_bins, generator=gen))  # a non-uniform start distribution
    saved_terminated = env.terminated.clone()
    env.terminated[:] = torch.tensor([True, True, False, False])
    targets = [
        m.frame,
        m._bin_failures_now,
        m.sampling_probabilities,
        m.sampling_entropy,
        *_payload(env),
    ]
    try:
        for mask in (MASK, ~MASK, torch.ones(NUM_ENVS, dtype=torch.bool)):
            mask = mask.to(env.device)
            saved = [t.clone() for t in targets]
            rng_state = env.rng.get_state()
            _previous_motion_resample(m, mask)
            expected = [t.clone() for t in targets]
            expected_rng = env.rng.get_state()
            for t, s in zip(targets, saved):
                t.copy_(s)
            env.rng.set_state(rng_state)
            m.resample(mask)
            for t, e in zip(targets, expected):
                assert t.dtype == e.dtype and torch.equal(t, e)
            assert torch.equal(env.rng.get_state(), expected_rng)
            assert not torch.equal(saved[-2][mask], targets[-2][mask])  # the masked rows were written
    finally:
        m._payload_blocks = saved_blocks
        env.terminated.copy_(saved_terminated)


def test_gait_command_equals_the_previous_formula(env):
    if "gait" not in env.command_manager._terms:
        pytest.skip("no gait command in this task")
    gait = env.command_manager.get_term("gait")
    gait.phase.copy_(torch.tensor([0.0, 0.25, 0.6180339, 0.999999]))
    angle = 2.0 * math.pi * gait.phase
    assert torch.equal(gait.command, torch.stack((torch.sin(angle), torch.cos(angle)), dim=1))
