"""Action bounds for tanh-bounded policies on the G1 tasks: ``JointPositionAction`` mode ``"joint_limits"``
(tracking) and three effort-based steps clamped to the joint limits (walking).

References are computed here from the MuJoCo model's joint ranges and the clip file, not from the term.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np
import pytest
import torch

import simcore
from trainrt.envs import ManagerBasedRlEnv
from trainrt.managers import ActionTermCfg, JointPositionAction
from trainrt.motion import load_motion
from trainrt.robots import G1
from trainrt.tasks import make_task_cfg
from trainrt.tasks.tracking.command import resolve_motion_file

NUM_ENVS = 2


def _env(task: str, **action_params) -> ManagerBasedRlEnv:
    try:
        cfg = make_task_cfg(task)
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")
    if action_params:
        cfg.actions = {"joint_pos": ActionTermCfg(JointPositionAction, action_params)}
    return ManagerBasedRlEnv(cfg, sim="mujoco", num_envs=NUM_ENVS, device="cpu", seed=0)


@pytest.fixture(scope="module")
def tracking_env() -> ManagerBasedRlEnv:
    return _env("g1_motion_tracking")


def _model_ranges(model: mujoco.MjModel, names) -> tuple[torch.Tensor, torch.Tensor]:
    ranges = torch.from_numpy(np.array([model.jnt_range[model.joint(n).id] for n in names], dtype=np.float64))
    return ranges[:, 0], ranges[:, 1]


def test_tracking_maps_onto_the_joint_limits_and_walking_onto_three_effort_steps():
    assert make_task_cfg("g1_motion_tracking").actions["joint_pos"].params["mode"] == "joint_limits"
    env = _env("g1_walk_flat")
    term = env.action_manager.get_term("joint_pos")
    model = env.backend.mj_model
    ids = [_actuator_of(model, n) for n in term.joint_names]
    # reference from the model: 3 x 0.25 x effort limit / kp per joint (adr/0014)
    expected = [3.0 * 0.25 * model.actuator_forcerange[a, 1] / model.actuator_gainprm[a, 0] for a in ids]
    assert term.mode == "scale" and term.clip_to_joint_range
    assert term.scale.double().tolist() == pytest.approx(expected, rel=1e-6)
    lower, upper = _model_ranges(model, term.joint_names)
    for sign in (1.0, -1.0):
        term.process_actions(torch.full((NUM_ENVS, term.action_dim), sign))
        target = term.processed_action[0].double()
        assert bool(((target >= lower - 1e-6) & (target <= upper + 1e-6)).all())


def _actuator_of(model: mujoco.MjModel, joint: str) -> int:
    """The actuator driving ``joint``."""
    jid = model.joint(joint).id
    return next(a for a in range(model.nu) if int(model.actuator_trnid[a, 0]) == jid)


def test_bounds_reach_every_frame_of_the_default_clip(tracking_env):
    term = tracking_env.action_manager.get_term("joint_pos")
    model = tracking_env.backend.mj_model
    clip = load_motion(resolve_motion_file(None), model, target_fps=1.0 / tracking_env.step_dt)
    columns = [clip.joint_names.index(n) for n in term.joint_names]
    angles = clip.joint_pos[:, columns].double()  # (T, 29)
    lower, upper = _model_ranges(model, term.joint_names)
    default = torch.tensor([G1.default_joint_pos.get(n, 0.0) for n in term.joint_names]).double()
    # the reachable set of a in [-1, 1] is [default - scale, default + scale] clamped to the joint range
    scale = term.scale.double()
    reach_low, reach_high = torch.maximum(default - scale, lower), torch.minimum(default + scale, upper)
    tolerance = 1e-5
    outside = (angles < reach_low - tolerance) | (angles > reach_high + tolerance)
    assert not bool(outside.any()), [term.joint_names[j] for j in outside.any(dim=0).nonzero().flatten()]
    # and the old PPO-style scale does not reach them (the bug this mapping fixes)
    ppo = torch.tensor([0.25 * e / kp for kp, e in zip(*_gains(model))]).double()
    assert bool(((angles - default).abs() > ppo + tolerance).any())


def _gains(model: mujoco.MjModel) -> tuple[list[float], list[float]]:
    gains = simcore.pd_gains_from_armature(model)
    return list(gains.kp), list(gains.effort_limit)


def test_mapping_round_trips_clip_poses_through_the_action(tracking_env):
    term = tracking_env.action_manager.get_term("joint_pos")
    model = tracking_env.backend.mj_model
    clip = load_motion(resolve_motion_file(None), model, target_fps=1.0 / tracking_env.step_dt)
    columns = [clip.joint_names.index(n) for n in term.joint_names]
    meta = term.meta()
    offset = torch.tensor(meta["action_offset"])
    scale = torch.tensor(meta["action_scale"])
    for frame in (0, clip.num_frames // 2, clip.num_frames - 1):
        pose = clip.joint_pos[frame, columns].expand(NUM_ENVS, -1)
        action = (pose - offset) / scale  # what a deployment inverts with the exported metadata
        assert bool((action.abs() <= 1.0 + 1e-6).all())
        term.process_actions(action.clamp(-1.0, 1.0))
        torch.testing.assert_close(term.processed_action, pose, atol=1e-5, rtol=0.0)


def test_mapping_is_affine_then_clamped_and_zero_is_the_default_pose(tracking_env):
    term = tracking_env.action_manager.get_term("joint_pos")
    lower, upper = _model_ranges(tracking_env.backend.mj_model, term.joint_names)
    default = torch.tensor([G1.default_joint_pos.get(n, 0.0) for n in term.joint_names])
    expected_scale = torch.maximum(upper - default.double(), default.double() - lower)
    torch.testing.assert_close(term.scale.double(), expected_scale, atol=1e-6, rtol=0.0)
    term.process_actions(torch.zeros(NUM_ENVS, term.action_dim))
    torch.testing.assert_close(term.processed_action, default.expand(NUM_ENVS, -1), atol=1e-6, rtol=0.0)
    g = torch.Generator().manual_seed(3)
    action = torch.rand(NUM_ENVS, term.action_dim, generator=g) * 2 - 1
    term.process_actions(action)
    reference = torch.clamp(default.double() + expected_scale * action.double(), lower, upper)
    torch.testing.assert_close(term.processed_action.double(), reference, atol=1e-5, rtol=0.0)
    # each side reaches its limit
    term.process_actions(torch.ones(NUM_ENVS, term.action_dim))
    torch.testing.assert_close(term.processed_action[0].double(), upper, atol=1e-5, rtol=0.0)
    term.process_actions(-torch.ones(NUM_ENVS, term.action_dim))
    torch.testing.assert_close(term.processed_action[0].double(), lower, atol=1e-5, rtol=0.0)


def test_soft_limit_factor_shrinks_the_range_about_its_middle():
    env = _env("g1_walk_flat", mode="joint_limits", soft_limit_factor=0.9)
    term = env.action_manager.get_term("joint_pos")
    lower, upper = _model_ranges(env.backend.mj_model, term.joint_names)
    middle, half = (lower + upper) / 2, (upper - lower) / 2
    term.process_actions(torch.ones(NUM_ENVS, term.action_dim))
    torch.testing.assert_close(term.processed_action[0].double(), middle + 0.9 * half, atol=1e-5, rtol=0.0)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"mode": "joint_limits", "scale": 0.5}, "drop the scale param"),
        ({"mode": "joint_limits", "soft_limit_factor": 0.0}, "soft_limit_factor"),
        ({"mode": "joint_limits", "use_default_offset": False}, "use_default_offset"),
        ({"mode": "tanh"}, "not one of"),
    ],
)
def test_bad_mode_params_are_refused(params, message):
    with pytest.raises(ValueError, match=message):
        _env("g1_walk_flat", **params)


def test_export_metadata_carries_the_per_joint_mapping(tracking_env):
    from trainrt.runner.build import env_metadata
    from trainrt.runner.export import export_metadata

    meta = export_metadata(
        env_metadata(tracking_env), obs_group="policy", algo="sac", task="g1_motion_tracking", iteration=0
    )
    term = tracking_env.action_manager.get_term("joint_pos")
    assert meta["joint_names"] == list(G1.joint_names)
    assert meta["action_mode"] == {"joint_pos": "joint_limits"}
    assert meta["action_scale"] == pytest.approx(term.scale.tolist())
    assert meta["action_offset"] == pytest.approx(
        [G1.default_joint_pos.get(n, 0.0) for n in meta["joint_names"]]
    )
    lower, upper = _model_ranges(tracking_env.backend.mj_model, meta["joint_names"])
    assert meta["target_lower"] == pytest.approx(lower.tolist(), abs=1e-6)
    assert meta["target_upper"] == pytest.approx(upper.tolist(), abs=1e-6)
    assert all(math.isfinite(v) for v in meta["action_scale"])
