"""Action manager: splits the policy action across action terms, which write actuator controls.

The env processes the action once per control step and applies it once before ``backend.step()``; the
backend holds ``ctrl`` over its ``decimation`` substeps (PD targets stay fixed within a control step).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import mujoco
import torch

from trainrt.hotpath import cold_path
from trainrt.managers.base import (
    ManagerBase,
    assign_columns_,
    callable_name,
    index_or_slice,
    merge_term_params,
)
from trainrt.managers.env_protocol import ManagedEnv


@dataclass
class ActionTermCfg:
    """One action term: an ``ActionTerm`` subclass built as ``cls(cfg, env)``; it reads ``params``."""

    cls: type[ActionTerm]
    params: dict[str, Any] = field(default_factory=dict)


class ActionTerm:
    """Base of action terms: owns a slice of the policy action and turns it into backend controls.

    Parameters are declared in ``PARAMS`` and read from ``self.params``.
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {}
    """Declared parameters: name -> default (``REQUIRED`` for none)."""

    @cold_path
    def __init__(self, cfg: ActionTermCfg, env: ManagedEnv) -> None:
        self.cfg = cfg
        self.env = env
        self.num_envs = env.num_envs
        self.device = env.device
        self.params = merge_term_params(type(self).__name__, cfg.params, self.PARAMS)
        """The term's parameters: ``cfg.params`` over the declared defaults."""

    @property
    def action_dim(self) -> int:
        """Number of action columns this term consumes."""
        raise NotImplementedError(f"{type(self).__name__} must implement action_dim")

    def process_actions(self, actions: torch.Tensor) -> None:
        """Take this term's slice of the policy action (num_envs, action_dim) and compute the targets."""
        raise NotImplementedError(f"{type(self).__name__} must implement process_actions")

    def apply_actions(self) -> None:
        """Write the processed targets into the backend (``backend.ctrl``)."""
        raise NotImplementedError(f"{type(self).__name__} must implement apply_actions")

    def reset(self, env_mask: torch.Tensor) -> None:
        """Reset per-row state for rows where ``env_mask`` (num_envs,) is True (default: nothing)."""

    def write_reset_ctrl(self, ctrl: torch.Tensor) -> None:
        """Write the controls of a zero action into the reset payload's ``ctrl`` (num_envs, nu), all rows."""

    @cold_path
    def meta(self) -> dict[str, Any]:
        """Describe the term for export and deployment (joint names, offsets, scales, gains)."""
        return {}


ACTION_MODES: tuple[str, ...] = ("scale", "joint_limits")
"""How ``JointPositionAction`` maps an action to a joint target (see its docstring)."""


