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

The dry run patches ``warp.Module.load``, ``warp.capture_while``, ``warp.capture_if`` and
``warp.get_suggested_block_size`` for its own duration, on the calling thread's watch: call it where no other
thread launches Warp work (a backend's construction).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import warp as wp

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

    def record(module: Any, device: Any, block_dim: int | None) -> None:
        resolved = wp.get_device(device)
        recorded.setdefault(_load_key(module, resolved, block_dim), (module, resolved, block_dim))

    def load(module: Any, device: Any, block_dim: int | None = None, *args: Any, **kwargs: Any) -> Any:
        if passthrough:
            return real_load(module, device, block_dim, *args, **kwargs)
        record(module, device, block_dim)
        return None  # wp.launch returns without launching when the module is not loaded

    def capture_while(condition: Any, while_body: Any, stream: Any = None, **kwargs: Any) -> None:
        if callable(while_body):
            while_body(**kwargs)

    def capture_if(
        condition: Any, on_true: Any = None, on_false: Any = None, stream: Any = None, **kwargs: Any
    ) -> None:
        for branch in (on_true, on_false):
            if callable(branch):
                branch(**kwargs)

    def block_size(kernel: Any, device: Any = None) -> tuple[int, int]:
        nonlocal passthrough
        resolved = wp.get_device(device)
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


def modules_launched_by(
    work: Callable[[], None], placeholder_answers: bool = False
) -> tuple[list[ModuleLoad], list[str]]:
    """The module loads ``work`` asks for, found by a dry run of it (see the module docstring), and the kernels
    whose occupancy it asked for with placeholder answers. Whatever ``work`` raises in the dry run propagates;
    the recording is undone either way."""
    with _recording_loads(placeholder_answers) as (recorded, asked):
        work()
    return list(recorded.values()), asked


def compile_modules(loads: list[ModuleLoad], workers: int) -> None:
    """Compile (or load from Warp's kernel cache) each recorded module, ``workers`` at a time (as
    ``warp.force_load`` does, with each module's own block size)."""
    if workers <= 1 or len(loads) <= 1:
        for module, device, block_dim in loads:
            module.load(device, block_dim)
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for future in [pool.submit(module.load, device, block_dim) for module, device, block_dim in loads]:
            future.result()


def compile_ahead(work: Callable[[], None], workers: int) -> tuple[int, float]:
    """Dry-run ``work``, then compile the modules it launches ``workers`` at a time: (modules, seconds). When
    the dry run answered occupancy queries with placeholders, a second one with the real answers compiles what
    they change."""
    start = time.perf_counter()
    loads, asked = modules_launched_by(work, placeholder_answers=True)
    compile_modules(loads, workers)
    if asked:
        seen = {_load_key(*load) for load in loads}
        again, _ = modules_launched_by(work)
        more = [load for load in again if _load_key(*load) not in seen]
        compile_modules(more, workers)
        loads += more
    return len(loads), time.perf_counter() - start
