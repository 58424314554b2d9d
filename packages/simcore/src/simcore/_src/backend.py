"""SimBackend: the contract every simulation backend honours (``simcore._src.factory`` builds one by name)."""

from __future__ import annotations

import abc
import contextlib
import copy
import math
import operator
import warnings
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import mujoco
import numpy as np
import torch

from simcore._src.capability import (
    Capability,
    declared_capabilities,
    require_capabilities,
    require_model_capabilities,
)
from simcore._src.config import SimConfig, resolve_buffer_sizes
from simcore._src.diagnostics import BackendDiagnostics
from simcore._src.ray_cast import RayCast, RayCaster, RayPattern
from simcore._src.read_plan import DerivedState, ReadPlan
from simcore._src.reset import (
    STATE_CHANNELS,
    ResetSpec,
    apply_masked,
    build_reset_spec,
    check_reset_arguments,
    clear_masked,
)

if TYPE_CHECKING:
    from simcore._src.graph import CapturedWork


class SimBackend(abc.ABC):
    """N parallel MuJoCo worlds behind fixed-shape torch carriers (shapes below; dtype is backend-specific).

    Attributes:
        name: backend name.
        capabilities: what the class itself declares (read through ``declared_capabilities``, never inherited).
        device: torch device of every carrier.
        num_envs: number of worlds N.
        decimation: physics substeps per ``step()``.
        physics_dt: physics timestep in seconds.
        mj_model: the host MjModel (cold path only).
        nconmax: contact buffer size per world.
        njmax: constraint rows per world.
        qpos: joint positions                                      (num_envs, nq)
        qvel: joint velocities                                     (num_envs, nv)
        ctrl: actuator controls                                    (num_envs, nu)
        act: actuator activations                                  (num_envs, na)
        time: simulation time                                      (num_envs,)
        qacc_warmstart: solver warm start                          (num_envs, nv)
        mocap_pos: mocap body positions                            (num_envs, nmocap, 3)
        mocap_quat: mocap body orientations, wxyz                  (num_envs, nmocap, 4)
        model_fields: writable per-world model fields, e.g. ``body_mass`` (num_envs, nbody).
    """

    name: ClassVar[str]
    capabilities: ClassVar[frozenset[Capability]]

    device: torch.device
    physics_dt: float
    qpos: torch.Tensor
    qvel: torch.Tensor
    ctrl: torch.Tensor
    act: torch.Tensor
    time: torch.Tensor
    qacc_warmstart: torch.Tensor
    mocap_pos: torch.Tensor
    mocap_quat: torch.Tensor
    model_fields: dict[str, torch.Tensor]
    compile_ahead: dict[str, Any] | None = None
    """What compiling the kernel modules ahead did (``BackendDiagnostics.compile_ahead``); None: not done."""
    _derived: DerivedState
    _acc_sensor_columns: torch.Tensor

    STATE_ATTRIBUTES: ClassVar[frozenset[str]] = frozenset(
        ("time", "qpos", "qvel", "act", "ctrl", "qacc_warmstart", "mocap_pos", "mocap_quat", "model_fields")
    )
    """The simulator's own tensors: written in place (``backend.ctrl[:] = value``), never rebound."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self.STATE_ATTRIBUTES and name in self.__dict__:
            raise AttributeError(
                f"backend.{name} is the simulator's own tensor and cannot be replaced (the physics would never "
                f"see the new one): write into it in place, e.g. backend.{name}[:] = value or "
                f"backend.{name}.copy_(value)"
            )
        super().__setattr__(name, value)

    def __init__(self, model: mujoco.MjModel, config: SimConfig, require: Iterable[Capability] = ()) -> None:
        require_capabilities(type(self), self.name, require)
        if not isinstance(config, SimConfig):
            raise ValueError(f"config must be a simcore.SimConfig, got {type(config).__name__}")
        if not isinstance(model, mujoco.MjModel):
            raise ValueError(f"model must be a mujoco.MjModel, got {type(model).__name__}")
        require_model_capabilities(type(self), self.name, model)
        self.config = config
        self.num_envs = config.num_envs
        self.decimation = config.decimation
        self.nconmax, self.njmax = resolve_buffer_sizes(model, config)
        self._structure_version = 0
        self._plans: list[ReadPlan | RayCast] = []
        self._uses_contacts = False
        self._graphs: dict[str, CapturedWork] = {}
        self._warned_overflow: dict[str, int] = {}

    # ----------------------------------------------------------------------------------------- properties
    @property
    def declared_capabilities(self) -> frozenset[Capability]:
        """Capabilities declared on this backend's own class."""
        return declared_capabilities(type(self))

    @property
    def control_dt(self) -> float:
        """Seconds per ``step()``: ``physics_dt * decimation``."""
        return self.physics_dt * self.decimation

    @property
    def compile_pending(self) -> bool:
        """Whether kernels are still compiling in the background (``SimConfig.compile_in_background``)."""
        return False

    def wait_compiled(self) -> float:
        """Wait for kernels compiling in the background, then run the work construction deferred; the seconds
        waited (0.0 when nothing was pending). The first work that needs the kernels calls it too."""
        return 0.0

    @property
    def structure_version(self) -> int:
        """Bumped whenever an array or option a captured graph depends on is replaced or changed."""
        return self._structure_version

    @property
    @abc.abstractmethod
    def mj_model(self) -> mujoco.MjModel:
        """The host MjModel (cold path only)."""

    # ----------------------------------------------------------------------------------------- hot path
    def step(self) -> None:
        """Advance ``decimation`` physics substeps with the current ctrl, then refresh derived state and plans."""
        self._advance()
        self._refresh_plans()

    def forward(self) -> None:
        """Refresh kinematics, com quantities, body velocities and pos/vel sensors of all rows, then plans."""
        self._refresh_derived()
        self._refresh_plans()

    def reset(self, mask: torch.Tensor, payload: dict[str, torch.Tensor], spec: ResetSpec) -> None:
        """Write ``payload`` into rows where ``mask`` (num_envs,) is true; other rows keep every bit.

        Afterwards derived constants (for mass/inertia channels) and derived state are recomputed over all
        rows, which reproduces identical values in unselected rows; when no row is selected the derived-state
        refresh is skipped (on device backends without reading the mask on the host: a conditional graph
        node). Step products (contact forces, acceleration sensors) read zero in reset rows until the next
        step. Fixed-shape and sync-free on device backends.
        """
        if spec.backend_id != id(self):
            raise ValueError("this ResetSpec was built by another backend; call reset_spec() on this one")
        check_reset_arguments(mask, payload, spec, self.num_envs, self.qpos.device)
        apply_masked(mask, payload, spec)
        clear_masked(mask, self._derived.cfrc_ext)
        clear_masked(mask, self._derived.sensordata, self._acc_sensor_columns)
        if spec.recompute_constants:
            self._recompute_constants(mask)
        self._refresh_after_reset(mask, constants_recomputed=spec.recompute_constants)

    def _refresh_after_reset(self, mask: torch.Tensor, constants_recomputed: bool) -> None:
        """Derived state and plans after a reset transaction; backends may skip the work when ``mask`` is empty
        and the constant recomputation left the derived state alone."""
        self.forward()

    def _refresh_plans(self, reset_rows: torch.Tensor | None = None) -> None:
        """Refresh every plan from the derived state; ``reset_rows``: after a reset of only those rows (a plan may
        refresh just them: the other rows' state has not changed)."""
        for plan in self._plans:
            plan._refresh(reset_rows)

    # ----------------------------------------------------------------------------------------- cold path
    def read_plan(
        self, bodies: Sequence[str] = (), sensors: Sequence[str] = (), contact_bodies: Sequence[str] = ()
    ) -> ReadPlan:
        """Negotiate a read plan by name (unknown names raise ValueError now); step/forward/reset refresh it.

        Adding a plan changes the work ``step()`` does, so it bumps ``structure_version``.
        """
        plan = ReadPlan(
            self.mj_model, self._derived, bodies=bodies, sensors=sensors, contact_bodies=contact_bodies
        )
        self._plans.append(plan)
        self._uses_contacts = self._uses_contacts or plan.uses_contacts
        self._structure_version += 1
        plan._refresh()
        return plan

    def ray_cast(self, body: str, pattern: RayPattern) -> RayCast:
        """Negotiate a ray pattern attached to ``body`` (needs ``Capability.RAY_CAST``); step/forward/reset cast
        it into the ``RayCast``'s fixed ``(num_envs, num_rays)`` tensors. Rays see ``pattern.geom_groups``
        (the terrain by default). Adding one changes the work ``step()`` does, so it bumps ``structure_version``.
        """
        if Capability.RAY_CAST not in self.declared_capabilities:
            raise NotImplementedError(
                f"backend {self.name!r} cannot cast rays; it lacks RAY_CAST "
                f"(declared: {sorted(c.name for c in self.declared_capabilities)}); use a backend that declares it"
            )
        cast = RayCast(self.mj_model, self._derived, body, pattern)
        cast._bind(*self._ray_caster(cast))
        self._plans.append(cast)
        self._structure_version += 1
        if not self.compile_pending:  # else the forward after the wait casts it
            cast._refresh()
        return cast

    def _ray_caster(self, cast: RayCast) -> tuple[RayCaster, torch.Tensor]:
        """The work that casts ``cast.origin_w``/``direction_w`` and the ``(num_envs, R)`` tensor of raw distances
        it writes (-1 for a miss); backends that declare RAY_CAST implement it."""
        raise NotImplementedError(f"backend {self.name!r} has no ray caster")

    def reset_spec(self, channels: Sequence[str]) -> ResetSpec:
        """Validate reset channels now: state channels and this backend's per-world model fields."""
        return build_reset_spec(self._reset_targets(), channels, backend_name=self.name, backend_id=id(self))

    def _reset_targets(self) -> dict[str, torch.Tensor]:
        targets = {name: getattr(self, name) for name in STATE_CHANNELS}
        targets.update(self.model_fields)
        return targets

    def set_option(self, name: str, value: Any) -> None:
        """Change one physics option (``mj_model.opt`` field) in every world; invalidates captured graphs."""
        valid = sorted(n for n in dir(self.mj_model.opt) if not n.startswith("_"))
        if name not in valid:
            raise ValueError(f"unknown option {name!r}; valid: {valid}")
        # Checked and converted before anything changes: a bad value leaves the host model and the simulator as
        # they were.
        self._set_option(name, _checked_option(name, getattr(self.mj_model.opt, name), value))
        if name == "timestep":
            self.physics_dt = float(self.mj_model.opt.timestep)
        self._structure_version += 1

    def diagnostics(self) -> BackendDiagnostics:
        """Cold path: sizes, overflow counters (read from the device) and graph state."""
        counters = self._buffer_diagnostics()
        diag = BackendDiagnostics(
            backend=self.name,
            device=str(self.device),
            num_envs=self.num_envs,
            decimation=self.decimation,
            physics_dt=self.physics_dt,
            nconmax=self.nconmax,
            njmax=self.njmax,
            structure_version=self._structure_version,
            overflow=counters["overflow"],
            solver_limits=counters["solver_limits"],
            contacts=counters["contacts"],
            max_constraints=counters["max_constraints"],
            solver_iterations=counters["solver_iterations"],
            compile_ahead=self.compile_ahead,
        )
        if self._graphs:
            diag.graphs = {name: work.diagnostics() for name, work in self._graphs.items()}
            works = list(self._graphs.values())
            # the latest capture (a refused or never-captured work says nothing about the graph in use)
            latest = ([w for w in works if w.captures] or works)[-1].diagnostics()
            diag.graph_enabled = latest["graph_enabled"]
            diag.graph_version = latest["version"]
            diag.steps_per_replay = latest["steps_per_replay"]
            diag.graph_captures = latest["captures"]
            diag.graph_replays = latest["replays"]
            diag.eager_fallback_reason = latest["eager_fallback_reason"]
            diag.conditional_nodes_used = latest["conditional_nodes_used"]
        self._warn_new_overflow(diag.overflow)
        return diag

    def _warn_new_overflow(self, overflow: dict[str, int]) -> None:
        grown = {k: v for k, v in overflow.items() if v > self._warned_overflow.get(k, 0)}
        if grown:
            warnings.warn(
                f"{self.name} backend buffer overflow in {grown} worlds (nconmax={self.nconmax}, "
                f"njmax={self.njmax}); raise SimConfig.nconmax/njmax",
                RuntimeWarning,
                stacklevel=3,
            )
            self._warned_overflow.update(grown)

    def graph_capture_scope(self, stream: torch.cuda.Stream) -> contextlib.AbstractContextManager:
        """Context to enter inside the caller's ``torch.cuda.graph(g, stream=stream)`` so backend work joins it.

        Example: ``with simcore.garbage_held_during_capture(), torch.cuda.graph(g, stream=s),
        backend.graph_capture_scope(s): backend.step()`` (the first keeps Python's garbage collector from
        freeing MuJoCo Warp arrays mid-capture, adr/0032). CapturedWork does all this for you; use it directly
        only when you own the torch graph.
        """
        if Capability.EXTERNAL_GRAPH_CAPTURE not in self.declared_capabilities:
            raise NotImplementedError(
                f"backend {self.name!r} cannot join a torch graph capture; it lacks EXTERNAL_GRAPH_CAPTURE"
            )
        return self._capture_scope(stream)

    def _capture_scope(self, stream: torch.cuda.Stream) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The live tensors that hold every world's state from one step to the next, by name.

        Copying them elsewhere and back (in place) resumes every world exactly where it was: time,
        qpos, qvel, act, ctrl, the solver's warm start, mocap poses, the derived kinematics read plans
        gather from, and the per-world model fields. Views, not copies: write into them in place.
        """
        if Capability.STATE_TENSORS not in self.declared_capabilities:
            raise NotImplementedError(
                f"backend {self.name!r} cannot list its state tensors; it lacks STATE_TENSORS "
                f"(declared: {sorted(c.name for c in self.declared_capabilities)})"
            )
        tensors = {
            name: getattr(self, name)
            for name in ("time", "qpos", "qvel", "act", "ctrl", "qacc_warmstart", "mocap_pos", "mocap_quat")
        }
        tensors |= {f"derived.{name}": value for name, value in self._derived._asdict().items()}
        tensors |= {f"model.{name}": value for name, value in self.model_fields.items()}
        return tensors

    def _graph_blocker(self) -> str | None:
        """Why a CUDA graph cannot be captured right now (None when it can)."""
        return None

    def _attach_graph(self, work: CapturedWork) -> None:
        """Called by CapturedWork when built and after each capture: its state shows up in ``diagnostics()``, whose
        summary fields are the latest capture's."""
        self._graphs.pop(work.name, None)
        self._graphs[work.name] = work

    def __repr__(self) -> str:
        return f"<{type(self).__name__} num_envs={self.num_envs} device={self.device} decimation={self.decimation}>"

    # ----------------------------------------------------------------------------------------- backend hooks
    @abc.abstractmethod
    def _advance(self) -> None:
        """``decimation`` physics substeps, contact wrenches when a plan needs them, then derived refresh."""

    @abc.abstractmethod
    def _refresh_derived(self) -> None:
        """Kinematics, com position/velocity and pos/vel sensors of all rows from the current state."""

    @abc.abstractmethod
    def _recompute_constants(self, mask: torch.Tensor) -> None:
        """Recompute constants derived from per-world mass/inertia fields (at least for masked rows)."""

    @abc.abstractmethod
    def _buffer_diagnostics(self) -> dict[str, Any]:
        """Return ``overflow``, ``solver_limits``, ``contacts``, ``max_constraints`` and ``solver_iterations``
        (cold path)."""

    @abc.abstractmethod
    def _set_option(self, name: str, value: Any) -> None:
        """Apply one option change to the host model and the simulator."""

    # ----------------------------------------------------------------------------------------- shared helpers
    @staticmethod
    def _host_model_copy(model: mujoco.MjModel, config: SimConfig) -> mujoco.MjModel:
        """A private copy of ``model``, prepared for the per-world fields of ``config``.

        MuJoCo compiles bodies whose inertial frame coincides with the body frame as "same frame" / "simple"
        and then skips the inertial offset. A per-world ``body_ipos`` breaks that assumption, so the shortcut
        flags are cleared: the general path computes the same quantities (to rounding) for any offset.
        """
        model = copy.deepcopy(model)
        if "body_ipos" in config.randomized_fields:
            model.body_sameframe[:] = 0
            model.body_simple[:] = 0
            model.dof_simplenum[:] = 0
        return model

    @staticmethod
    def _acc_columns(model: mujoco.MjModel, device: torch.device) -> torch.Tensor:
        """Bool mask over sensordata columns written at the acceleration stage (shape (nsensordata,))."""
        columns = torch.zeros(model.nsensordata, dtype=torch.bool)
        for i in range(model.nsensor):
            if model.sensor_needstage[i] == mujoco.mjtStage.mjSTAGE_ACC:
                adr = int(model.sensor_adr[i])
                columns[adr : adr + int(model.sensor_dim[i])] = True
        return columns.to(device)


