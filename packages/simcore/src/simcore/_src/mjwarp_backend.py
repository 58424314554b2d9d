"""The ``mjwarp`` backend: MuJoCo Warp with ``nworld = num_envs``, state exposed as zero-copy torch views.

Design:
- Every carrier (qpos, qvel, ctrl, act, time, warm start, mocap, derived state, per-world model fields) is a
  ``wp.to_torch`` view of a MuJoCo Warp array: no copies per step, and torch writes are seen by the next kernel.
- Per-world model fields are created batched once, at construction (``put_model(batch_sizes=...)``: leading
  dimension ``num_envs`` instead of 1), then only written in place, so captured graphs stay valid. When a mass
  or inertia field is per-world, the constants MuJoCo derives from it (subtree mass, inverse weights,
  actuator_acc0) are batched too and recomputed with ``set_const`` at construction and inside resets.
- Warp work runs on the caller's current torch CUDA stream, inside ``wp.ScopedDevice``, so it orders with the
  caller's torch ops and can join a ``torch.cuda.graph`` capture.
- Overflow: MuJoCo Warp's per-world overflow bitmask ``d.overflow`` is sticky; we switch its kernel printf off
  (``opt.warn_overflow = 0``) and report the counters in ``diagnostics()`` instead (with a RuntimeWarning).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

import mujoco
import mujoco_warp as mjw
import numpy as np
import torch
import warp as wp

from simcore._src.backend import SimBackend
from simcore._src.capability import Capability
from simcore._src.config import CONSTANT_SOURCE_FIELDS, DERIVED_CONSTANT_FIELDS, SimConfig
from simcore._src.diagnostics import iteration_stats
from simcore._src.mjwarp_rays import ray_cast_launch
from simcore._src.ray_cast import RayCast, RayCaster
from simcore._src.read_plan import DerivedState
from simcore._src.warp_compile import BackgroundCompiles, compile_ahead

_CONSTANT_GROUPS = mjw.SetConstGroup.FIXED | mjw.SetConstGroup.INERT0

_CONTACT_OVERFLOWS = ("BROADPHASE", "NARROWPHASE", "CCD", "HFIELD", "EPA_HORIZON", "CONTACT_MATCH", "TACTILE")
_CONSTRAINT_OVERFLOWS = ("NEFC", "NJMAX_NNZ", "NVMAX")
_SOLVER_LIMITS = ("ITERATIONS", "LS_ITERATIONS")


COMPILE_WORKERS_ENV = "SIMCORE_COMPILE_WORKERS"
"""Workers that compile, when a backend is built, every Warp module its step, reset refresh and forward launch
(found by a dry run, ``simcore._src.warp_compile``; threads, or forked processes first with
``$SIMCORE_COMPILE_PROCESSES``); 0: none, each module then compiles at its first launch,
one after another. Unset: ``DEFAULT_COMPILE_WORKERS`` on a CUDA device, 0 on Warp's CPU device. A machine
setting, not a run's: it changes when kernels compile, never what they compute. On an H100 a G1 walk's 59
modules took 75.1 s one by one, 31.0 s sixteen at a time."""

DEFAULT_COMPILE_WORKERS = 16
"""Compile workers on a CUDA device when ``$SIMCORE_COMPILE_WORKERS`` is unset (fewer on a machine with fewer
cores)."""

COMPILE_PROCESSES_ENV = "SIMCORE_COMPILE_PROCESSES"
"""``1``: the compile workers are forked processes that build the modules into Warp's kernel cache before threads
load them (Linux; ``simcore._src.warp_compile``); ``0``: threads only. Unset: processes for a backend that
compiles in the background (``SimConfig.compile_in_background``: its thread then leaves the code generation,
which holds Python's lock, to the children), threads otherwise (on a fresh H100 processes and threads built a
G1 step's modules in about the same time)."""

_log = logging.getLogger("simcore.mjwarp")


def compile_processes(default: bool = False) -> bool:
    """``$SIMCORE_COMPILE_PROCESSES`` as a switch (unset: ``default``); anything but 0 or 1 is refused, naming
    it."""
    text = os.environ.get(COMPILE_PROCESSES_ENV, "").strip()
    if text not in ("", "0", "1"):
        raise ValueError(
            f"${COMPILE_PROCESSES_ENV}={text!r}: set it to 1 (forked compile processes) or 0, or unset it"
        )
    return default if not text else text == "1"


def compile_workers(cuda: bool = True) -> int:
    """``$SIMCORE_COMPILE_WORKERS`` as a worker count; unset, ``DEFAULT_COMPILE_WORKERS`` (at most the machine's
    cores) for a ``cuda`` device and 0 otherwise. Anything else than an integer >= 0 is refused, naming the
    variable."""
    text = os.environ.get(COMPILE_WORKERS_ENV, "").strip()
    if not text:
        return min(DEFAULT_COMPILE_WORKERS, os.cpu_count() or 1) if cuda else 0
    try:
        workers = int(text)
    except ValueError:
        workers = -1
    if workers < 0:
        raise ValueError(
            f"${COMPILE_WORKERS_ENV}={text!r} is not a worker count; set a whole number >= 0 (e.g. 16), or unset it"
        )
    return workers


def resolve_device(device: str | None) -> torch.device:
    """The torch device for mjwarp: the given one, else CUDA (current index) when available, else CPU."""
    if device is None:
        device = "cuda" if torch.cuda.is_available() else "cpu"
    resolved = torch.device(device)
    if resolved.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device {device!r} requested but torch sees no CUDA device")
        if resolved.index is None:
            resolved = torch.device("cuda", torch.cuda.current_device())
    elif resolved.type != "cpu":
        raise ValueError(f"mjwarp runs on 'cpu' or 'cuda[:i]', got device {device!r}")
    return resolved


def _torch_view(array: wp.array | None, shape: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """Zero-copy torch view of a Warp array; an empty placeholder for zero-size arrays."""
    if array is None or array.size == 0:
        return torch.zeros(shape, dtype=torch.float32, device=device)
    view = wp.to_torch(array, requires_grad=False)
    if tuple(view.shape) != shape:
        raise RuntimeError(f"unexpected MuJoCo Warp array shape {tuple(view.shape)}, expected {shape}")
    return view


class MjwarpBackend(SimBackend):
    """MuJoCo Warp on CUDA (or Warp's CPU device); float32 carriers that alias the simulator's arrays."""

    name: ClassVar[str] = "mjwarp"
    capabilities: ClassVar[frozenset[Capability]] = frozenset(
        {
            Capability.DEVICE_RESIDENT,
            Capability.BATCHED_STEP,
            Capability.READ_PLAN,
            Capability.CONTACT_FORCES,
            Capability.PER_WORLD_MODEL_FIELDS,
            Capability.RESET_TRANSACTION,
            Capability.GRAPH_CAPTURE,
            Capability.EXTERNAL_GRAPH_CAPTURE,
            Capability.MULTI_STEP_GRAPH,
            Capability.STATE_TENSORS,
            Capability.HEIGHTFIELD,
            Capability.COLLISION_MESH,
            Capability.RAY_CAST,
        }
    )

    def __init__(self, model: mujoco.MjModel, config: SimConfig, require=()) -> None:
        super().__init__(model, config, require)
        self.device = resolve_device(config.device)
        self._wp_device = wp.get_device("cpu" if self.device.type == "cpu" else f"cuda:{self.device.index}")
        self._model = self._host_model_copy(model, config)
        model = self._model
        self.physics_dt = float(model.opt.timestep)
        self._warp_streams: dict[int, wp.Stream] = {}
        n = self.num_envs
        fields = tuple(config.randomized_fields)
        self._has_constant_sources = any(f in CONSTANT_SOURCE_FIELDS for f in fields)
        batch_sizes = {f: n for f in fields}
        if self._has_constant_sources:
            batch_sizes.update({f: n for f in DERIVED_CONSTANT_FIELDS})

        data = mujoco.MjData(self._model)
        mujoco.mj_forward(self._model, data)
        with wp.ScopedDevice(self._wp_device):
            self._m = mjw.put_model(self._model, batch_sizes=batch_sizes)
            self._m.opt.warn_overflow = 0
            if not config.graph_conditional or (
                self._wp_device.is_cuda and not wp.is_conditional_graph_supported()
            ):
                # unrolled: graphs run every solver iteration (drivers before CUDA 12.4 lack conditional nodes)
                self._m.opt.graph_conditional = False
            try:
                self._d = mjw.put_data(self._model, data, nworld=n, nconmax=self.nconmax, njmax=self.njmax)
            except ValueError as err:
                if "overflow" not in str(err):
                    raise
                raise ValueError(
                    f"MuJoCo Warp cannot hold this model's initial state in its buffers ({err}); raise "
                    f"SimConfig.njmax (now {self.njmax}) or SimConfig.nconmax (now {self.nconmax}), or leave "
                    "them None for the model-derived sizes"
                ) from None
            # How many rows the latest reset selected (1,) int32: the condition of the post-reset refresh.
            self._reset_row_count = wp.zeros(1, dtype=wp.int32)
            wp.synchronize_device(self._wp_device)
        self._reset_row_count_view = wp.to_torch(self._reset_row_count, requires_grad=False)
        # A conditional node's body cannot allocate; these sensors make MuJoCo Warp allocate scratch arrays, so
        # with them only the kinematics of the post-reset refresh are conditional and the sensors always run.
        contact_sensors = sum(
            getattr(self._m, f"sensor_contact_{stage}_adr").shape[0] for stage in ("pos", "vel", "acc")
        )
        self._sensor_refresh_allocation_free = not (
            self._m.nrangefinder
            or self._m.nsensorcollision
            or self._m.nsensortaxel
            or contact_sensors
            or model.opt.enableflags & mujoco.mjtEnableBit.mjENBL_ENERGY
        )

        m, d, dev = self._model, self._d, self.device
        self.time = _torch_view(d.time, (n,), dev)
        self.qpos = _torch_view(d.qpos, (n, m.nq), dev)
        self.qvel = _torch_view(d.qvel, (n, m.nv), dev)
        self.act = _torch_view(d.act, (n, m.na), dev)
        self.ctrl = _torch_view(d.ctrl, (n, m.nu), dev)
        self.qacc_warmstart = _torch_view(d.qacc_warmstart, (n, m.nv), dev)
        self.mocap_pos = _torch_view(d.mocap_pos, (n, m.nmocap, 3), dev)
        self.mocap_quat = _torch_view(d.mocap_quat, (n, m.nmocap, 4), dev)
        self._derived = DerivedState(
            xpos=_torch_view(d.xpos, (n, m.nbody, 3), dev),
            xquat=_torch_view(d.xquat, (n, m.nbody, 4), dev),
            cvel=_torch_view(d.cvel, (n, m.nbody, 6), dev),
            subtree_com=_torch_view(d.subtree_com, (n, m.nbody, 3), dev),
            sensordata=_torch_view(d.sensordata, (n, m.nsensordata), dev),
            cfrc_ext=_torch_view(d.cfrc_ext, (n, m.nbody, 6), dev),
        )
        self.model_fields = {
            f: _torch_view(getattr(self._m, f), (n, *getattr(m, f).shape), dev) for f in fields
        }
        self._acc_sensor_columns = self._acc_columns(m, dev)
        sensors_on = not (m.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_SENSOR)
        self._step_computes_cfrc_ext = bool(
            self._m.opt.run_rne_postconstraint or (sensors_on and self._m.sensor_rne_postconstraint)
        )
        # Sensors on the last substep only (SimConfig.sensors_every_substep): the earlier substeps step a
        # copy of the model with sensors disabled, rebuilt whenever an option changes.
        self._skip_early_sensors = bool(sensors_on and m.nsensor and not config.sensors_every_substep)
        self._m_without_sensors: mjw.Model | None = None
        self._compile_workers = compile_workers(self._wp_device.is_cuda)
        self._compile_processes = compile_processes(default=config.compile_in_background)
        # Batches compiling in the background (SimConfig.compile_in_background), joined by wait_compiled, which
        # then runs the first forward when construction deferred it, and casts the rays added meanwhile.
        self._background = BackgroundCompiles()
        self._dry_running = False  # a dry run's launches must not wait for the batches
        # Before the first launch below, so every module of this backend compiles here, in parallel.
        self.compile_ahead = self._compile_ahead(self._every_launch, "a step, a reset and a forward")
        self._first_forward_deferred = bool(self._background)
        if not self._first_forward_deferred:
            self._first_forward()

    def _first_forward(self) -> None:
        if self._has_constant_sources:
            # recompute once here, so later recomputations reproduce unselected rows bit for bit
            with self._warp_scope():
                mjw.set_const(self._m, self._d, groups=_CONSTANT_GROUPS, restore=False)
        self.forward()

    def _compile_ahead(self, work: Callable[[], None], what: str) -> dict[str, Any] | None:
        """Compile the Warp modules ``work`` launches, ``self._compile_workers`` at a time (None when that is 0).
        Best effort: a dry run that fails is logged and recorded, and each module compiles at its first launch."""
        workers = self._compile_workers
        if not workers:
            return None
        self._dry_running = True
        try:
            if self.config.compile_in_background:
                return self._background.start(what, work, workers, self._compile_processes)
            modules, built, seconds = compile_ahead(work, workers, self._compile_processes)
        except Exception as err:
            _log.warning("compiling %s ahead failed, each kernel compiles at its first launch: %s", what, err)
            return {"workers": workers, "error": f"{type(err).__name__}: {err}"}
        finally:
            self._dry_running = False
        _log.info(
            "compiled %d Warp modules of %s on %s in %.1f s (%d built in compile processes)",
            modules, what, self._wp_device, seconds, built,
        )  # fmt: skip
        return {
            "workers": workers,
            "modules": modules,
            "built_in_processes": built,
            "seconds": round(seconds, 3),
        }

    @property
    def compile_pending(self) -> bool:
        return bool(self._background)

    def wait_compiled(self) -> float:
        if not self._background:
            return 0.0
        if self._wp_device.is_cuda and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(
                "the mjwarp backend's Warp kernels are still compiling in the background "
                "(SimConfig.compile_in_background) and a graph capture began; call backend.wait_compiled() "
                "or run one eager step before capturing"
            )
        waited = self._background.wait(self.compile_ahead, self._wp_device)
        if self._first_forward_deferred:
            self._first_forward_deferred = False
            self._first_forward()  # refreshes the plans too
        else:
            self._refresh_plans()  # a ray cast added while its batch compiled is cast now
        return waited

    def _every_launch(self) -> None:
        """Every Warp launch this backend's step, reset refresh and forward can make (``_compile_ahead``'s dry
        run: nothing is launched)."""
        self._advance()
        with self._warp_scope():
            if not self._step_computes_cfrc_ext:
                mjw.rne_postconstraint(self._m, self._d)  # a contact read plan adds it to the step
            if self._has_constant_sources:
                mjw.set_const(self._m, self._d, groups=_CONSTANT_GROUPS, restore=False)

    @property
    def mj_model(self) -> mujoco.MjModel:
        """The host MjModel the device model was built from (options kept in sync by ``set_option``)."""
        return self._model

    @property
    def uses_conditional_nodes(self) -> bool:
        """Whether a CUDA graph of this backend's step contains conditional (while) nodes for the solver."""
        return bool(
            self._wp_device.is_cuda
            and self._m.opt.graph_conditional
            and self._m.opt.iterations > 0
            and wp.is_conditional_graph_supported()
        )

    # ----------------------------------------------------------------------------------------- streams
    def _warp_stream(self, torch_stream: torch.cuda.Stream) -> wp.Stream:
        """The Warp stream wrapping ``torch_stream`` (cached per stream handle, so capture sees one object)."""
        key = torch_stream.cuda_stream
        stream = self._warp_streams.get(key)
        if stream is None:
            stream = wp.stream_from_torch(torch_stream)
            self._warp_streams[key] = stream
        return stream

    @contextlib.contextmanager
    def _warp_scope(self) -> Iterator[None]:
        """Run Warp work on this backend's device and on the caller's current torch stream (once the kernels
        compiling in the background are in)."""
        if self._background and not self._dry_running:
            self.wait_compiled()
        with wp.ScopedDevice(self._wp_device):
            if self._wp_device.is_cuda:
                stream = self._warp_stream(torch.cuda.current_stream(self.device))
                with wp.ScopedStream(stream, sync_enter=False):
                    yield
            else:
                yield

    def _capture_scope(self, stream: torch.cuda.Stream) -> contextlib.AbstractContextManager:
        self.wait_compiled()  # refuses inside a capture while kernels are pending
        return self._external_warp_capture(stream)

    @contextlib.contextmanager
    def _external_warp_capture(self, stream: torch.cuda.Stream) -> Iterator[None]:
        """Tell Warp that torch is capturing ``stream``, so Warp allocations and loops become graph nodes."""
        warp_stream = self._warp_stream(stream)
        wp.capture_begin(device=self._wp_device, stream=warp_stream, external=True, force_module_load=False)
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):  # keep the original error, not the aborted capture's
                wp.capture_end(device=self._wp_device, stream=warp_stream)
            raise
        wp.capture_end(device=self._wp_device, stream=warp_stream)

    def _graph_blocker(self) -> str | None:
        if self._wp_device.is_cuda and not wp.is_mempool_enabled(self._wp_device):
            return "warp mempool disabled"
        return None

    # ----------------------------------------------------------------------------------------- physics
    def _advance(self) -> None:
        with self._warp_scope():
            early = self._early_substep_model()
            for _ in range(self.decimation - 1):
                mjw.step(early, self._d)
            mjw.step(self._m, self._d)
            if self._uses_contacts and not self._step_computes_cfrc_ext:
                mjw.rne_postconstraint(self._m, self._d)
            self._derived_kernels()

    def _early_substep_model(self) -> mjw.Model:
        """The model the substeps before a step's last one run with: without sensors unless every substep
        computes them. Only the last substep's sensor values are ever read, and no dynamics reads sensors,
        so the state after the step is the same bit for bit."""
        if not self._skip_early_sensors:
            return self._m
        if self._m_without_sensors is None:
            quiet = dataclasses.replace(
                self._m.opt, disableflags=self._m.opt.disableflags | int(mjw.DisableBit.SENSOR)
            )
            self._m_without_sensors = dataclasses.replace(self._m, opt=quiet)
        return self._m_without_sensors

    def _refresh_derived(self) -> None:
        with self._warp_scope():
            self._derived_kernels()

    def _derived_kernels(self) -> None:
        self._kinematics_kernels()
        self._sensor_kernels()

    def _kinematics_kernels(self) -> None:
        mjw.kinematics(self._m, self._d)
        mjw.com_pos(self._m, self._d)
        mjw.com_vel(self._m, self._d)

    def _sensor_kernels(self) -> None:
        mjw.sensor_pos(self._m, self._d)
        mjw.sensor_vel(self._m, self._d)

    def _refresh_after_reset(self, mask: torch.Tensor, constants_recomputed: bool) -> None:
        # Unselected rows keep every bit, so a reset that selects no row needs no refresh. The decision stays
        # on the device: inside a graph capture it is a conditional node on the selected-row count; on Warp's
        # CPU device the count is read in place. Eager CUDA work always refreshes (reading the count would
        # synchronize with the host, which costs more than the kernels it saves), and so does a reset that
        # recomputed constants (set_const runs kinematics at qpos0 in every world, overwriting derived state).
        # Sensors that allocate run outside the branch: from unchanged kinematics they reproduce their values.
        with self._warp_scope():
            if not constants_recomputed and self._reset_refresh_is_conditional():
                torch.sum(mask, dim=0, keepdim=True, dtype=torch.int32, out=self._reset_row_count_view)
                if self._sensor_refresh_allocation_free:
                    wp.capture_if(self._reset_row_count, on_true=self._derived_kernels)
                else:
                    wp.capture_if(self._reset_row_count, on_true=self._kinematics_kernels)
                    self._sensor_kernels()
            else:
                self._derived_kernels()
        self._refresh_plans(mask)  # ray casts recast the reset rows only

    def _reset_refresh_is_conditional(self) -> bool:
        """Whether the post-reset refresh can branch on the device-side selected-row count without a sync."""
        if not self._wp_device.is_cuda:
            return True
        capturing = self._wp_device.captures.get(self._wp_device.stream) is not None
        return capturing and wp.is_conditional_graph_supported()

    def _recompute_constants(self, mask: torch.Tensor) -> None:
        # set_const runs over all worlds; unselected worlds recompute identical constants from identical fields
        with self._warp_scope():
            mjw.set_const(self._m, self._d, groups=_CONSTANT_GROUPS, restore=False)

    def _ray_caster(self, cast: RayCast) -> tuple[RayCaster, torch.Tensor]:
        """One launch over every world and ray (``mjwarp_rays``), reading ``cast``'s origin and direction tensors
        in place and writing a preallocated array: fixed launches, no host sync, so it joins a captured step.
        After a reset its threads in rows the mask leaves out return at once."""
        with wp.ScopedDevice(self._wp_device):
            dist = wp.full((self.num_envs, cast.num_rays), -1.0, dtype=float)
            launch = ray_cast_launch(self.mj_model, self._m, self._d, cast, dist)

        def cast_rays(rows: torch.Tensor | None) -> None:
            with self._warp_scope():
                launch(rows)

        self._compile_ahead(lambda: cast_rays(None), "the ray cast")
        return cast_rays, wp.to_torch(dist, requires_grad=False)

    # ----------------------------------------------------------------------------------------- cold path
    def _buffer_diagnostics(self) -> dict[str, Any]:
        # reads launch no kernel: kernels compiling in the background are not waited for
        with wp.ScopedDevice(self._wp_device):
            wp.synchronize_device(self._wp_device)
            flags = self._d.overflow.numpy()
            nacon = int(self._d.nacon.numpy()[0])
            nefc = self._d.nefc.numpy()
            niter = self._d.solver_niter.numpy()

        def worlds(*names: str) -> int:
            mask = 0
            for name in names:
                mask |= int(mjw.OverflowType[name])
            return int(np.count_nonzero(flags & mask))

        overflow = {
            "contacts": worlds(*_CONTACT_OVERFLOWS),
            "constraints": worlds(*_CONSTRAINT_OVERFLOWS),
        }
        overflow.update(
            {name.lower(): worlds(name) for name in (*_CONTACT_OVERFLOWS, *_CONSTRAINT_OVERFLOWS)}
        )
        return {
            "overflow": overflow,
            "solver_limits": {name.lower(): worlds(name) for name in _SOLVER_LIMITS},
            "contacts": nacon,
            "max_constraints": int(nefc.max()) if nefc.size else 0,
            "solver_iterations": iteration_stats(niter),
        }

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """The base set plus the per-world constants derived from randomized masses and inertias."""
        tensors = super().state_tensors()
        if self._has_constant_sources:
            n = self.num_envs
            for name in DERIVED_CONSTANT_FIELDS:
                shape = (n, *getattr(self._model, name).shape)
                tensors[f"model.{name}"] = _torch_view(getattr(self._m, name), shape, self.device)
        return tensors

    def _set_option(self, name: str, value: Any) -> None:
        self._m_without_sensors = None  # rebuilt from the changed options at the next step
        if not hasattr(self._m.opt, name):
            raise ValueError(f"option {name!r} has no MuJoCo Warp counterpart; it cannot change on mjwarp")
        current = getattr(self._model.opt, name)
        if isinstance(current, np.ndarray):
            current[...] = value
        else:
            setattr(self._model.opt, name, value)
        device_value = getattr(self._m.opt, name)
        if isinstance(device_value, wp.array):
            host = np.broadcast_to(
                np.asarray(value, dtype=np.float32), (device_value.shape[0], *np.shape(value))
            )
            with self._warp_scope():
                device_value.assign(np.ascontiguousarray(host))
        else:
            setattr(self._m.opt, name, type(device_value)(value))
