"""Stop signals of a training run: Ctrl-C, SIGTERM and SIGHUP, and when each of them stops the run.

Outside the iteration loop (set-up, warm-up, the final eval) a signal raises at once: SIGTERM and SIGHUP as
``RunInterrupted``, Ctrl-C as ``KeyboardInterrupt``. Inside the loop (``StopSignals.at_iteration_ends``) it
is a request the loop honours at the end of the iteration in progress (``raise_stop``; with several ranks,
the iteration whose boundary agreement first carries a request), so the exception never lands inside a graph
replay, a two-stream schedule, a checkpoint write or a lock held by a library thread, where unwinding could
crash or hang the process before it saves. A second Ctrl-C raises at once (for an iteration that does not
end, or a save it abandons); a second SIGTERM or SIGHUP is ignored so the save can finish. While the
``interrupted`` summary is written (``StopSignals.ignored``), every signal is ignored.

A Ctrl-C that comes again within ``SAME_CTRL_C_SEC`` is the same Ctrl-C delivered twice, not a second one: a
launcher that forwards SIGINT to its process group (``uv run``, under ``timeout -s INT`` or a terminal) makes
one keypress arrive twice, and counting it twice would abandon the checkpoint it asked for.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

from trainrt.hotpath import cold_path

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

SAME_CTRL_C_SEC = 0.5
"""Ctrl-Cs closer together than this are one delivered twice (a person's second press comes later)."""


class RunInterrupted(KeyboardInterrupt):
    """The run was stopped by a signal (SIGTERM, SIGHUP) and handled like Ctrl-C.

    Attributes:
        signal_name: ``"SIGTERM"`` or ``"SIGHUP"``.
        exit_code: 128 + the signal number (143 for SIGTERM, 129 for SIGHUP).
    """

    def __init__(self, signum: int) -> None:
        self.signal_name = signal.Signals(signum).name
        self.exit_code = 128 + int(signum)
        super().__init__(self.signal_name)


def raise_stop(signum: int | None) -> None:
    """Raise the stop that ``signum`` (the ranks' agreed stop request, a signal number) asks for."""
    if signum is None:
        return
    raise KeyboardInterrupt if signum == signal.SIGINT else RunInterrupted(signum)


class StopSignals:
    """The run's handlers of SIGTERM, SIGHUP and Ctrl-C, and what they asked for (see the module docstring).

    Attributes:
        request: the signal number a signal inside the loop asked to stop for (``None``: none yet).
        name: the name of the signal the run stopped for, once ``first_stop`` decided it.
        stopped_inside_iteration: a second Ctrl-C raised inside the loop, leaving an iteration half done.
        then_ctrl_c: a Ctrl-C stopped the run while a SIGTERM or SIGHUP waited for an iteration's end.
    """

    def __init__(self) -> None:
        self.request: int | None = None
        self.name: str | None = None
        self.stopped_inside_iteration = False
        self.then_ctrl_c = False
        self._at_boundary = False  # inside the iteration loop: signals wait for the iteration's end
        self._ignored = False  # the interrupted summary is being written
        self._raised: list[int] = []  # SIGTERM or SIGHUP already raised or requested
        self._last_ctrl_c: float | None = None  # time.monotonic() of the last Ctrl-C counted
        self._previous: dict[int, Any] = {}

    @cold_path
    def install(self) -> None:
        """Handle SIGTERM, SIGHUP and Ctrl-C (in the main thread only; elsewhere Python keeps its own)."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._previous = {sig: signal.signal(sig, self._handle) for sig in (*STOP_SIGNALS, signal.SIGINT)}

    @cold_path
    def restore(self) -> None:
        """Put back the handlers ``install`` replaced."""
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self._ignored:  # the interrupted summary is being written: a small file, let it finish
            return
        if signum == signal.SIGINT:
            now = time.monotonic()
            if self._last_ctrl_c is not None and now - self._last_ctrl_c < SAME_CTRL_C_SEC:
                return  # the same Ctrl-C delivered twice (see the module docstring)
            self._last_ctrl_c = now
            if self._at_boundary and self.request is None:
                self.request = signum
                return
            if self._at_boundary:  # a second stop inside the loop leaves an iteration half done
                self.stopped_inside_iteration = True
            raise KeyboardInterrupt
        if self._raised:  # a second signal while saving: let the save finish
            return
        self._raised.append(signum)
        if self._at_boundary:
            self.request = signum
            return
        raise RunInterrupted(signum)

    @contextlib.contextmanager
    def at_iteration_ends(self) -> Iterator[None]:
        """Inside: a signal is a request the loop honours at the end of the iteration in progress."""
        self._at_boundary = True
        try:
            yield
        finally:
            self._at_boundary = False

    @contextlib.contextmanager
    def ignored(self) -> Iterator[None]:
        """Inside: every signal is ignored (the interrupted summary is being written)."""
        self._ignored = True
        try:
            yield
        finally:
            self._ignored = False

    def first_stop(self, exc: KeyboardInterrupt) -> KeyboardInterrupt:
        """The stop that came first, its name recorded in ``name``.

        A Ctrl-C that lands while a SIGTERM or SIGHUP waits for the iteration's end stops the run at once, but
        the run stops for that signal (its name in the summary, its exit code).
        """
        stop = exc
        pending = self.request
        if not (isinstance(exc, RunInterrupted) or pending is None or pending == signal.SIGINT):
            self.then_ctrl_c = True
            stop = RunInterrupted(pending)
        self.name = stop.signal_name if isinstance(stop, RunInterrupted) else "SIGINT"
        return stop

    def describe(self) -> str:
        """``interrupted by <signal>``, with ``, then Ctrl-C`` when a Ctrl-C cut the wait short."""
        return f"interrupted by {self.name}" + (", then Ctrl-C" if self.then_ctrl_c else "")


def raised_by_ctrl_c(err: BaseException | None, stop: BaseException) -> bool:
    """Whether ``err`` is a Ctrl-C after ``stop``, or was raised while handling one (torch.save wraps it)."""
    seen: set[int] = set()
    while err is not None and err is not stop and id(err) not in seen:
        if isinstance(err, KeyboardInterrupt):
            return True
        seen.add(id(err))
        err = err.__cause__ or err.__context__
    return False