def _checked_option(name: str, current: Any, value: Any) -> Any:
    """``value`` as the option ``name`` (now ``current``) takes it: a finite float array of its shape (a scalar
    broadcasts), an integer, or a finite float (a positive one for ``timestep``); ValueError otherwise."""
    if isinstance(current, np.ndarray):
        try:
            array = np.broadcast_to(np.asarray(value, dtype=np.float64), current.shape).copy()
        except (TypeError, ValueError):
            raise ValueError(
                f"option {name!r} takes {current.shape[0]} numbers (now {current.tolist()}), got {value!r}"
            ) from None
        if not np.isfinite(array).all():
            raise ValueError(f"option {name!r} must be finite, got {value!r}")
        return array
    if isinstance(current, int):
        try:
            if isinstance(value, bool):
                raise TypeError
            return operator.index(value)  # ints, NumPy integers, MuJoCo's flag enums
        except TypeError:
            raise ValueError(f"option {name!r} takes an integer (now {current}), got {value!r}") from None
    if isinstance(current, float):
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            raise ValueError(f"option {name!r} takes a number (now {current}), got {value!r}")
        number = float(value)
        if not math.isfinite(number) or (name == "timestep" and number <= 0.0):
            kind = "a positive number" if name == "timestep" else "a finite number"
            raise ValueError(f"option {name!r} takes {kind}, got {value!r}")
        return number
    return value
