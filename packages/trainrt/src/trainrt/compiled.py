"""CompiledOnFirstCall: a per-step function that may run torch.compile'd, with a recorded eager fallback."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from trainrt.hotpath import cold_path


def _is_compile_error(exc: Exception) -> bool:
    """Whether ``exc`` is what torch.compile raises, before running anything, when it cannot compile (again).

    Imports dynamo here rather than at module level: a process that never compiles (evaluation, export) then
    never pays for importing it, and one that compiled has imported it already."""
    from torch._dynamo import exc as dynamo_exc

    return isinstance(exc, (dynamo_exc.TorchDynamoException, dynamo_exc.FailOnRecompileLimitHit))


class CompiledOnFirstCall:
    """Calls ``fn`` eagerly until `compile`; then its compiled form, which compiles at its first call.

    If compiling fails there (``fullgraph`` tracing fails before any kernel runs, so nothing was written),
    that call and every later one run ``fn`` eagerly and ``fallback_reason`` says why. The same holds for a
    later call that has to compile again and cannot (say, past torch's recompile limit, when many envs are
    built in one process). The first call should be an eager warm-up step: a CUDA graph captures the kernels
    of whichever form is active.
    """

    @cold_path
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self._active: Callable[..., Any] = fn
        self._first_call_pending = False
        self.compiled = False
        self.fallback_reason = "not requested"

    def __call__(self, *args: Any) -> Any:
        if self._first_call_pending:
            return self._first_call(*args)
        if not self.compiled:
            return self.fn(*args)
        try:
            return self._active(*args)
        except Exception as exc:
            if not _is_compile_error(exc):
                raise
            # A later call that must compile again (new guards, or too many recompiles) and cannot: torch.compile
            # raises before running anything, so the eager call is the first to write.
            self.uncompile(f"recompiling failed: {type(exc).__name__}: {exc}")
            return self.fn(*args)

    @cold_path
    def compile(self, options: dict[str, Any] | None = None) -> bool:
        """Switch to ``torch.compile(fn, fullgraph=True, dynamic=False)`` (with inductor ``options``, if any);
        False (eager, reason recorded) when torch.compile refuses at once. Whether it stays compiled is decided
        at its first call."""
        try:
            self._active = torch.compile(self.fn, fullgraph=True, dynamic=False, options=options or None)
        except Exception as exc:
            self.uncompile(f"torch.compile unavailable: {type(exc).__name__}: {exc}")
            return False
        self._first_call_pending = True
        self.compiled = True
        self.fallback_reason = ""
        return True

    @cold_path
    def uncompile(self, reason: str) -> None:
        """Run ``fn`` eagerly again, recording ``reason``."""
        self._active = self.fn
        self._first_call_pending = False
        self.compiled = False
        self.fallback_reason = reason[:500]

    @cold_path
    def _first_call(self, *args: Any) -> Any:
        self._first_call_pending = False
        try:
            return self._active(*args)
        except Exception as exc:
            self.uncompile(f"compiling failed: {type(exc).__name__}: {exc}")
            return self.fn(*args)


def where_into(rows: torch.Tensor, value: torch.Tensor, target: torch.Tensor) -> None:
    """``target[rows] = value[rows]`` in place, ``target`` possibly a strided view (a payload's columns).

    Eagerly one select written straight into ``target``; under torch.compile, which cannot trace an ``out=``
    into a view, a select copied into it (fused into the same kernel). ``value`` may be float32 where
    ``target`` is float64: the select widens it exactly, as ``.to()`` would.
    """
    if torch.compiler.is_compiling():
        target.copy_(torch.where(rows, value, target))
    else:
        torch.where(rows, value, target, out=target)


@cold_path
def compile_refusal(requested: bool, device: torch.device) -> str | None:
    """Why parts a config asks about stay eager: ``"not requested"``, ``"cpu device"`` (they compile on CUDA
    only), or None when they should compile."""
    if not requested:
        return "not requested"
    if device.type != "cuda":
        return "cpu device"
    return None


@cold_path
def joined_reasons(reasons: dict[str, str], parts: int) -> str:
    """Why parts run eagerly, ``{part: reason}``, in one line: the reason alone when all ``parts`` parts share
    it, else ``"part: reason; ..."`` ("" when none)."""
    unique = set(reasons.values())
    if len(reasons) == parts and len(unique) == 1:
        return unique.pop()
    return "; ".join(f"{name}: {reason}" for name, reason in reasons.items())
