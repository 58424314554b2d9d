"""Per-iteration timing: wall time from one iteration boundary to the next, and the collect / learn split.

The only host-device synchronization of a training iteration happens after its work is queued (cold
path). Inside the iteration, the split between collection and learning is measured with CUDA events
recorded on the stream (no sync); on CPU, where torch runs synchronously, host clocks give the split.
An iteration's wall time runs from its ``start()`` to its ``finish()``, so the cold-path work done in
between (logging, checkpoints) is part of it: the throughput window hides nothing of the loop.
"""

from __future__ import annotations

import time

import torch

from trainrt.hotpath import cold_path
from trainrt.runner.summary import IterationTiming


class IterationClock:
    """Times one iteration: ``start``, ``mark_collected``, ``mark_learn_started``, ``mark_learned``,
    ``synchronize_split``, ``finish``.

    Each mark is recorded on the stream current at the call, so with the collector and the learner on
    two streams (the overlap schedule) collect time runs from ``start`` to ``mark_collected`` on the
    collector's stream and learn time from ``mark_learn_started`` to ``mark_learned`` on the learner's.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self.uses_cuda_events = self.device.type == "cuda"
        if self.uses_cuda_events:
            self._events = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        self._host_marks = [0.0, 0.0, 0.0, 0.0]
        self._wall_start = 0.0
        self._split = (0.0, 0.0)

    @cold_path
    def synchronize(self) -> None:
        """Wait for all queued device work (iteration boundaries only)."""
        if self.uses_cuda_events:
            torch.cuda.synchronize(self.device)

    @cold_path
    def start(self) -> None:
        """Begin an iteration: synchronize, then start the wall clock."""
        self.synchronize()
        self._wall_start = time.perf_counter()
        self._mark(0)

    def mark_collected(self) -> None:
        """The collector's work for this iteration has been queued (no sync)."""
        self._mark(1)

    def mark_learn_started(self) -> None:
        """The learner's work for this iteration starts here (no sync)."""
        self._mark(2)

    def mark_learned(self) -> None:
        """The learner's work for this iteration has been queued (no sync)."""
        self._mark(3)

    @cold_path
    def synchronize_split(self) -> tuple[float, float, float]:
        """Wait for the iteration's work; return (collect seconds, learn seconds, wall seconds so far)."""
        self.synchronize()
        if self.uses_cuda_events:
            collect = self._events[0].elapsed_time(self._events[1]) / 1000.0
            learn = self._events[2].elapsed_time(self._events[3]) / 1000.0
        else:
            collect = self._host_marks[1] - self._host_marks[0]
            learn = self._host_marks[3] - self._host_marks[2]
        self._split = (max(collect, 0.0), max(learn, 0.0))
        return (*self._split, time.perf_counter() - self._wall_start)

    @cold_path
    def finish(self, iteration: int, env_steps: int) -> IterationTiming:
        """End the iteration (after its cold-path work) and return its timing."""
        return IterationTiming(
            iteration=iteration,
            env_steps=env_steps,
            wall_time_sec=time.perf_counter() - self._wall_start,
            collect_time_sec=self._split[0],
            learn_time_sec=self._split[1],
        )

    def _mark(self, index: int) -> None:
        if self.uses_cuda_events:
            self._events[index].record()
        else:
            self._host_marks[index] = time.perf_counter()
