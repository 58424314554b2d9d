"""CapturedWork: one piece of work (torch ops + backend calls) captured as a CUDA graph, or run eagerly.

Lifecycle: ``capture -> replay* -> invalidate -> capture``. ``version`` counts invalidations; a replay whose
capture predates the current version (or the backend's ``structure_version``) is stale and raises, unless
``recapture_when_stale``. Where a graph is impossible the work runs eagerly and the reason is recorded.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch

from simcore._src.capability import Capability, capability_names, declared_capabilities

if TYPE_CHECKING:
    from simcore._src.backend import SimBackend


@contextlib.contextmanager
def garbage_held_during_capture() -> Iterator[None]:
    """Collect Python's cyclic garbage now and hold the collector off until the block ends.

    Enter it around a CUDA graph capture (``with garbage_held_during_capture(), torch.cuda.graph(g): ...``).
    Objects in reference cycles are freed only when the cyclic collector runs, and it runs whenever enough
    Python objects have been allocated, which capture does. If it frees a MuJoCo Warp array then, the
    array's memory goes back through the default stream, a call the capture forbids: the capture fails
    ("operation not permitted when stream is capturing") and the work falls back to eager. Collecting
    first frees such garbage while nothing is capturing. Memory freed by reference counts inside the block
    is unaffected, and the collector is back on (if it was) when the block ends, whatever happens in it.
    """
    was_enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class CapturedWork:
    """Owns one captured callable: ``fn()`` repeated ``steps_per_replay`` times per replay.

    Args:
        fn: the work; every tensor it reads or writes must exist before capture (persistent buffers).
        backend: the SimBackend whose arrays the work touches; its diagnostics report this work.
        name: label in diagnostics and errors.
        steps_per_replay: K, calls of ``fn`` per replay (fixed at capture).
        generators: torch Generators ``fn`` draws from, registered with the graph so each replay advances them.
        require_graph: raise RuntimeError instead of falling back to eager execution.
        recapture_when_stale: recapture on a stale replay instead of raising.
        warmup_steps: eager calls of ``fn`` before the first CUDA capture (they advance the state: they run for
            real). Recaptures skip them, so a replay that recaptures still advances exactly K steps.
        enabled: False runs eagerly with the reason "disabled by config".
    """

    def __init__(
        self,
        fn: Callable[[], Any],
        *,
        backend: SimBackend,
        name: str,
        steps_per_replay: int = 1,
        generators: Sequence[torch.Generator] = (),
        require_graph: bool = False,
        recapture_when_stale: bool = False,
        warmup_steps: int = 2,
        enabled: bool = True,
    ) -> None:
        if not callable(fn):
            raise ValueError(f"fn must be callable, got {type(fn).__name__}")
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty string, got {name!r}")
        if (
            isinstance(steps_per_replay, bool)
            or not isinstance(steps_per_replay, int)
            or steps_per_replay < 1
        ):
            raise ValueError(f"steps_per_replay must be an int >= 1, got {steps_per_replay!r}")
        if not hasattr(backend, "_attach_graph"):
            raise ValueError(f"backend must be a simcore backend (simcore.make_backend), got {backend!r}")
        for flag, value in (
            ("require_graph", require_graph),
            ("recapture_when_stale", recapture_when_stale),
            ("enabled", enabled),
        ):
            if not isinstance(value, bool):
                raise ValueError(f"{flag} must be True or False, got {value!r}")
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"warmup_steps must be an int >= 0, got {warmup_steps!r}")
        self.fn = fn
        self.backend = backend
        self.name = name
        self.steps_per_replay = steps_per_replay
        self.generators = tuple(generators)
        self.require_graph = require_graph
        self.recapture_when_stale = recapture_when_stale
        self.warmup_steps = warmup_steps
        self.enabled = enabled
        self.version = 0
        self.captures = 0
        self.replays = 0
        self.eager_fallback_reason: str | None = None
        self.invalidation_reason: str | None = None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._captured_version: int | None = None
        self._captured_structure: int | None = None
        self._stream: torch.cuda.Stream | None = None
        self._warmed_up = False
        backend._attach_graph(self)

    # ----------------------------------------------------------------------------------------- state
    @property
    def graph_enabled(self) -> bool:
        """Whether replays launch a CUDA graph (False: eager fallback, or not captured yet)."""
        return self._graph is not None

    @property
    def conditional_nodes_used(self) -> bool:
        """Whether the captured graph contains CUDA conditional nodes (MuJoCo Warp's solver loop)."""
        return self.graph_enabled and bool(getattr(self.backend, "uses_conditional_nodes", False))

    @property
    def is_stale(self) -> bool:
        """Whether a replay now would use a capture older than the current version or backend structure."""
        self._check_backend_structure()
        return self._captured_version is not None and self._captured_version != self.version

    def diagnostics(self) -> dict[str, Any]:
        """Counters and state for logs and run summaries."""
        return {
            "name": self.name,
            "graph_enabled": self.graph_enabled,
            "version": self.version,
            "steps_per_replay": self.steps_per_replay,
            "captures": self.captures,
            "replays": self.replays,
            "eager_fallback_reason": self.eager_fallback_reason,
            "conditional_nodes_used": self.conditional_nodes_used,
            "invalidation_reason": self.invalidation_reason,
            "stale": self.is_stale,
        }

    # ----------------------------------------------------------------------------------------- lifecycle
    def invalidate(self, reason: str) -> None:
        """Mark the current capture stale (bumps ``version``); the next replay raises or recaptures."""
        self.version += 1
        self.invalidation_reason = reason

    def capture(self) -> None:
        """Warm up, then capture ``fn`` x K into one CUDA graph; otherwise record why it will run eagerly."""
        self._check_backend_structure()
        reason = self._fallback_reason()
        if reason is None:
            try:
                graph = self._capture_graph()
            except Exception as err:  # any failure means eager execution, with the reason on record
                reason = f"capture failed: {type(err).__name__}: {err}"
        if reason is not None:
            if self.require_graph:
                raise RuntimeError(
                    f"CapturedWork {self.name!r} requires a CUDA graph but would run eagerly: {reason}"
                )
            graph = None
        self._graph = graph
        self.eager_fallback_reason = reason
        self._captured_version = self.version
        self._captured_structure = self.backend.structure_version
        self.captures += 1
        self.backend._attach_graph(self)  # the backend's diagnostics summarize the latest capture

    def replay(self) -> None:
        """One replay: the captured graph, or K eager calls; a stale capture raises RuntimeError."""
        if self._captured_version is None:
            raise RuntimeError(f"CapturedWork {self.name!r} was never captured; call capture() first")
        if self.is_stale:
            if not self.recapture_when_stale:
                raise RuntimeError(
                    f"CapturedWork {self.name!r} is stale: captured at version {self._captured_version}, "
                    f"current version {self.version} ({self.invalidation_reason}); call capture() again "
                    "or pass recapture_when_stale=True"
                )
            self.capture()
        if self._graph is not None:
            self._graph.replay()
        else:
            self._run_steps()
        self.replays += 1

    # ----------------------------------------------------------------------------------------- internals
    def _run_steps(self) -> None:
        for _ in range(self.steps_per_replay):
            self.fn()

    def _check_backend_structure(self) -> None:
        """A replaced backend array or changed option invalidates the capture automatically."""
        current = self.backend.structure_version
        if self._captured_structure is not None and current != self._captured_structure:
            self.invalidate(f"backend structure_version changed from {self._captured_structure} to {current}")
            self._captured_structure = current

    def _fallback_reason(self) -> str | None:
        if not self.enabled:
            return "disabled by config"
        if self.backend.device.type != "cuda":
            return "cpu device"
        needed = {Capability.GRAPH_CAPTURE, Capability.EXTERNAL_GRAPH_CAPTURE}
        if self.steps_per_replay > 1:
            needed.add(Capability.MULTI_STEP_GRAPH)
        missing = needed - declared_capabilities(type(self.backend))
        if missing:
            return f"backend {self.backend.name!r} lacks {capability_names(missing)}"
        blocker = self.backend._graph_blocker()
        if blocker is not None:
            return blocker
        if self.generators and not hasattr(torch.cuda.CUDAGraph, "register_generator_state"):
            return "torch.cuda.CUDAGraph lacks register_generator_state"
        return None

    def _capture_graph(self) -> torch.cuda.CUDAGraph:
        device = self.backend.device
        if self._stream is None:
            self._stream = torch.cuda.Stream(device=device)
        side = self._stream
        caller = torch.cuda.current_stream(device)
        side.wait_stream(caller)
        if not self._warmed_up:
            with torch.cuda.stream(side):
                for _ in range(self.warmup_steps):
                    self.fn()
            caller.wait_stream(side)
            self._warmed_up = True
        graph = torch.cuda.CUDAGraph()
        for generator in self.generators:
            graph.register_generator_state(generator)
        with (
            garbage_held_during_capture(),
            torch.cuda.graph(graph, stream=side),
            self.backend.graph_capture_scope(side),
        ):
            self._run_steps()
        return graph
