"""RobotView: named, float32, batched views of the robot's state for terms, built over a backend and a read plan.

Free-joint convention (MuJoCo): ``qpos[:, r:r+3]`` root position (world), ``qpos[:, r+3:r+7]`` root quaternion
(wxyz), ``qvel[:, d:d+3]`` root linear velocity (world), ``qvel[:, d+3:d+6]`` root angular velocity (LOCAL body
frame). The robot's joints are the model's hinge and slide joints, in model order.

Every property is computed from the current backend state when read. When the backend stores float32, plain
slices are returned as views of the backend's tensors: terms must treat them as read-only. Quantities that
take arithmetic (frame rotations, heading, applied torque) are memoized in the env's ``StateCache`` while the
state holds, so the terms of one step that read them share one computation.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import mujoco
import numpy as np
import torch

from trainrt.envs.state_cache import StateCache
from trainrt.hotpath import cold_path
from trainrt.managers.base import assign_columns_, index_or_slice
from trainrt.mdp.math import quat_apply, quat_apply_inverse, yaw_from_quat


class RobotView:
    """Batched robot state (num_envs rows) as float32 tensors on the backend's device."""

    @cold_path
    def __init__(
        self,
        backend: Any,
        plan: Any,
        *,
        default_joint_pos: dict[str, float] | None = None,
        init_root_height: float | None = None,
        state_cache: StateCache | None = None,
    ) -> None:
        """Resolve joint/actuator layouts from ``backend.mj_model`` and the body/contact layout from ``plan``.

        Args:
            backend: a simcore backend.
            plan: the backend's read plan over the scene's bodies, sensors and contact bodies.
            default_joint_pos: default joint positions by joint name or regex; others take ``qpos0``.
            init_root_height: root height of the default pose; ``None`` keeps ``qpos0``'s.
            state_cache: the env's cache for derived quantities; ``None`` computes on every read.
        """
        self._backend = backend
        self._cache = state_cache
        self._plan = plan
        model = backend.mj_model
        self.num_envs = backend.num_envs
        self.device = backend.device
        dev = self.device

        free = [j for j in range(model.njnt) if int(model.jnt_type[j]) == mujoco.mjtJoint.mjJNT_FREE.value]
        self.has_root = len(free) > 0
        self._root_q = int(model.jnt_qposadr[free[0]]) if free else 0
        self._root_d = int(model.jnt_dofadr[free[0]]) if free else 0

        joints = []
        for j in range(model.njnt):
            jtype = int(model.jnt_type[j])
            if jtype == mujoco.mjtJoint.mjJNT_BALL.value:
                name = mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j)
                raise NotImplementedError(
                    f"RobotView: ball joint {name!r} is not supported (hinge/slide only)"
                )
            if jtype in (mujoco.mjtJoint.mjJNT_HINGE.value, mujoco.mjtJoint.mjJNT_SLIDE.value):
                joints.append(j)
        self.joint_names: list[str] = [mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, j) for j in joints]
        """Names of the robot's 1-DoF joints, model order (J,)."""
        self.num_joints = len(joints)
        self._joint_q = index_or_slice([int(model.jnt_qposadr[j]) for j in joints], dev)
        self._joint_d = index_or_slice([int(model.jnt_dofadr[j]) for j in joints], dev)

        defaults = np.array([model.qpos0[model.jnt_qposadr[j]] for j in joints], dtype=np.float64)
        for key, value in (default_joint_pos or {}).items():
            hits = [i for i, n in enumerate(self.joint_names) if n == key or re.fullmatch(key, n)]
            if not hits:
                raise ValueError(
                    f"default_joint_pos key {key!r} matches no joint; joints: {self.joint_names}"
                )
            defaults[hits] = value
        self.default_joint_pos = (
            torch.tensor(defaults, dtype=torch.float32, device=dev).expand(self.num_envs, -1).clone()
        )
        """Default joint positions (num_envs, J); writable per row (e.g. calibration offsets)."""

        qpos0 = model.qpos0.astype(np.float64).copy()
        if self.has_root and init_root_height is not None:
            qpos0[self._root_q + 2] = init_root_height
        for j, value in zip(joints, defaults):
            qpos0[model.jnt_qposadr[j]] = value
        self.default_qpos = torch.tensor(qpos0, dtype=torch.float32, device=dev)
        """The default full ``qpos`` (nq,): ``qpos0`` with the root height and default joint positions."""

        limited = np.array([bool(model.jnt_limited[j]) for j in joints], dtype=bool)
        ranges = np.array([model.jnt_range[j] for j in joints], dtype=np.float64).reshape(-1, 2)
        ranges[~limited] = (-math.inf, math.inf)
        self.joint_pos_limits = torch.tensor(ranges, dtype=torch.float32, device=dev)
        """Joint position limits (J, 2); ``(-inf, inf)`` for unlimited joints."""

        self._build_actuator_model(model, joints)

        self.body_names: list[str] = list(plan.body_names)
        """Names of the bodies in the read plan (B,)."""
        self._gravity_dir = torch.tensor([0.0, 0.0, -1.0], device=dev)

    @cold_path
    def _build_actuator_model(self, model: mujoco.MjModel, joints: list[int]) -> None:
        """Map actuators to joints for ``applied_torque`` and ``joint_effort_limits``."""
        joint_pos = {j: i for i, j in enumerate(joints)}
        by_joint: dict[int, list[int]] = {}
        for a in range(model.nu):
            if (
                int(model.actuator_trntype[a]) == mujoco.mjtTrn.mjTRN_JOINT.value
                and int(model.actuator_trnid[a, 0]) in joint_pos
            ):
                by_joint.setdefault(joint_pos[int(model.actuator_trnid[a, 0])], []).append(a)
        effort = np.full(len(joints), math.inf)
        for i, j in enumerate(joints):
            for a in by_joint.get(i, []):
                if model.actuator_forcelimited[a]:
                    bound = float(np.max(np.abs(model.actuator_forcerange[a]))) * abs(
                        float(model.actuator_gear[a, 0])
                    )
                    effort[i] = min(effort[i], bound)
            if model.jnt_actfrclimited[j]:
                effort[i] = min(effort[i], float(np.max(np.abs(model.jnt_actfrcrange[j]))))
        self.joint_effort_limits = torch.tensor(effort, dtype=torch.float32, device=self.device)
        """Effort limit per joint (J,) from actuator force ranges and joint actuator-force ranges; inf if none."""

        # applied_torque reproduces MuJoCo's affine actuator force (fixed gain, affine/no bias, no dynamics).
        single = all(len(v) == 1 for v in by_joint.values())
        acts = [by_joint[i][0] for i in sorted(by_joint)] if single else []
        affine = all(
            int(model.actuator_gaintype[a]) == mujoco.mjtGain.mjGAIN_FIXED.value
            and int(model.actuator_biastype[a])
            in (mujoco.mjtBias.mjBIAS_AFFINE.value, mujoco.mjtBias.mjBIAS_NONE.value)
            and int(model.actuator_dyntype[a]) == mujoco.mjtDyn.mjDYN_NONE.value
            for a in acts
        )
        self._torque_unsupported = None
        if not single:
            self._torque_unsupported = "a joint is driven by more than one actuator"
        elif not affine:
            self._torque_unsupported = "an actuator is not an affine (fixed-gain, no-dynamics) actuator"
        dev = self.device
        actuated_joints = sorted(by_joint) if single else []
        self._torque_all_joints = actuated_joints == list(range(len(joints)))
        self._torque_joint_cols = torch.tensor(actuated_joints, dtype=torch.long, device=dev)
        self._torque_acts = index_or_slice(acts, dev) if acts else slice(0, 0)
        self._torque_q = index_or_slice([int(model.jnt_qposadr[joints[i]]) for i in actuated_joints], dev)
        self._torque_d = index_or_slice([int(model.jnt_dofadr[joints[i]]) for i in actuated_joints], dev)

        def column(values: list[float]) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float32, device=dev)

        inf = math.inf
        self._gear = column([float(model.actuator_gear[a, 0]) for a in acts])
        self._ctrl_lo = column(
            [float(model.actuator_ctrlrange[a, 0]) if model.actuator_ctrllimited[a] else -inf for a in acts]
        )
        self._ctrl_hi = column(
            [float(model.actuator_ctrlrange[a, 1]) if model.actuator_ctrllimited[a] else inf for a in acts]
        )
        self._force_lo = column(
            [float(model.actuator_forcerange[a, 0]) if model.actuator_forcelimited[a] else -inf for a in acts]
        )
        self._force_hi = column(
            [float(model.actuator_forcerange[a, 1]) if model.actuator_forcelimited[a] else inf for a in acts]
        )
        jl = [joints[i] for i in actuated_joints]
        self._jfrc_lo = column(
            [float(model.jnt_actfrcrange[j, 0]) if model.jnt_actfrclimited[j] else -inf for j in jl]
        )
        self._jfrc_hi = column(
            [float(model.jnt_actfrcrange[j, 1]) if model.jnt_actfrclimited[j] else inf for j in jl]
        )
        self._gain_const = column([float(model.actuator_gainprm[a, 0]) for a in acts])
        self._bias_const = torch.tensor(
            np.array([model.actuator_biasprm[a, :3] for a in acts]).reshape(-1, 3),
            dtype=torch.float32,
            device=dev,
        )
        fields = self._backend.model_fields
        self._per_world_gain = "actuator_gainprm" in fields
        self._per_world_bias = "actuator_biasprm" in fields

    def _memo(self, name: str, compute: Any) -> torch.Tensor:
        """``compute()`` memoized in the state cache while the state holds (computed every read without one)."""
        if self._cache is None:
            return compute()
        return self._cache.get((id(self), name), compute)

    def _require_root(self) -> None:
        if not self.has_root:
            raise NotImplementedError("RobotView: the model has no free joint, so there is no root state")

    # --- root -------------------------------------------------------------------------------------------

    @property
    def root_pos_w(self) -> torch.Tensor:
        """Root position in the world frame (num_envs, 3)."""
        self._require_root()
        return self._backend.qpos[:, self._root_q : self._root_q + 3].to(torch.float32)

    @property
    def root_quat_w(self) -> torch.Tensor:
        """Root orientation, world frame, wxyz (num_envs, 4)."""
        self._require_root()
        return self._backend.qpos[:, self._root_q + 3 : self._root_q + 7].to(torch.float32)

    @property
    def root_lin_vel_w(self) -> torch.Tensor:
        """Root linear velocity in the world frame (num_envs, 3)."""
        self._require_root()
        return self._backend.qvel[:, self._root_d : self._root_d + 3].to(torch.float32)

    @property
    def root_ang_vel_b(self) -> torch.Tensor:
        """Root angular velocity in the root (body) frame (num_envs, 3)."""
        self._require_root()
        return self._backend.qvel[:, self._root_d + 3 : self._root_d + 6].to(torch.float32)

    @property
    def root_ang_vel_w(self) -> torch.Tensor:
        """Root angular velocity in the world frame (num_envs, 3)."""
        return self._memo("root_ang_vel_w", lambda: quat_apply(self.root_quat_w, self.root_ang_vel_b))

    @property
    def root_lin_vel_b(self) -> torch.Tensor:
        """Root linear velocity in the root (body) frame (num_envs, 3)."""
        return self._memo("root_lin_vel_b", lambda: quat_apply_inverse(self.root_quat_w, self.root_lin_vel_w))

    @property
    def projected_gravity_b(self) -> torch.Tensor:
        """Unit gravity direction in the root frame (num_envs, 3); ``(0, 0, -1)`` when upright."""
        return self._memo(
            "projected_gravity_b",
            lambda: quat_apply_inverse(self.root_quat_w, self._gravity_dir.expand(self.num_envs, 3)),
        )

    @property
    def heading_w(self) -> torch.Tensor:
        """Yaw of the root's forward (x) axis in the world frame, in (-pi, pi] (num_envs,)."""
        return self._memo("heading_w", lambda: yaw_from_quat(self.root_quat_w))

    # --- joints -------------------------------------------------------------------------------------------

    @property
    def joint_pos(self) -> torch.Tensor:
        """Joint positions (num_envs, J)."""
        return self._backend.qpos[:, self._joint_q].to(torch.float32)

    @property
    def joint_vel(self) -> torch.Tensor:
        """Joint velocities (num_envs, J)."""
        return self._backend.qvel[:, self._joint_d].to(torch.float32)

    @property
    def applied_torque(self) -> torch.Tensor:
        """Actuator torque on each joint at the current state and ``ctrl``, after force limits (num_envs, J).

        Computed with MuJoCo's affine actuator law ``gain * ctrl + b0 + b1 * length + b2 * velocity`` (per-world
        gains/biases when the backend randomizes them); joints without an actuator read 0.
        """
        if self._torque_unsupported is not None:
            raise NotImplementedError(f"RobotView.applied_torque: {self._torque_unsupported}")
        return self._memo("applied_torque", self._applied_torque)

    def _applied_torque(self) -> torch.Tensor:
        backend = self._backend
        ctrl = backend.ctrl[:, self._torque_acts].to(torch.float32)
        ctrl = torch.clamp(ctrl, self._ctrl_lo, self._ctrl_hi)
        length = backend.qpos[:, self._torque_q].to(torch.float32) * self._gear
        velocity = backend.qvel[:, self._torque_d].to(torch.float32) * self._gear
        fields = backend.model_fields
        if self._per_world_gain:
            gain = fields["actuator_gainprm"][:, self._torque_acts, 0].to(torch.float32)
        else:
            gain = self._gain_const
        if self._per_world_bias:
            bias = fields["actuator_biasprm"][:, self._torque_acts, :3].to(torch.float32)
            b0, b1, b2 = bias[..., 0], bias[..., 1], bias[..., 2]
        else:
            b0, b1, b2 = self._bias_const[:, 0], self._bias_const[:, 1], self._bias_const[:, 2]
        force = torch.clamp(gain * ctrl + b0 + b1 * length + b2 * velocity, self._force_lo, self._force_hi)
        torque = torch.clamp(force * self._gear, self._jfrc_lo, self._jfrc_hi)
        if self._torque_all_joints:
            return torque
        out = torch.zeros(self.num_envs, self.num_joints, device=self.device)
        assign_columns_(out, self._torque_joint_cols, torque)
        return out

    # --- bodies and contacts ----------------------------------------------------------------------------------

    @cold_path
    def body_ids(self, names: str | Sequence[str]) -> list[int]:
        """Indices into the plan's bodies (the B axis of ``body_*``) of ``names`` (exact names or regexes)."""
        names = [names] if isinstance(names, str) else list(names)
        ids = []
        for key in names:
            hits = [i for i, n in enumerate(self.body_names) if n == key or re.fullmatch(key, n)]
            if not hits:
                raise ValueError(f"body {key!r} is not in the read plan; plan bodies: {self.body_names}")
            ids.extend(h for h in hits if h not in ids)
        return ids

    @property
    def body_pos_w(self) -> torch.Tensor:
        """Positions of the plan's bodies in the world frame (num_envs, B, 3)."""
        return self._plan.body_pos_w.to(torch.float32)

    @property
    def body_quat_w(self) -> torch.Tensor:
        """Orientations of the plan's bodies, world frame, wxyz (num_envs, B, 4)."""
        return self._plan.body_quat_w.to(torch.float32)

    @property
    def body_lin_vel_w(self) -> torch.Tensor:
        """Linear velocities of the plan's body origins in the world frame (num_envs, B, 3)."""
        return self._plan.body_lin_vel_w.to(torch.float32)

    @property
    def body_ang_vel_w(self) -> torch.Tensor:
        """Angular velocities of the plan's bodies in the world frame (num_envs, B, 3)."""
        return self._plan.body_ang_vel_w.to(torch.float32)

    @property
    def contact_force(self) -> torch.Tensor:
        """Net world-frame contact force on each contact body of the plan (num_envs, C, 3)."""
        return self._plan.contact_force.to(torch.float32)

    @property
    def contact_body_names(self) -> list[str]:
        """Names of the plan's contact bodies (the C axis of ``contact_force``)."""
        return list(self._plan.contact_body_names)

    @property
    def contact_found(self) -> torch.Tensor:
        """Whether each contact body of the plan touches anything (num_envs, C) bool."""
        return self._plan.contact_found
