"""One training iteration's device work: collector then learner, or both at once on two CUDA streams.

Sequential (``training.overlap=false``): the collector takes ``steps_per_iteration`` vector steps, the
replay view is frozen, then the learner runs ``updates_per_iteration`` updates on that view. The
learner of iteration i sees every row up to the end of iteration i's collection; the collector of
iteration i acts with the weights after iteration i-1's updates.

Overlapped (``training.overlap=true``, adr/0011): at the iteration boundary the acting copy of the
policy is published and the replay view is frozen (leaving out the ring rows this iteration's
collection will overwrite); then the collector replays its graph on one stream while the learner
replays its graph on another. The collector of iteration i acts with the weights after iteration
i-1's updates, exactly as in the sequential schedule; the learner of iteration i trains on the rows
as of the end of iteration i-1 (one iteration of data staleness). The two never touch the same
memory: the collector reads only the acting copy and writes rows outside the view; the learner
reads only the view and writes only the live weights.

On CPU the overlapped schedule runs its two parts one after the other (torch's CPU ops are
synchronous) with exactly the same inputs (the learner reads only the frozen view and the collector
only the acting copy, so their order does not matter), so its results are those of the two-stream run; tests use
that, and ``serialize=True`` does the same on CUDA.

Both schedules record, per iteration, which policy version acted (updates the acting weights had seen)
and how many vector steps the learner's view held, so tests can check the policy exactly.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from trainrt.hotpath import cold_path
from trainrt.runner.iteration_clock import IterationClock
from trainrt.runner.learner_partition import LearnerPartition


@dataclass(frozen=True)
class IterationRecord:
    """What one iteration's collector and learner worked from (host facts, no device reads).

    Attributes:
        acting_policy_version: updates the policy that acted had seen.
        learner_view_steps: vector env steps (all of collection so far) the learner's view held.
    """

    acting_policy_version: int
    learner_view_steps: int


class IterationSchedule:
    """Runs the device work of one iteration, sequentially or overlapped (see the module docstring).

    Args:
        collector: the ``Collector`` (``collect(n)``, ``steps_collected``).
        agent: the ``Agent`` (``replay_updates``, ``publish_policy``, ``policy_version``).
        replay: the ``DeviceReplayBuffer`` the learner samples through its view.
        steps_per_iteration: vector env steps per iteration.
        updates_per_iteration: learner updates per iteration.
        overlap: requested overlap; on CUDA it needs both graphs captured, otherwise the schedule is
            sequential and ``overlap_fallback_reason`` says why.
        serialize: run an overlapped schedule's two parts on the current stream, one after the other
            (same semantics as two streams; for equivalence tests).
        learner_partition: the learner's share of the GPU (``LearnerPartition``); its stream, when it has
            one, is the overlapped learner's stream, and its facts join ``diagnostics()``.
    """

    @cold_path
    def __init__(
        self,
        collector: Any,
        agent: Any,
        replay: Any,
        *,
        steps_per_iteration: int,
        updates_per_iteration: int,
        overlap: bool,
        serialize: bool = False,
        learner_partition: LearnerPartition | None = None,
    ) -> None:
        self.collector = collector
        self.agent = agent
        self.replay = replay
        self.steps_per_iteration = steps_per_iteration
        self.updates_per_iteration = updates_per_iteration
        self.overlap_requested = overlap
        self.overlap_fallback_reason = self._overlap_blocker() if overlap else "disabled by configuration"
        self.overlap_enabled = overlap and self.overlap_fallback_reason == ""
        self.records: list[IterationRecord] = []
        self._streams: tuple[torch.cuda.Stream, torch.cuda.Stream] | None = None
        self.concurrent = self.overlap_enabled and agent.device.type == "cuda" and not serialize
        if self.concurrent:
            device = agent.device
            # The collector's many small, latency-bound kernels get the higher priority; the learner's
            # large GEMMs fill the multiprocessors they leave idle.
            # A learner held to part of the GPU replays on its partition's stream (where it was captured).
            high, low = torch.cuda.Stream.priority_range()[1], 0
            partitioned = None if learner_partition is None else learner_partition.stream
            self._streams = (
                torch.cuda.Stream(device, priority=high),
                partitioned if partitioned is not None else torch.cuda.Stream(device, priority=low),
            )
        self.learner_partition = learner_partition

    @cold_path
    def _overlap_blocker(self) -> str:
        """Why overlap cannot run here ("" when it can)."""
        # The learner's view leaves out the rows the iteration overwrites, so the ring must hold more (any device).
        if self.steps_per_iteration >= self.replay.capacity_per_env:
            return (
                f"steps_per_iteration={self.steps_per_iteration} must be below the replay's "
                f"capacity_per_env={self.replay.capacity_per_env} (algo.params.buffer_size_per_env)"
            )
        if self.agent.device.type != "cuda":
            return ""  # serial on CPU, same semantics
        collector_graph = self.collector.diagnostics()
        if not collector_graph.get("graph_enabled"):
            return "the collector runs eagerly (overlap needs both graphs)"
        if not self.agent.update_graph_enabled:
            return "the learner runs eagerly (overlap needs both graphs)"
        return ""

    def run(self, clock: IterationClock) -> None:
        """Queue one iteration's collection and learning (no host sync); ``clock`` marks the split."""
        agent, collector = self.agent, self.collector
        agent.publish_policy()  # the collector of this iteration acts with the weights as of now
        acting_version = agent.policy_version
        if not self.overlap_enabled:
            collector.collect(self.steps_per_iteration)
            clock.mark_collected()
            self.replay.freeze_view()
            view_steps = collector.steps_collected
            clock.mark_learn_started()
            agent.replay_updates(self.updates_per_iteration, publish=False)
            clock.mark_learned()
        elif not self.concurrent:  # the learner reads only the view: the order of the parts is immaterial
            view_steps = collector.steps_collected
            self.replay.freeze_view(exclude_next_rows=self.steps_per_iteration)
            collector.collect(self.steps_per_iteration)
            clock.mark_collected()
            clock.mark_learn_started()
            agent.replay_updates(self.updates_per_iteration, publish=False)
            clock.mark_learned()
        else:
            assert self._streams is not None
            collect_stream, learn_stream = self._streams
            view_steps = collector.steps_collected
            self.replay.freeze_view(exclude_next_rows=self.steps_per_iteration)
            main = torch.cuda.current_stream(agent.device)
            collect_stream.wait_stream(main)
            learn_stream.wait_stream(main)
            with torch.cuda.stream(learn_stream):
                clock.mark_learn_started()
                agent.replay_updates(self.updates_per_iteration, publish=False)
                clock.mark_learned()
            with torch.cuda.stream(collect_stream):
                collector.collect(self.steps_per_iteration)
                clock.mark_collected()
            main.wait_stream(collect_stream)
            main.wait_stream(learn_stream)
        self.records.append(IterationRecord(acting_version, view_steps))

    @cold_path
    def diagnostics(self) -> dict[str, Any]:
        """Schedule facts for run_summary.json."""
        return {
            "overlap_requested": self.overlap_requested,
            "overlap_enabled": self.overlap_enabled,
            "overlap_concurrent_streams": self.concurrent,
            "overlap_fallback_reason": self.overlap_fallback_reason,
            "data_staleness_iterations": 1 if self.overlap_enabled else 0,
            **(self.learner_partition.diagnostics() if self.learner_partition is not None else {}),
        }
