"""ReadPlan: bodies, sensors and contact bodies resolved by name once, gathered into fixed tensors every step."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import mujoco
import torch


class DerivedState(NamedTuple):
    """Backend-owned tensors a read plan gathers from (all ``(num_envs, ...)``, world frame, wxyz quaternions).

    Attributes:
        xpos: body frame positions                                 (num_envs, nbody, 3)
        xquat: body frame orientations, wxyz                       (num_envs, nbody, 4)
        cvel: com-based body velocities (rot:lin) at the subtree com of each body's root
                                                                   (num_envs, nbody, 6)
        subtree_com: subtree centers of mass                       (num_envs, nbody, 3)
        sensordata: all sensor outputs                             (num_envs, nsensordata)
        cfrc_ext: com-based external constraint wrench (rot:lin) on each body, from the latest step
                                                                   (num_envs, nbody, 6)
    """

    xpos: torch.Tensor
    xquat: torch.Tensor
    cvel: torch.Tensor
    subtree_com: torch.Tensor
    sensordata: torch.Tensor
    cfrc_ext: torch.Tensor


def _resolve(model: mujoco.MjModel, objtype: mujoco.mjtObj, names: Sequence[str], kind: str) -> list[int]:
    """Map names to ids; ValueError naming every unknown name and the valid set."""
    if isinstance(names, str):
        raise ValueError(f"{kind} names must be a sequence of names, got the string {names!r}")
    names = list(names)
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate {kind} names in {names}")
    ids = [mujoco.mj_name2id(model, objtype, name) for name in names]
    unknown = [name for name, i in zip(names, ids) if i < 0]
    if unknown:
        count = {"body": model.nbody, "sensor": model.nsensor}[kind]
        valid = [mujoco.mj_id2name(model, objtype, i) for i in range(count)]
        raise ValueError(f"unknown {kind} names {unknown}; valid: {[v for v in valid if v]}")
    return ids


class ReadPlan:
    """Fixed-shape world-frame reads negotiated once; the backend refreshes them after step/forward/reset.

    Attributes:
        body_names: bodies in plan order (B of them).
        sensor_names: sensors available through ``sensor(name)``.
        contact_body_names: contact bodies in plan order (C of them).
        body_pos_w: body frame origin positions                    (num_envs, B, 3)
        body_quat_w: body frame orientations, wxyz                 (num_envs, B, 4)
        body_lin_vel_w: linear velocity of the body frame origin   (num_envs, B, 3)
        body_ang_vel_w: angular velocity                           (num_envs, B, 3)
        contact_force: net constraint force on each contact body from all its geoms, world frame, from the
            latest physics step; zero for rows reset since then    (num_envs, C, 3)
        contact_found: whether that force is nonzero               (num_envs, C)
    """

    def __init__(
        self,
        model: mujoco.MjModel,
        derived: DerivedState,
        bodies: Sequence[str] = (),
        sensors: Sequence[str] = (),
        contact_bodies: Sequence[str] = (),
    ) -> None:
        body_ids = _resolve(model, mujoco.mjtObj.mjOBJ_BODY, bodies, "body")
        sensor_ids = _resolve(model, mujoco.mjtObj.mjOBJ_SENSOR, sensors, "sensor")
        contact_ids = _resolve(model, mujoco.mjtObj.mjOBJ_BODY, contact_bodies, "body")
        self.body_names: tuple[str, ...] = tuple(bodies)
        self.sensor_names: tuple[str, ...] = tuple(sensors)
        self.contact_body_names: tuple[str, ...] = tuple(contact_bodies)
        self._derived = derived
        device, dtype = derived.xpos.device, derived.xpos.dtype
        num_envs = derived.xpos.shape[0]

        def index(values: Sequence[int]) -> torch.Tensor:
            return torch.tensor(list(values), dtype=torch.long, device=device)

        self._body_ids = index(body_ids)
        self._root_ids = index(int(model.body_rootid[i]) for i in body_ids)
        self._contact_ids = index(contact_ids)
        b, c = len(body_ids), len(contact_ids)
        self.body_pos_w = torch.zeros(num_envs, b, 3, dtype=dtype, device=device)
        self.body_quat_w = torch.zeros(num_envs, b, 4, dtype=dtype, device=device)
        self.body_lin_vel_w = torch.zeros(num_envs, b, 3, dtype=dtype, device=device)
        self.body_ang_vel_w = torch.zeros(num_envs, b, 3, dtype=dtype, device=device)
        self.contact_force = torch.zeros(num_envs, c, 3, dtype=dtype, device=device)
        self.contact_found = torch.zeros(num_envs, c, dtype=torch.bool, device=device)
        self._sensors: dict[str, torch.Tensor] = {}
        for name, i in zip(self.sensor_names, sensor_ids):
            adr, dim = int(model.sensor_adr[i]), int(model.sensor_dim[i])
            self._sensors[name] = derived.sensordata[:, adr : adr + dim]  # a live view: always current
        self.uses_contacts = c > 0

    def body_index(self, name: str) -> int:
        """Index of body ``name`` along the plan's body axis."""
        try:
            return self.body_names.index(name)
        except ValueError:
            raise ValueError(
                f"body {name!r} is not in this plan; plan bodies: {list(self.body_names)}"
            ) from None

    def contact_index(self, name: str) -> int:
        """Index of contact body ``name`` along the plan's contact axis."""
        try:
            return self.contact_body_names.index(name)
        except ValueError:
            raise ValueError(
                f"contact body {name!r} is not in this plan; plan contact bodies: {list(self.contact_body_names)}"
            ) from None

    def sensor(self, name: str) -> torch.Tensor:
        """Sensor ``name`` as a live ``(num_envs, dim)`` view of the backend's sensor data."""
        try:
            return self._sensors[name]
        except KeyError:
            raise ValueError(
                f"sensor {name!r} is not in this plan; plan sensors: {list(self.sensor_names)}"
            ) from None

    def _refresh(self, rows: torch.Tensor | None = None) -> None:
        """Gather the plan's tensors from the backend's derived state (fixed-shape torch ops, no host sync). Every
        row, also after a reset of ``rows`` only: the gathers cost less than selecting rows would."""
        d = self._derived
        torch.index_select(d.xpos, 1, self._body_ids, out=self.body_pos_w)
        torch.index_select(d.xquat, 1, self._body_ids, out=self.body_quat_w)
        cvel = d.cvel.index_select(1, self._body_ids)
        angular, linear_at_com = cvel[..., :3], cvel[..., 3:]
        self.body_ang_vel_w.copy_(angular)
        # cvel's linear part is the velocity of the point at the root's subtree com; shift it to the body origin
        offset = self.body_pos_w - d.subtree_com.index_select(1, self._root_ids)
        torch.add(linear_at_com, torch.linalg.cross(angular, offset, dim=-1), out=self.body_lin_vel_w)
        if self.uses_contacts:
            force = d.cfrc_ext.index_select(1, self._contact_ids)[..., 3:]
            self.contact_force.copy_(force)
            torch.any(force != 0, dim=-1, out=self.contact_found)
