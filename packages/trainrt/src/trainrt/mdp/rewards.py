"""Reward terms: ``func(env, **params) -> (num_envs,)`` float32, unweighted (the manager applies weight and dt).

Names end in their kernel: ``_exp`` terms lie in (0, 1] (1 is perfect), ``_l2``/``_l1`` terms are
non-negative penalties (use a negative weight), counts and indicators say so in their docstring.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import torch

import simcore
from trainrt.hotpath import cold_path
from trainrt.managers import REQUIRED, ManagerTermBase
from trainrt.mdp.name_matching import values_by_pattern
from trainrt.mdp.term_bases import ContactThresholdTerm, JointSubsetTerm, nonempty_names

if TYPE_CHECKING:
    from trainrt.envs import ManagerBasedRlEnv

# --- velocity tracking --------------------------------------------------------------------------------------


def track_lin_vel_xy_exp(env: ManagerBasedRlEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-|v_cmd_xy - v_xy|^2 / std^2)`` with the root velocity in the root frame (num_envs,)."""
    command = env.command_manager.command(command_name)
    error = (command[:, :2] - env.robot.root_lin_vel_b[:, :2]).square().sum(dim=1)
    # x / -c equals -x / c exactly (IEEE division is sign-symmetric), one kernel fewer.
    return torch.exp(error / -(std**2))


def track_ang_vel_z_exp(env: ManagerBasedRlEnv, command_name: str, std: float) -> torch.Tensor:
    """``exp(-(wz_cmd - wz)^2 / std^2)`` with the yaw rate in the root frame (num_envs,)."""
    command = env.command_manager.command(command_name)
    error = (command[:, 2] - env.robot.root_ang_vel_b[:, 2]).square()
    return torch.exp(error / -(std**2))


# --- base motion and posture ---------------------------------------------------------------------------------


