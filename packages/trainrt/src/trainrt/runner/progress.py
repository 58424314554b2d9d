"""The run's progress on the console: one ETA from a smoothed rate, and one line that says where the run is.

``SmoothedEta`` keeps a moving average of the wall time between iteration ends (everything between them:
collection, learning, logging, checkpoints, videos), so the rate it gives is the rate the run really
advances at: the mean of the first ``1 / EMA_WEIGHT`` iterations, then an exponential moving average. With ``training.time_limit_sec`` as well as ``algo.max_iterations``, the ETA is that of
whichever ends the run first.

``ProgressDisplay`` shows the progress line: on a terminal, one line rewritten in place under the lines the
run prints (``rich``'s live display: the run's lines go through ``terminal_printer``, and anything else
printed meanwhile appears above it too); elsewhere (a file, CI,
``| tee``, a ``log`` callable given to the runner) a plain line at most every ``PLAIN_LINE_EVERY_SEC``
seconds between blocks, so a log file holds lines, not carriage returns.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

from trainrt.hotpath import cold_path

EMA_WEIGHT = 0.1
"""Weight of the newest iteration in the smoothed seconds per iteration (about the last 20 iterations count)."""
PLAIN_LINE_EVERY_SEC = 10.0
"""Without a terminal: the least seconds between two plain progress lines (blocks are printed regardless)."""


class SmoothedEta:
    """Seconds per iteration smoothed over iteration ends, and the ETA of the run from it.

    Args:
        max_iterations: the run's ``algo.max_iterations``.
        time_limit_sec: ``training.time_limit_sec`` (None: none), counted from the run's set-up.
        weight: the newest interval's weight in the moving average.
    """

    def __init__(self, max_iterations: int, time_limit_sec: float | None, weight: float = EMA_WEIGHT) -> None:
        self.max_iterations = max_iterations
        self.time_limit_sec = time_limit_sec
        self.weight = weight
        self.sec_per_iteration: float | None = None
        self._last_end: float | None = None
        self._last_iteration = 0
        self._samples = 0

    def start(self, now: float, completed_iterations: int) -> None:
        """The session's iterations start at ``now`` after ``completed_iterations`` (a resumed run's)."""
        self._last_end, self._last_iteration = now, completed_iterations

    def iteration_ended(self, iteration: int, now: float) -> None:
        """Iteration ``iteration`` ended at ``now`` (a repeat of the same iteration is ignored)."""
        if self._last_end is None or iteration <= self._last_iteration:
            return
        sample = (now - self._last_end) / (iteration - self._last_iteration)
        self._samples += 1
        # The plain mean of the first 1/weight samples, then the moving average: a slow first iteration
        # weighs no more than any other once a few have ended.
        weight = max(self.weight, 1.0 / self._samples)
        previous = self.sec_per_iteration if self.sec_per_iteration is not None else sample
        self.sec_per_iteration = previous + weight * (sample - previous)
        self._last_end, self._last_iteration = now, iteration

    @property
    def iterations_per_sec(self) -> float:
        """The smoothed rate (0 before the first iteration ended)."""
        return 1.0 / self.sec_per_iteration if self.sec_per_iteration else 0.0

    def eta(self, iteration: int, elapsed_sec: float) -> tuple[float, bool]:
        """(seconds left, whether the time limit ends the run first) after ``iteration`` at ``elapsed_sec``
        since set-up; ``inf`` while no iteration has been timed and no time limit is set."""
        left = max(self.max_iterations - iteration, 0)
        by_iterations = left * self.sec_per_iteration if self.sec_per_iteration is not None else math.inf
        if left == 0:
            by_iterations = 0.0
        if self.time_limit_sec is None:
            return by_iterations, False
        by_time = max(self.time_limit_sec - elapsed_sec, 0.0)
        return (by_time, True) if by_time < by_iterations else (by_iterations, False)


class ProgressDisplay:
    """The progress line: rewritten in place on a terminal, a plain line now and then elsewhere.

    Args:
        log: where plain lines go (the run's ``log``).
        terminal: a rich ``Console`` to draw the live line on, or None for plain lines.
        clock: seconds (``time.monotonic``; tests pass their own).
        plain_every_sec: the least seconds between plain lines.
    """

    def __init__(
        self,
        log: Callable[[str], None],
        terminal: Any = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        plain_every_sec: float = PLAIN_LINE_EVERY_SEC,
    ) -> None:
        self.log = log
        self.terminal = terminal
        self.clock = clock
        self.plain_every_sec = plain_every_sec
        self._live: Any = None
        self._last_plain: float | None = None

    @cold_path
    def show(self, line: str, *, block_printed: bool) -> None:
        """Show ``line``: redraw it on a terminal; without one, print it unless a block was just printed
        (the block's header says as much) or the last plain line is younger than ``plain_every_sec``."""
        now = self.clock()
        if self.terminal is not None:
            self._draw(line)
            return
        if block_printed:
            self._last_plain = now
            return
        if self._last_plain is None or now - self._last_plain >= self.plain_every_sec:
            self._last_plain = now
            self.log(line)

    def _draw(self, line: str) -> None:
        from rich.live import Live
        from rich.text import Text

        text = Text(line, no_wrap=True, overflow="ellipsis")
        if self._live is None:
            self._live = Live(
                text,
                console=self.terminal,
                auto_refresh=False,  # redrawn once per iteration: no thread
                transient=True,  # the last block stays; the line goes
                redirect_stdout=True,  # what the run prints appears above the line
                redirect_stderr=True,
            )
            self._live.start(refresh=True)
        else:
            self._live.update(text, refresh=True)

    @cold_path
    def close(self) -> None:
        """Take the line off the terminal (idempotent); what was printed stays."""
        if self._live is not None:
            self._live.stop()
            self._live = None


@cold_path
def terminal_printer(console: Any) -> Callable[[str], None]:
    """A ``log`` that prints whole lines on ``console`` (above its live line; never re-wrapped or styled)."""
    from rich.text import Text

    def print_line(line: str) -> None:
        console.print(Text(line), soft_wrap=True)

    return print_line


@cold_path
def terminal_console(stream: TextIO | None = None) -> Any:
    """A rich ``Console`` on ``stream`` (stdout) when it is an interactive terminal, else None."""
    from rich.console import Console

    console = Console(file=stream or sys.stdout)
    if not console.is_terminal or console.is_dumb_terminal:
        return None
    return console
