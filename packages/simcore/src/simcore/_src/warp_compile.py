"""Compiling the Warp modules a piece of Warp work needs, all at once and in parallel, before it first runs.

Warp compiles a module when a kernel of it is first launched, one module after another; MuJoCo Warp makes many
of its modules for a model's sizes as it runs (kernels built inside functions), so they cannot be named ahead.
``modules_launched_by`` finds them by a dry run: the work runs with every module load recorded and skipped (Warp
then returns from the launch without launching anything, so no device memory is read or written) and every
loop or branch on a device flag taken once. ``compile_modules`` then compiles or loads the recorded modules
``workers`` at a time; the work's real first run finds them loaded. Only when they compile changes, never what
they compute: the real run launches the same kernels it would have.

An occupancy query (``warp.get_suggested_block_size``, which MuJoCo Warp asks before some launches to size
them) needs its kernel's module compiled. The first dry run records that module with the rest and answers the
query with a placeholder; when it asked any, a second dry run, after the batch compiled, gets the real answers
(the modules are loaded by then) and compiles whatever launches those answers change. So no module compiles
alone, one after another, inside a dry run.

Warp generates a module's code under one lock (and Python's), so compile threads wait on each other for the
code generation and overlap only in the native compiler: on a G1 scene 16 threads built 62 modules in 29 s,
bounded by that serial part. Asked to (``processes``) where the platform can fork, ``compile_modules`` therefore
builds the modules in ``workers`` forked processes first: each child inherits the recorded modules, generates and compiles one at a
time into Warp's kernel cache (Warp's own build step, which loads nothing on a device: a child never touches
the parent's CUDA context) and exits; then the parent loads them all from the cache. Best effort: a module a
child could not build (or all of them, when the children fail or none finishes a module for
``STALL_TIMEOUT_S``) compiles in the parent's threads, as without processes.

The dry run patches ``warp.Module.load``, ``warp.capture_while``, ``warp.capture_if`` and
``warp.get_suggested_block_size`` for its own duration; the patches act on the calling thread only (another
thread's loads, such as a batch loading in the background, go through), and one dry run runs at a time.

``PendingCompile`` does the same in two halves: the dry run and the fork of the compile processes on the
calling thread, then the batch on a background thread (the caller goes on with other work, e.g. compiling its
own torch code), and ``PendingCompile.wait`` joins it and answers the occupancy queries as above. The forks
happen on the calling thread, before it goes on: a child forked while that thread held a lock could hang.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import warp as wp

_log = logging.getLogger("simcore.mjwarp")

ModuleLoad = tuple[Any, Any, int | None]
"""A module load a dry run recorded: the Warp module, the device, the block size it was asked for."""


def _load_key(module: Any, device: Any, block_dim: int | None) -> tuple[int, str, int | None]:
    """What makes two recorded loads the same compile: the module, the device, the block size."""
    return id(module), str(device), block_dim


_PLACEHOLDER_BLOCK = 256
"""The block size a first dry run answers an occupancy query with (its grid size: the device's SM count)."""


@contextlib.contextmanager
def _recording_loads(
    placeholder_answers: bool,
) -> Iterator[tuple[dict[tuple[int, str, int | None], ModuleLoad], list[str]]]:
    """Within the block, module loads are recorded (not done) and device-flag loops and branches run once.
    Occupancy queries on a CUDA device are recorded and answered with a placeholder (``placeholder_answers``)
    or passed through to Warp, which loads their modules; the list holds the kernels asked about."""
    module_class = wp.Module
    real_load = module_class.load
    real_while, real_if, real_block_size = wp.capture_while, wp.capture_if, wp.get_suggested_block_size
    recorded: dict[tuple[int, str, int | None], ModuleLoad] = {}
    asked: list[str] = []
    passthrough = False  # an occupancy query needs the module loaded for real
    owner = threading.get_ident()  # the patches act on this thread only

    def record(module: Any, device: Any, block_dim: int | None) -> None:
        resolved = wp.get_device(device)
        recorded.setdefault(_load_key(module, resolved, block_dim), (module, resolved, block_dim))

    def load(module: Any, device: Any, block_dim: int | None = None, *args: Any, **kwargs: Any) -> Any:
        if passthrough or threading.get_ident() != owner:
            return real_load(module, device, block_dim, *args, **kwargs)
        record(module, device, block_dim)
        return None  # wp.launch returns without launching when the module is not loaded

    def capture_while(condition: Any, while_body: Any, stream: Any = None, **kwargs: Any) -> None:
        if threading.get_ident() != owner:
            return real_while(condition, while_body, stream=stream, **kwargs)
        if callable(while_body):
            while_body(**kwargs)

    def capture_if(
        condition: Any, on_true: Any = None, on_false: Any = None, stream: Any = None, **kwargs: Any
    ) -> None:
        if threading.get_ident() != owner:
            return real_if(condition, on_true=on_true, on_false=on_false, stream=stream, **kwargs)
        for branch in (on_true, on_false):
            if callable(branch):
                branch(**kwargs)

    def block_size(kernel: Any, device: Any = None) -> tuple[int, int]:
        nonlocal passthrough
        resolved = wp.get_device(device)
        if threading.get_ident() != owner:
            return real_block_size(kernel, device)
        if placeholder_answers and resolved.is_cuda:
            record(kernel.module, resolved, None)  # the module Warp's query loads
            asked.append(kernel.key)
            return _PLACEHOLDER_BLOCK, max(1, int(getattr(resolved, "sm_count", 1) or 1))
        passthrough = True
        try:
            return real_block_size(kernel, device)
        finally:
            passthrough = False

    module_class.load = load
    wp.capture_while, wp.capture_if, wp.get_suggested_block_size = capture_while, capture_if, block_size
    try:
        yield recorded, asked
    finally:
        module_class.load = real_load
        wp.capture_while, wp.capture_if, wp.get_suggested_block_size = real_while, real_if, real_block_size


_RECORDING = threading.Lock()
"""One dry run at a time: each saves and restores the patched functions."""


def modules_launched_by(
    work: Callable[[], None], placeholder_answers: bool = False
) -> tuple[list[ModuleLoad], list[str]]:
    """The module loads ``work`` asks for, found by a dry run of it (see the module docstring), and the kernels
    whose occupancy it asked for with placeholder answers. Whatever ``work`` raises in the dry run propagates;
    the recording is undone either way."""
    with _RECORDING, _recording_loads(placeholder_answers) as (recorded, asked):
        work()
    return list(recorded.values()), asked


STALL_TIMEOUT_S = 120.0
"""When no forked compile process has finished a module for this long, the parent stops them all and compiles
what is missing itself (a G1 step's largest module takes about 10 s to build alone on an H100's host)."""

_FORKED_BUILDS: list[tuple[Any, ...]] = []
"""What forked compile processes build: each module with the arguments its first load would compile it with (set
just before they fork; they inherit it)."""


def _build_arguments(module: Any, device: Any, block_dim: int | None) -> tuple[Any, ...]:
    """The module and the arguments ``warp.Module.load`` compiles it with: device, cache folder, binary name,
    architecture, options. Computed in the parent, before any child forks, so the children write the very
    files the parent's loads then look for (the names hash the module's code and the compile target, and some
    of what they read is initialized lazily, per process)."""
    variant = block_dim if block_dim is not None else module.options["block_dim"]
    module.get_module_hash(variant)  # resolves the variant's options, as a load does first
    return (
        module,
        device,
        os.path.join(wp.config.kernel_cache_dir, module.get_module_identifier(variant)),
        module._get_compile_output_name(device, block_dim=variant),
        module._get_compile_arch(device),
        module.resolved_options[variant],
    )


def _build_in_child(index: int) -> str | None:
    """In a forked child: generate and compile ``_FORKED_BUILDS[index]`` into Warp's kernel cache, as its first
    load would, without loading it on the device. None when built or already cached, else the error."""
    module, device, folder, name, arch, options = _FORKED_BUILDS[index]
    try:
        module._compile(device, folder, name, arch, options=options)
    except Exception as err:  # the parent compiles this one itself
        return f"{module.name}: {type(err).__name__}: {err}"
    return None


def can_fork() -> bool:
    """Whether compile processes can be forked here (Linux: a forked child shares the recorded modules)."""
    return sys.platform.startswith("linux") and "fork" in multiprocessing.get_all_start_methods()


class _ForkedBuilds:
    """Forked children building modules into Warp's kernel cache, forked when built; ``finish`` collects them."""

    def __init__(self, loads: list[ModuleLoad], processes: int) -> None:
        global _FORKED_BUILDS
        self.count = len(loads)
        order = sorted(range(len(loads)), key=lambda i: -len(getattr(loads[i][0], "kernels", ())))
        self._pool: Any = None
        self._results: Any = None
        self.error: str | None = None
        try:
            _FORKED_BUILDS = [_build_arguments(*load) for load in loads]
            with warnings.catch_warnings():
                # Python warns that forking a process with threads may deadlock a child that takes a lock
                # another thread held; the children take none of the parent's threads' locks: they generate
                # code and run the native compiler, then exit.
                warnings.simplefilter("ignore", DeprecationWarning)
                self._pool = multiprocessing.get_context("fork").Pool(min(processes, len(loads)))
            self._results = self._pool.imap_unordered(_build_in_child, order)
        except Exception as err:
            self.error = f"{type(err).__name__}: {err}"
            self._close()
        finally:
            _FORKED_BUILDS = []  # the children hold their copy

    def finish(self) -> int:
        """Wait for the children; how many modules they built (or found cached), 0 when they died or stalled
        (what they built by then stays in the cache). Raises nothing."""
        if self.error is None:
            try:
                errors = [self._results.next(STALL_TIMEOUT_S) for _ in range(self.count)]
            except Exception as err:
                self.error = f"{type(err).__name__}: {err}"
            finally:
                self._close()
        if self.error is not None:  # a child that died or hung: the parent's threads compile what is missing
            _log.warning("compile processes failed, compiling in threads instead: %s", self.error)
            return 0
        failed = [error for error in errors if error is not None]
        if failed:
            _log.warning(
                "%d modules did not build in compile processes (compiled in threads): %s",
                len(failed),
                failed[0],
            )
        return len(errors) - len(failed)

    def _close(self) -> None:
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None


def build_in_processes(loads: list[ModuleLoad], processes: int) -> int:
    """Build ``loads`` into Warp's kernel cache in ``processes`` forked children, the modules with the most
    kernels first; returns how many they built (or found cached), 0 when the children died or stalled (what
    they built by then stays in the cache). Nothing is loaded here; raises nothing."""
    return _ForkedBuilds(loads, processes).finish()


def _load_all(loads: list[ModuleLoad], workers: int) -> None:
    """Compile (or load from Warp's kernel cache) each module, ``workers`` at a time, as ``warp.force_load`` does."""
    if workers <= 1 or len(loads) <= 1:
        for module, device, block_dim in loads:
            module.load(device, block_dim)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for future in [pool.submit(module.load, device, block_dim) for module, device, block_dim in loads]:
            future.result()


def _forks_for(loads: list[ModuleLoad], workers: int, processes: bool) -> _ForkedBuilds | None:
    """Compile processes for a batch, forked now, when asked for and worth it."""
    if processes and workers > 1 and len(loads) > 1 and can_fork():
        return _ForkedBuilds(loads, workers)
    return None


def compile_modules(loads: list[ModuleLoad], workers: int, processes: bool = False) -> int:
    """Compile (or load from Warp's kernel cache) each recorded module ``workers`` at a time, each with its own
    block size, as ``warp.force_load`` does: in threads, after forked processes built them into the cache when
    ``processes`` (see the module docstring). Returns how many the processes built."""
    forks = _forks_for(loads, workers, processes)
    built = forks.finish() if forks is not None else 0
    _load_all(loads, workers)
    return built


class PendingCompile:
    """``compile_ahead`` with its batch on a background thread: the dry run (and the fork of the compile
    processes) when built, on the caller's thread; ``wait`` finishes it. Nothing may launch the recorded
    modules' kernels before ``wait`` returns (their modules would compile twice, once on each thread).

    Attributes:
        modules: the modules the dry run found (the second dry run's, if any, are added by ``wait``).
    """

    def __init__(self, work: Callable[[], None], workers: int, processes: bool) -> None:
        self._start = time.perf_counter()
        self._work, self._workers = work, workers
        self._loads, self._asked = modules_launched_by(work, placeholder_answers=True)
        self.modules = len(self._loads)
        self._forks = _forks_for(self._loads, workers, processes)  # forked here, on the caller's thread
        self._built = 0
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._batch, name="simcore-warp-compile", daemon=True)
        self._thread.start()

    def _batch(self) -> None:
        try:
            self._built = self._forks.finish() if self._forks is not None else 0
            _load_all(self._loads, self._workers)
        except BaseException as err:  # re-raised by wait, on the caller's thread
            self._error = err

    def wait(self) -> tuple[int, int, float]:
        """Join the batch, then compile what the occupancy queries' real answers change (on this thread, like
        ``compile_ahead``): (modules, modules the processes built, seconds since the start). Re-raises what
        the batch raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        if self._asked:  # threads only: other threads of this process may hold locks now
            self._built += _compile_what_answers_add(self._work, self._loads, self._workers, False)
            self._asked = []
        self.modules = len(self._loads)
        return self.modules, self._built, time.perf_counter() - self._start


def compile_ahead(work: Callable[[], None], workers: int, processes: bool = False) -> tuple[int, int, float]:
    """Dry-run ``work``, then compile the modules it launches with ``workers`` threads (forked processes first
    when ``processes``): (modules, modules the processes built, seconds). When the dry run answered occupancy
    queries with placeholders, a second one with the real answers compiles what they change."""
    start = time.perf_counter()
    loads, asked = modules_launched_by(work, placeholder_answers=True)
    built = compile_modules(loads, workers, processes)
    if asked:
        built += _compile_what_answers_add(work, loads, workers, processes)
    return len(loads), built, time.perf_counter() - start


def _compile_what_answers_add(
    work: Callable[[], None], loads: list[ModuleLoad], workers: int, processes: bool
) -> int:
    """The second dry run, once ``loads`` are loaded and occupancy queries get real answers: compile the loads
    it adds (appended to ``loads``); returns how many compile processes built."""
    seen = {_load_key(*load) for load in loads}
    again, _ = modules_launched_by(work)
    more = [load for load in again if _load_key(*load) not in seen]
    loads += more
    return compile_modules(more, workers, processes)


class BackgroundCompiles:
    """The compile-aheads one backend runs in the background (``start``), joined together (``wait``)."""

    def __init__(self) -> None:
        self._batches: list[tuple[str, PendingCompile]] = []

    def __bool__(self) -> bool:
        return bool(self._batches)

    def start(self, what: str, work: Callable[[], None], workers: int, processes: bool) -> dict[str, Any]:
        """Start compiling what ``work`` launches (``what``, for the log); its record so far. Compile processes
        are forked for the first batch only: later ones would fork while this process's threads may hold
        locks."""
        batch = PendingCompile(work, workers, processes and not self._batches)
        self._batches.append((what, batch))
        return {"workers": workers, "background": True, "modules": batch.modules}

    def wait(self, record: dict[str, Any] | None, device: Any) -> float:
        """Join every batch (one that failed is logged: its modules compile at their first launch), completing
        ``record`` (the first batch's) with its figures and the seconds waited; returns those seconds."""
        start = time.perf_counter()
        batches, self._batches = self._batches, []
        for index, (what, batch) in enumerate(batches):
            first = index == 0 and record is not None
            try:
                modules, built, seconds = batch.wait()
            except Exception as err:
                _log.warning(
                    "compiling %s ahead failed, each kernel compiles at its first launch: %s", what, err
                )
                if first:
                    record["error"] = f"{type(err).__name__}: {err}"
                continue
            _log.info(
                "compiled %d Warp modules of %s on %s in %.1f s in the background (%d built in compile processes)",
                modules, what, device, seconds, built,
            )  # fmt: skip
            if first:
                record.update(modules=modules, built_in_processes=built, seconds=round(seconds, 3))
        waited = time.perf_counter() - start
        if record is not None:
            record["waited_sec"] = round(waited, 3)
        return waited
