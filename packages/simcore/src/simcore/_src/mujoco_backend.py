"""The ``mujoco`` backend: CPU MuJoCo worlds behind torch carriers, NumPy only at the host boundary.

Design:
- Torch tensors on ``backend.device`` are the source of truth between calls (state, per-world model fields,
  derived state). Every ``step()``/``forward()``/``reset()`` crosses the host boundary once each way:
  ``_to_host`` copies them into N ``MjData`` (and per-world ``MjModel``), MuJoCo runs, ``_from_host`` copies
  the results back. That boundary is the only place NumPy appears (see the section marked below).
- Per-world model fields: when ``SimConfig.randomized_fields`` is non-empty each world owns a deep copy of
  the MjModel, and the ``(num_envs, ...)`` field tensors are written into those copies before every physics
  call (a few hundred numbers per world, negligible next to a physics step). Derived constants (``mj_setConst``)
  are recomputed inside reset transactions for the selected worlds only.
- Worlds are stepped one after another on the calling thread: simple and deterministic. Float64 throughout.
- ``state_tensors()``: the carriers are the whole state between calls. When the per-world fields include a
  source of MuJoCo's derived constants (masses, inertias, armature), those constants get carriers too, so
  copying the state tensors back resumes every world exactly, as on mjwarp.
"""

from __future__ import annotations

import copy
from typing import Any, ClassVar

import mujoco
import numpy as np
import torch

from simcore._src.backend import SimBackend
from simcore._src.capability import Capability
from simcore._src.config import CONSTANT_SOURCE_FIELDS, DERIVED_CONSTANT_FIELDS, SimConfig
from simcore._src.diagnostics import iteration_stats
from simcore._src.ray_cast import RayCast, RayCaster
from simcore._src.read_plan import DerivedState
from simcore._src.reset import STATE_CHANNELS

_DERIVED_FIELDS = DerivedState._fields  # xpos, xquat, cvel, subtree_com, sensordata, cfrc_ext


_UNSTABLE_WARNINGS = (
    mujoco.mjtWarning.mjWARN_BADQPOS,
    mujoco.mjtWarning.mjWARN_BADQVEL,
    mujoco.mjtWarning.mjWARN_BADQACC,
)


def _unstable_count(d: mujoco.MjData) -> int:
    """How often MuJoCo found a non-finite or huge state in this world (and reset it to qpos0)."""
    return sum(d.warning[int(kind)].number for kind in _UNSTABLE_WARNINGS)


def _clear_unstable(d: mujoco.MjData) -> None:
    """Zero the counts `_unstable_count` reads (MuJoCo's reset sets them again, so they only count up once)."""
    for kind in _UNSTABLE_WARNINGS:
        d.warning[int(kind)].number = 0


def _host_bridge_device(device: str | None) -> torch.device:
    """The torch device of the CPU backend's carriers: CPU, or a visible CUDA device (copied across each call)."""
    try:
        resolved = torch.device(device or "cpu")
    except RuntimeError as err:
        raise ValueError(
            f"device {device!r} is not a torch device ({err}); use 'cpu' or 'cuda[:i]'"
        ) from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} requested but torch sees no CUDA device; use 'cpu'")
    if resolved.type not in ("cpu", "cuda"):
        raise ValueError(
            f"the mujoco backend keeps its tensors on 'cpu' or 'cuda[:i]', got device {device!r}"
        )
    return resolved