class JointPositionAction(ActionTerm):
    """PD position targets: ``ctrl = clamp(offset + scale * action, lower, upper)`` for the selected joints.

    Two modes set ``scale`` (one affine map per joint in both):

    ``"scale"``
        ``scale`` is given (float, or dict pattern -> float covering every selected joint); made for unbounded
        (Gaussian, PPO-style) actions, where an action of 1 is a modest step from the default pose.
    ``"joint_limits"``
        for bounded (tanh) policies whose actions lie in [-1, 1]: the offset is the default pose (action 0 is
        the default pose) and ``scale = max(upper - default, default - lower)`` per joint, over the soft limits
        (the joint range shrunk about its middle by ``soft_limit_factor``), so +1 and -1 reach at least the
        limit on each side; targets are clamped to the soft limits, so the side nearer to the default pose
        saturates early. Every pose inside the soft limits is reachable. ``scale`` must not be given; every
        selected joint must be limited.

    Params: ``joint_names`` (regex patterns, default all actuated joints, in actuator order), ``mode``,
    ``scale`` (mode ``"scale"``, default 1), ``soft_limit_factor`` (mode ``"joint_limits"``, in (0, 1]),
    ``use_default_offset`` (offset = the env's default joint positions, else 0; must be true for
    ``"joint_limits"``), ``clip_to_joint_range`` (mode ``"scale"``: clamp targets to the joint limits).
    """

    PARAMS: ClassVar[Mapping[str, Any]] = {
        "joint_names": None,
        "mode": "scale",
        "scale": None,
        "soft_limit_factor": 1.0,
        "use_default_offset": True,
        "clip_to_joint_range": False,
    }

    @cold_path
    def __init__(self, cfg: ActionTermCfg, env: ManagedEnv) -> None:
        super().__init__(cfg, env)
        patterns = self.params["joint_names"]
        scale = self.params["scale"]
        self.use_default_offset = bool(self.params["use_default_offset"])
        self.clip_to_joint_range = bool(self.params["clip_to_joint_range"])

        model = env.backend.mj_model
        robot = env.robot
        actuated: list[tuple[int, str]] = []  # (actuator id, joint name) in actuator order
        for a in range(model.nu):
            if int(model.actuator_trntype[a]) == mujoco.mjtTrn.mjTRN_JOINT.value:
                name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(model.actuator_trnid[a, 0]))
                if name in robot.joint_names:
                    actuated.append((a, name))
        if patterns is None:
            selected = actuated
        else:
            patterns = [patterns] if isinstance(patterns, str) else list(patterns)
            selected = [(a, n) for a, n in actuated if any(re.fullmatch(p, n) for p in patterns)]
            for p in patterns:
                if not any(re.fullmatch(p, n) for _, n in actuated):
                    raise ValueError(f"JointPositionAction: pattern {p!r} matches no actuated joint")
        if not selected:
            raise ValueError("JointPositionAction: no actuated joints selected")
        self.joint_names = [n for _, n in selected]
        self.actuator_ids = [a for a, _ in selected]
        self.joint_ids = [robot.joint_names.index(n) for n in self.joint_names]
        self._ctrl_cols = index_or_slice(self.actuator_ids, self.device)
        self._joint_cols = index_or_slice(self.joint_ids, self.device)

        self.mode = str(self.params["mode"])
        """The mapping mode: one of ``ACTION_MODES``."""
        if self.mode not in ACTION_MODES:
            raise ValueError(f"JointPositionAction: mode {self.mode!r} is not one of {list(ACTION_MODES)}")
        limits = robot.joint_pos_limits[self.joint_ids]
        self._lower, self._upper = limits[:, 0].clone(), limits[:, 1].clone()
        if self.mode == "joint_limits":
            self._init_joint_limit_scale(cfg)
        else:
            self._init_given_scale(scale)

        d = len(self.joint_names)
        self.raw_action = torch.zeros(self.num_envs, d, device=self.device)
        """The latest action slice (num_envs, action_dim)."""
        self.processed_action = torch.zeros(self.num_envs, d, device=self.device)
        """The latest joint position targets (num_envs, action_dim)."""

    @cold_path
    def _init_given_scale(self, scale: Any) -> None:
        """Mode ``"scale"``: per-joint scales from the ``scale`` param (None: 1 for every joint)."""
        scale = 1.0 if scale is None else scale
        scales = []
        for n in self.joint_names:
            if isinstance(scale, dict):
                matches = [v for p, v in scale.items() if re.fullmatch(p, n)]
                if not matches:
                    raise ValueError(
                        f"JointPositionAction: scale dict {sorted(scale)} does not cover joint {n!r}"
                    )
                scales.append(float(matches[0]))
            else:
                scales.append(float(scale))
        self.scale = torch.tensor(scales, dtype=torch.float32, device=self.device)
        """Action scale per joint (action_dim,)."""

    @cold_path
    def _init_joint_limit_scale(self, cfg: ActionTermCfg) -> None:
        """Mode ``"joint_limits"``: scales from the soft limits around the default pose; targets clamped to them."""
        if "scale" in cfg.params:
            raise ValueError(
                "JointPositionAction: mode 'joint_limits' computes the scale from the joint limits; "
                "drop the scale param or use mode='scale'"
            )
        if not self.use_default_offset:
            raise ValueError("JointPositionAction: mode 'joint_limits' needs use_default_offset=True")
        factor = float(self.params["soft_limit_factor"])
        if not 0.0 < factor <= 1.0:
            raise ValueError(f"JointPositionAction: soft_limit_factor must lie in (0, 1], got {factor}")
        unlimited = [n for n, lo in zip(self.joint_names, self._lower.tolist()) if not math.isfinite(lo)]
        if unlimited:
            raise ValueError(
                f"JointPositionAction: mode 'joint_limits' needs limited joints; unlimited: {unlimited}"
            )
        middle, half = (self._upper + self._lower) / 2, (self._upper - self._lower) / 2
        self._lower, self._upper = middle - factor * half, middle + factor * half
        default = self._offset()[0]
        self.scale = torch.maximum(self._upper - default, default - self._lower).clamp_min(1e-6)
        self.clip_to_joint_range = True

    @property
    def action_dim(self) -> int:
        """Number of controlled joints."""
        return len(self.joint_names)

    def _offset(self) -> torch.Tensor:
        return self.env.robot.default_joint_pos[:, self._joint_cols]

    def process_actions(self, actions: torch.Tensor) -> None:
        """Compute targets (num_envs, action_dim) = offset + scale * action (clamped where configured)."""
        self.raw_action.copy_(actions)
        torch.mul(self.raw_action, self.scale, out=self.processed_action)
        if self.use_default_offset:
            self.processed_action.add_(self._offset())
        if self.clip_to_joint_range:
            torch.clamp(self.processed_action, self._lower, self._upper, out=self.processed_action)

    def apply_actions(self) -> None:
        """Write the targets into the actuators' ``backend.ctrl`` columns."""
        assign_columns_(self.env.backend.ctrl, self._ctrl_cols, self.processed_action)

    def reset(self, env_mask: torch.Tensor) -> None:
        """Zero the raw action of reset rows."""
        self.raw_action.masked_fill_(env_mask.unsqueeze(1), 0.0)

    def write_reset_ctrl(self, ctrl: torch.Tensor) -> None:
        """Controls of a zero action: the offset (default pose); without offset the zeroed payload already is."""
        if self.use_default_offset:
            assign_columns_(ctrl, self._ctrl_cols, self._offset())

    @cold_path
    def meta(self) -> dict[str, Any]:
        """The controlled joints and their mapping: ``target = clamp(offset + scale * action, lower, upper)``.

        Joint names (the action's column order), the robot's default joint positions (row 0; joint
        observations are relative to them whether or not the action adds them), offsets, mode, scales,
        target bounds, PD gains and effort limits.
        """
        model = self.env.backend.mj_model
        ids = self.actuator_ids
        effort = [
            float(model.actuator_forcerange[a, 1]) if model.actuator_forcelimited[a] else math.inf
            for a in ids
        ]
        default = self._offset()[0]  # the robot's default pose: what joint observations are relative to
        offset = default if self.use_default_offset else torch.zeros_like(default)
        lower = self._lower if self.clip_to_joint_range else torch.full_like(self._lower, -math.inf)
        upper = self._upper if self.clip_to_joint_range else torch.full_like(self._upper, math.inf)
        return {
            "joint_names": list(self.joint_names),
            "actuator_ids": list(ids),
            "default_joint_pos": [float(v) for v in default.cpu()],
            "action_mode": self.mode,
            "action_offset": [float(v) for v in offset.cpu()],
            "action_scale": [float(v) for v in self.scale.cpu()],
            "target_lower": [float(v) for v in lower.cpu()],
            "target_upper": [float(v) for v in upper.cpu()],
            "kp": [float(model.actuator_gainprm[a, 0]) for a in ids],
            "kd": [float(-model.actuator_biasprm[a, 2]) for a in ids],
            "effort_limit": effort,
        }


