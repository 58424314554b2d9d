"""The learner's share of the GPU (``training.learner_sms``): a CUDA green context whose stream the learner's
graphs are captured and replayed on, so that an overlapped collector's kernels keep the other multiprocessors.

On the whole GPU the collector's many small kernels, even on the higher-priority stream, wait for the learner's
blocks to retire (adr/0026). A learner held to N multiprocessors runs slower, but when it takes well under the
collector's time (a collector-bound task: rough ground) the iteration is the collector's, which then runs
closer to its own time. A graph follows the multiprocessors of the stream it was captured on, so the learner's
graphs are captured on this stream (``capture_learner``) and the schedule replays them there.
"""

from __future__ import annotations

from typing import Any

import torch

from trainrt.hotpath import cold_path


class LearnerPartition:
    """The multiprocessors the learner may use.

    Attributes:
        requested: ``training.learner_sms`` (None: the whole GPU).
        stream: the green context's stream, or None (the learner shares the whole GPU).
        fallback_reason: why there is no partition ("" when there is one).
    """

    @cold_path
    def __init__(self, requested: int | None, device: torch.device, *, overlap: bool) -> None:
        self.requested = requested
        self.stream: torch.cuda.Stream | None = None
        self._context: Any = None  # kept alive while its stream is used
        self.fallback_reason = self._refusal(device, overlap)
        if self.fallback_reason:
            return
        try:
            from torch.cuda.green_contexts import GreenContext

            index = device.index if device.index is not None else torch.cuda.current_device()
            self._context = GreenContext.create(num_sms=requested, device_id=index)
            self.stream = self._context.Stream()
        except Exception as exc:
            # this torch or driver cannot: the learner shares the whole GPU, and says why
            self._context, self.stream = None, None
            self.fallback_reason = f"green context unavailable: {type(exc).__name__}: {exc}"[:300]

    @cold_path
    def _refusal(self, device: torch.device, overlap: bool) -> str:
        """Why no partition is made ("" when one is); ValueError for a count the GPU does not have."""
        if self.requested is None:
            return "not requested"
        if device.type != "cuda":
            return f"{device.type} device"
        if not overlap:
            return "training.overlap is off: the learner runs alone, on the whole GPU"
        total = torch.cuda.get_device_properties(device).multi_processor_count
        if self.requested >= total:
            raise ValueError(
                f"training.learner_sms={self.requested} must be below this GPU's {total} multiprocessors "
                "(leave it unset to share the whole GPU)"
            )
        return ""

    @cold_path
    def diagnostics(self) -> dict[str, Any]:
        """For run_summary.json's learner facts."""
        return {
            "learner_sms": self.requested,
            "learner_partitioned": self.stream is not None,
            "learner_partition_fallback_reason": self.fallback_reason,
        }