class MujocoBackend(SimBackend):
    """CPU MuJoCo, one ``MjData`` per world; carriers are float64 torch tensors (CPU unless ``config.device``)."""

    name: ClassVar[str] = "mujoco"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {
            Capability.HOST_BRIDGE,
            Capability.BATCHED_STEP,
            Capability.READ_PLAN,
            Capability.CONTACT_FORCES,
            Capability.PER_WORLD_MODEL_FIELDS,
            Capability.RESET_TRANSACTION,
            Capability.STATE_TENSORS,
            Capability.HEIGHTFIELD,
            Capability.COLLISION_MESH,
            Capability.RAY_CAST,
        }
    )

    def __init__(self, model: mujoco.MjModel, config: SimConfig, require=()) -> None:
        super().__init__(model, config, require)
        self.device = _host_bridge_device(config.device)
        self._model = self._host_model_copy(model, config)
        model = self._model
        self.physics_dt = float(model.opt.timestep)
        n = self.num_envs
        self._field_names = tuple(config.randomized_fields)
        if self._field_names:
            self._world_models = [copy.deepcopy(model) for _ in range(n)]
        else:
            self._world_models = [self._model] * n
        self._world_data = [mujoco.MjData(m) for m in self._world_models]
        for m, d in zip(self._world_models, self._world_data):
            mujoco.mj_forward(m, d)
        self._contact_overflow = np.zeros(n, dtype=bool)
        self._constraint_overflow = np.zeros(n, dtype=bool)

        d0 = self._world_data[0]
        shapes: dict[str, tuple[int, ...]] = {"time": (n,)}
        for name in (*STATE_CHANNELS[1:], *_DERIVED_FIELDS):
            shapes[name] = (n, *getattr(d0, name).shape)
        # Derived constants of per-world masses and inertias are per-world state too (see the module docstring).
        sources = any(f in CONSTANT_SOURCE_FIELDS for f in self._field_names)
        self._constant_names = DERIVED_CONSTANT_FIELDS if sources else ()
        for name in (*self._field_names, *self._constant_names):
            shapes[name] = (n, *getattr(model, name).shape)
        self._device_tensors = {
            name: torch.zeros(shape, dtype=torch.float64, device=self.device)
            for name, shape in shapes.items()
        }
        if self.device.type == "cpu":
            self._host_tensors = self._device_tensors
        else:
            pin = torch.cuda.is_available()
            self._host_tensors = {
                name: torch.zeros(shape, dtype=torch.float64, pin_memory=pin)
                for name, shape in shapes.items()
            }
        self._host_arrays = {name: t.numpy() for name, t in self._host_tensors.items()}
        for name in self._field_names:
            self._host_arrays[name][:] = getattr(model, name)
        self._pull_constants(range(n))
        self._pull_state_and_derived()
        self._upload()

        t = self._device_tensors
        self.time, self.qpos, self.qvel, self.act, self.ctrl = (
            t["time"],
            t["qpos"],
            t["qvel"],
            t["act"],
            t["ctrl"],
        )
        self.qacc_warmstart, self.mocap_pos, self.mocap_quat = (
            t["qacc_warmstart"],
            t["mocap_pos"],
            t["mocap_quat"],
        )
        self.model_fields = {name: t[name] for name in self._field_names}
        self._derived = DerivedState(**{name: t[name] for name in _DERIVED_FIELDS})
        self._acc_sensor_columns = self._acc_columns(model, self.device)
        # Sensors on the last substep only (SimConfig.sensors_every_substep), as on mjwarp.
        sensors_on = not (model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_SENSOR)
        self._skip_early_sensors = bool(sensors_on and model.nsensor and not config.sensors_every_substep)
        self.forward()

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The base set plus the per-world derived constants, when masses or inertias are per world."""
        tensors = super().state_tensors()
        tensors |= {f"model.{name}": self._device_tensors[name] for name in self._constant_names}
        return tensors

    @property
    def mj_model(self) -> mujoco.MjModel:
        """The host MjModel (shared options; per-world fields live in ``model_fields``)."""
        return self._model

    # ----------------------------------------------------------------------------------------- physics
    def _advance(self) -> None:
        self._to_host()
        for i, (m, d) in enumerate(zip(self._world_models, self._world_data)):
            _clear_unstable(d)
            self._substeps(m, d)
            if self._uses_contacts:
                # contact wrenches of the last substep, before kinematics move on to the integrated state
                mujoco.mj_rnePostConstraint(m, d)
            self._refresh_world(m, d)
            if _unstable_count(d):
                self._report_blow_up(i, m, d)
        self._track_overflow()
        self._from_host()

    def _report_blow_up(self, world: int, m: mujoco.MjModel, d: mujoco.MjData) -> None:
        """MuJoCo silently reset this world to qpos0 after a non-finite or huge state. Report the blow-up as the
        non-finite state it was, every time (as MuJoCo Warp does), so callers reset and count it; time,
        controls, activations and mocap poses stay what the step had (MuJoCo's reset cleared them)."""
        a = self._host_arrays
        d.time = float(a["time"][world]) + self.decimation * float(m.opt.timestep)
        for name in ("ctrl", "act", "mocap_pos", "mocap_quat"):
            getattr(d, name)[...] = a[name][world]
        d.qpos[:] = np.nan
        d.qvel[:] = np.nan

    def _substeps(self, m: mujoco.MjModel, d: mujoco.MjData) -> None:
        """``decimation`` mj_steps of one world; sensors only in the last one unless every substep wants them."""
        if not self._skip_early_sensors:
            for _ in range(self.decimation):
                mujoco.mj_step(m, d)
            return
        flags = m.opt.disableflags
        m.opt.disableflags = flags | mujoco.mjtDisableBit.mjDSBL_SENSOR
        try:
            for _ in range(self.decimation - 1):
                mujoco.mj_step(m, d)
        finally:
            m.opt.disableflags = flags
        mujoco.mj_step(m, d)

    def _refresh_derived(self) -> None:
        self._to_host()
        for m, d in zip(self._world_models, self._world_data):
            self._refresh_world(m, d)
        self._from_host()

    def _refresh_after_reset(self, mask: torch.Tensor, constants_recomputed: bool) -> None:
        # The host bridge reads the mask anyway: a reset that selects no row changed nothing to refresh
        # (constants are recomputed in selected worlds only).
        if self._mask_to_host(mask).any():
            self._refresh_derived()
            self._refresh_plans(mask)  # ray casts recast the reset worlds only

    @staticmethod
    def _refresh_world(m: mujoco.MjModel, d: mujoco.MjData) -> None:
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_comVel(m, d)
        mujoco.mj_sensorPos(m, d)
        mujoco.mj_sensorVel(m, d)

    def _recompute_constants(self, mask: torch.Tensor) -> None:
        selected = self._mask_to_host(mask)
        self._to_host()
        worlds = np.flatnonzero(selected)
        for i in worlds:
            mujoco.mj_setConst(self._world_models[i], self._world_data[i])
        self._pull_constants(worlds)
        self._upload()

    def _track_overflow(self) -> None:
        for i, d in enumerate(self._world_data):
            self._contact_overflow[i] |= d.ncon > self.nconmax
            self._constraint_overflow[i] |= d.nefc > self.njmax

    # ----------------------------------------------------------------------------------------- cold path
    def _buffer_diagnostics(self) -> dict[str, Any]:
        def warned(kind: mujoco.mjtWarning) -> np.ndarray:
            return np.array([d.warning[int(kind)].number > 0 for d in self._world_data])

        contactfull = warned(mujoco.mjtWarning.mjWARN_CONTACTFULL)
        cnstrfull = warned(mujoco.mjtWarning.mjWARN_CNSTRFULL)
        at_limit = [
            d.solver_niter[0] >= m.opt.iterations for m, d in zip(self._world_models, self._world_data)
        ]
        return {
            "overflow": {
                "contacts": int(np.count_nonzero(self._contact_overflow | contactfull)),
                "constraints": int(np.count_nonzero(self._constraint_overflow | cnstrfull)),
                "arena_contacts": int(np.count_nonzero(contactfull)),
                "arena_constraints": int(np.count_nonzero(cnstrfull)),
            },
            "solver_limits": {"iterations": int(np.count_nonzero(at_limit))},
            "contacts": int(sum(d.ncon for d in self._world_data)),
            "max_constraints": int(max(d.nefc for d in self._world_data)),
            "solver_iterations": iteration_stats(d.solver_niter[0] for d in self._world_data),
        }

    def _set_option(self, name: str, value: Any) -> None:
        models = [self._model, *self._world_models] if self._field_names else [self._model]
        for m in models:
            current = getattr(m.opt, name)
            if isinstance(current, np.ndarray):
                current[...] = value
            else:
                setattr(m.opt, name, value)

    # ========================================================================================= host boundary
    # The only place NumPy touches simulation data: torch carriers <-> host mirrors <-> MjData / MjModel.
    def _ray_caster(self, cast: RayCast) -> tuple[RayCaster, torch.Tensor]:
        """``mujoco.mj_ray`` for each ray of each world (after a reset, of each reset world), on the world's MjData
        (its kinematics are those of the carriers after every step/forward/reset); origins and directions cross
        to the host here."""
        n, r = self.num_envs, cast.num_rays
        raw = torch.full((n, r), -1.0, dtype=torch.float64, device=self.device)
        raw_host = raw if self.device.type == "cpu" else torch.full((n, r), -1.0, dtype=torch.float64)
        raw_array = raw_host.numpy()
        geomgroup = cast.geomgroup if cast.pattern.geom_groups is not None else None
        geomid = np.zeros(1, dtype=np.int32)

        def cast_rays(rows: torch.Tensor | None) -> None:
            origins = cast.origin_w.detach().to("cpu").numpy()
            directions = cast.direction_w.detach().to("cpu").numpy()
            worlds = range(n) if rows is None else np.flatnonzero(self._mask_to_host(rows))
            for i in worlds:
                m, d = self._world_models[i], self._world_data[i]
                for j in range(r):
                    raw_array[i, j] = mujoco.mj_ray(
                        m, d, origins[i, j], directions[i, j], geomgroup, 1, -1, geomid
                    )
            if raw_host is not raw:
                raw.copy_(raw_host)

        return cast_rays, raw

    def _mask_to_host(self, mask: torch.Tensor) -> np.ndarray:
        """The reset mask as a host bool array (the host bridge synchronizes by nature)."""
        return mask.detach().to("cpu").numpy()

    def _download(self) -> None:
        """Device carriers -> host mirrors (a no-op on CPU, where they are the same tensors)."""
        if self._host_tensors is not self._device_tensors:
            for name, host in self._host_tensors.items():
                host.copy_(self._device_tensors[name])

    def _upload(self) -> None:
        """Host mirrors -> device carriers (a no-op on CPU)."""
        if self._host_tensors is not self._device_tensors:
            for name, host in self._host_tensors.items():
                self._device_tensors[name].copy_(host, non_blocking=False)

    def _to_host(self) -> None:
        """Write state, per-world model fields and step products into every world's MjData/MjModel."""
        self._download()
        a = self._host_arrays
        for i, (m, d) in enumerate(zip(self._world_models, self._world_data)):
            d.time = float(a["time"][i])
            for name in (*STATE_CHANNELS[1:], "sensordata", "cfrc_ext"):
                getattr(d, name)[...] = a[name][i]
            for name in (*self._field_names, *self._constant_names):
                getattr(m, name)[...] = a[name][i]

    def _from_host(self) -> None:
        """Read state and derived quantities of every world back into the torch carriers."""
        self._pull_state_and_derived()
        self._upload()

    def _pull_constants(self, worlds: Any) -> None:
        """Read the derived constants of ``worlds`` (indices) from their MjModels into the host mirrors."""
        for name in self._constant_names:
            for i in worlds:
                self._host_arrays[name][i] = getattr(self._world_models[i], name)

    def _pull_state_and_derived(self) -> None:
        a = self._host_arrays
        for i, d in enumerate(self._world_data):
            a["time"][i] = d.time
            for name in (*STATE_CHANNELS[1:], *_DERIVED_FIELDS):
                a[name][i] = getattr(d, name)