def lin_vel_z_l2(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Squared vertical velocity of the root in the root frame (num_envs,)."""
    return env.robot.root_lin_vel_b[:, 2].square()


def ang_vel_xy_l2(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Squared roll and pitch rates of the root in the root frame, summed (num_envs,)."""
    return env.robot.root_ang_vel_b[:, :2].square().sum(dim=1)


def flat_orientation_l2(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Tilt: squared x/y components of gravity in the root frame, summed (num_envs,); 0 when upright."""
    return env.robot.projected_gravity_b[:, :2].square().sum(dim=1)


def base_height_l2(env: ManagerBasedRlEnv, target_height: float) -> torch.Tensor:
    """Squared error of the root height against ``target_height`` m over flat ground (num_envs,)."""
    return (env.robot.root_pos_w[:, 2] - target_height).square()


def alive(env: ManagerBasedRlEnv) -> torch.Tensor:
    """1 for every row: a per-step bonus for not having terminated (num_envs,)."""
    return torch.ones(env.num_envs, device=env.device)


# --- actions and joints ----------------------------------------------------------------------------------------


def action_rate_l2(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Squared change of the action since the last step, summed over actions (num_envs,)."""
    return (env.action_manager.action - env.action_manager.prev_action).square().sum(dim=1)


def joint_torques_l2(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Squared actuator torques, summed over joints (num_envs,) in (N m)^2."""
    return env.robot.applied_torque.square().sum(dim=1)


class JointPosLimits(ManagerTermBase):
    """Distance beyond the soft joint limits, summed over limited joints (num_envs,) in rad.

    Params:
        soft_ratio: the soft range is the hard range shrunk about its middle to this fraction.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {"soft_ratio": 1.0}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        ratio = float(self.params["soft_ratio"])
        if not 0.0 < ratio <= 1.0:
            raise ValueError(f"JointPosLimits: soft_ratio must lie in (0, 1], got {ratio}")
        limits = env.robot.joint_pos_limits
        limited = torch.isfinite(limits).all(dim=1)
        middle = torch.where(limited, limits.mean(dim=1), 0.0)
        half = torch.where(limited, 0.5 * (limits[:, 1] - limits[:, 0]) * ratio, math.inf)
        self.lower, self.upper = middle - half, middle + half
        if bool((self.lower > self.upper).any()):
            raise ValueError("JointPosLimits: every joint range must have lower <= upper")

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """Evaluate for all rows."""
        # With lower <= upper at most one side is violated, so the distance beyond the range is
        # |q - clamp(q, lower, upper)|: the same float as (lower - q) or (q - upper) plus an exact zero.
        q = env.robot.joint_pos
        return (q - torch.clamp(q, self.lower, self.upper)).abs().sum(dim=1)


class JointDeviationL1(JointSubsetTerm):
    """Weighted absolute deviation of ``joint_names`` from the default pose, summed (num_envs,) in rad.

    Params:
        joint_names: joint patterns (exact names or regexes).
        joint_weights: one weight for all, or ``{pattern: weight}`` (unmatched selected joints weigh 1).
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {**JointSubsetTerm.PARAMS, "joint_weights": 1.0}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        values = values_by_pattern(self.params["joint_weights"], self.joint_names, "joint", default=1.0)
        self.weights = torch.tensor(values, device=env.device)

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """Evaluate for all rows."""
        return (joint_deviation_abs(env)[:, self.joint_ids] * self.weights).sum(dim=1)


def joint_deviation_abs(env: ManagerBasedRlEnv) -> torch.Tensor:
    """``|joint_pos - default_joint_pos|`` of every joint (num_envs, J), computed once per state.

    Every ``JointDeviationL1`` term gathers its joints from it (elementwise, so gathering after the
    subtraction gives the same floats as gathering before).
    """
    robot = env.robot
    return env.state_cache.get(
        (id(robot), "joint_deviation_abs"), lambda: (robot.joint_pos - robot.default_joint_pos).abs()
    )


# --- feet and contacts -----------------------------------------------------------------------------------------


def shared_in_contact(env: ManagerBasedRlEnv, term: ContactThresholdTerm) -> torch.Tensor:
    """``term.in_contact(env)`` (num_envs, C) bool, computed once per state for every term that selects the
    same contact bodies (by name, same order) with the same threshold (reward and observation terms alike)."""
    names = term.params["contact_body_names"]
    key = (
        id(env.plan),
        "in_contact",
        names if isinstance(names, str) else tuple(names),
        term.force_threshold,
    )
    return env.state_cache.get(key, lambda: term.in_contact(env))


class FeetSlipL2(ContactThresholdTerm):
    """Squared horizontal speed of feet in contact, summed over feet (num_envs,) in (m/s)^2.

    Params:
        body_names: foot bodies of the read plan (velocities).
        contact_body_names: the same feet among the plan's contact bodies, same order.
        force_threshold: contact force (N) above which a foot counts as in contact.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {**ContactThresholdTerm.PARAMS, "body_names": REQUIRED}

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        bodies = nonempty_names(type(self).__name__, self.params, "body_names")
        if len(bodies) != len(self.contact_ids):
            raise ValueError(
                f"FeetSlipL2: body_names {bodies} and contact_body_names "
                f"{list(self.params['contact_body_names'])} must name the same feet, same length and order"
            )
        self.body_ids = torch.tensor(env.robot.body_ids(bodies), dtype=torch.long, device=env.device)
        # A device zero to select against: a Python 0.0 would become a new device scalar (a fill) per call.
        self._zero = torch.zeros((), device=env.device)

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """Evaluate for all rows."""
        in_contact = shared_in_contact(env, self)
        speed_sq = env.robot.body_lin_vel_w[:, self.body_ids, :2].square().sum(dim=-1)
        return torch.where(in_contact, speed_sq, self._zero).sum(dim=1)


class FeetContactPhase(ContactThresholdTerm):
    """Fraction of feet whose contact state matches the gait clock (num_envs,) in [0, 1].

    A foot is expected in stance while its phase (from a ``GaitPhaseCommand``) is below ``stance_fraction``;
    rows whose velocity command is below ``standing_threshold`` expect every foot in stance.

    Params:
        contact_body_names: the feet among the plan's contact bodies, one per gait-clock foot, in the gait
            clock's order (``GaitPhaseCommand.foot_offsets``).
        gait_command_name: the ``GaitPhaseCommand`` term.
        velocity_command_name: the velocity command term (``(vx, vy, wz)``).
        stance_fraction: share of the cycle each foot spends in stance.
        force_threshold: contact force (N) above which a foot counts as in contact.
        standing_threshold: command norm below which a row stands.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {
        **ContactThresholdTerm.PARAMS,
        "gait_command_name": "gait",
        "velocity_command_name": "twist",
        "stance_fraction": 0.55,
        "standing_threshold": 0.1,
    }

    @cold_path
    def __init__(self, cfg: Any, env: ManagerBasedRlEnv) -> None:
        super().__init__(cfg, env)
        p = self.params
        self.gait_command_name = str(p["gait_command_name"])
        self.velocity_command_name = str(p["velocity_command_name"])
        self.stance_fraction = float(p["stance_fraction"])
        self.standing_threshold = float(p["standing_threshold"])
        feet = len(env.command_manager.get_term(self.gait_command_name).foot_offsets)
        if len(self.contact_ids) != feet:
            raise ValueError(
                f"FeetContactPhase: contact_body_names lists {len(self.contact_ids)} bodies "
                f"{p['contact_body_names']!r} but gait command {self.gait_command_name!r} clocks {feet} feet; "
                "list one contact body per entry of the gait command's foot_offsets, in the same order"
            )

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """Evaluate for all rows."""
        foot_phase = env.command_manager.get_term(self.gait_command_name).foot_phase
        standing = (
            env.command_manager.command(self.velocity_command_name).norm(dim=1) < self.standing_threshold
        )
        expect_stance = (foot_phase < self.stance_fraction) | standing.unsqueeze(1)
        in_contact = shared_in_contact(env, self)
        return (in_contact == expect_stance).to(torch.float32).mean(dim=1)


class UndesiredContacts(ContactThresholdTerm):
    """Number of listed contact bodies pushed by more than ``force_threshold`` newtons (num_envs,)."""

    def __call__(self, env: ManagerBasedRlEnv) -> torch.Tensor:
        """Evaluate for all rows."""
        return shared_in_contact(env, self).to(torch.float32).sum(dim=1)


def self_collision_count(env: ManagerBasedRlEnv) -> torch.Tensor:
    """Number of contacts between the robot's own geoms (num_envs,), a count; use a negative weight.

    Reads simcore's ``SELF_COLLISION_SENSOR``: the scene's model must be loaded with ``self_collision_pairs``
    (only those pairs can touch) and list that sensor in ``SceneCfg.sensors``.
    """
    return env.plan.sensor(simcore.SELF_COLLISION_SENSOR)[:, 0].to(torch.float32)
