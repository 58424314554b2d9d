"""``simcore.wall_seconds``: runs the work the asked number of times and times all of it."""

import time

import pytest
import torch

import simcore


def test_every_call_runs_and_the_time_covers_them_all():
    calls = []
    stamps = []

    def work() -> None:
        calls.append(None)
        stamps.append(time.perf_counter())

    before = time.perf_counter()
    seconds = simcore.wall_seconds(work, 5, "cpu")
    after = time.perf_counter()
    assert len(calls) == 5
    # the measured span holds every call and lies within the caller's own span
    assert stamps[-1] - stamps[0] <= seconds <= after - before


def test_a_torch_device_is_accepted():
    counter = torch.zeros(())
    assert simcore.wall_seconds(lambda: counter.add_(1.0), 3, torch.device("cpu")) >= 0.0
    assert counter.item() == 3.0


@pytest.mark.parametrize("calls", [0, -2])
def test_fewer_than_one_call_is_refused(calls):
    with pytest.raises(ValueError, match=f"calls must be at least 1, got {calls}"):
        simcore.wall_seconds(lambda: None, calls, "cpu")
