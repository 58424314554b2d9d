"""Wall-clock timing of device work: synchronize, run the calls, synchronize again."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def wall_seconds(fn: Callable[[], None], calls: int, device: torch.device | str) -> float:
    """Wall seconds of ``calls`` calls of ``fn``; a CUDA ``device`` is synchronized before and after.

    The synchronization makes the time cover the device work the calls launched, not only their launch.
    Cold path: it synchronizes by design. ``ValueError`` when ``calls`` is below 1.
    """
    if calls < 1:
        raise ValueError(f"calls must be at least 1, got {calls}")
    device = torch.device(device)
    _synchronize(device)
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    _synchronize(device)
    return time.perf_counter() - start