class ActionManager(ManagerBase):
    """Concatenation of the action terms; keeps the current and previous action (num_envs, num_actions)."""

    kind = "action"

    @cold_path
    def __init__(self, cfg: dict[str, ActionTermCfg], env: ManagedEnv) -> None:
        super().__init__(env)
        if not cfg:
            raise ValueError("actions: at least one action term is required")
        self._keep_term_cfgs(cfg, ActionTermCfg)
        self._terms: dict[str, ActionTerm] = {}
        for name, term_cfg in cfg.items():
            if not (isinstance(term_cfg.cls, type) and issubclass(term_cfg.cls, ActionTerm)):
                raise ValueError(f"action term {name!r}: cls must subclass ActionTerm, got {term_cfg.cls!r}")
            self._terms[name] = term_cfg.cls(term_cfg, env)
        self._slices: list[tuple[ActionTerm, slice]] = []
        start = 0
        for term in self._terms.values():
            self._slices.append((term, slice(start, start + term.action_dim)))
            start += term.action_dim
        self.total_action_dim = start
        self.action = torch.zeros(env.num_envs, start, device=env.device)
        """The current action (num_envs, num_actions)."""
        self.prev_action = torch.zeros(env.num_envs, start, device=env.device)
        """The action of the previous control step (num_envs, num_actions); zero right after a reset."""

    def get_term(self, name: str) -> ActionTerm:
        """Return the action term object ``name``."""
        return self._terms[name]

    def process_action(self, action: torch.Tensor) -> None:
        """Store ``action`` (num_envs, num_actions), shift the previous one, and let each term process its slice."""
        self.prev_action.copy_(self.action)
        self.action.copy_(action)
        for term, cols in self._slices:
            term.process_actions(self.action[:, cols])

    def apply_action(self) -> None:
        """Write every term's targets into the backend."""
        for term, _ in self._slices:
            term.apply_actions()

    def reset(self, env_mask: torch.Tensor) -> None:
        """Zero current and previous action of rows where ``env_mask`` (num_envs,) is True; reset terms."""
        self.action.masked_fill_(env_mask.unsqueeze(1), 0.0)
        self.prev_action.masked_fill_(env_mask.unsqueeze(1), 0.0)
        for term in self._terms.values():
            term.reset(env_mask)

    def write_reset_ctrl(self, ctrl: torch.Tensor) -> None:
        """Fill the reset payload's ``ctrl`` (num_envs, nu) with the controls of a zero action."""
        for term in self._terms.values():
            term.write_reset_ctrl(ctrl)

    @cold_path
    def meta(self) -> dict[str, Any]:
        """Per-term descriptions (see ``ActionTerm.meta``), keyed by term name."""
        return {name: term.meta() for name, term in self._terms.items()}

    @cold_path
    def _table_header(self) -> list[str]:
        return ["index", "name", "class", "dim"]

    @cold_path
    def _table_rows(self) -> list[list[Any]]:
        return [
            [i, n, callable_name(c.cls), self._terms[n].action_dim]
            for i, (n, c) in enumerate(self._cfgs.items())
        ]
