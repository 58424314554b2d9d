"""``trainrt train --gpus N``: start one training process per rank and end them together.

Each child is ``python -m trainrt train ...`` with the launch variables ``torchrun`` would set (``RANK``,
``LOCAL_RANK``, ``WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``), so a ``--gpus`` run and a ``torchrun``
run execute the same code. NVLink multicast stays off: ``NCCL_NVLS_ENABLE=0`` is set when it is unset.

When a child exits with a non-zero code, the others get ``grace_sec`` to notice at their next iteration
boundary and write their failed summaries; whatever is still running then is terminated, and killed
``grace_sec`` later. No child outlives the launcher.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

from trainrt.hotpath import cold_path

_POLL_SEC = 0.2


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@cold_path
def rank_environment(
    rank: int, world_size: int, port: int, base: dict[str, str] | None = None
) -> dict[str, str]:
    """The environment of rank ``rank``: the parent's plus the torchrun launch variables."""
    env = dict(os.environ if base is None else base)
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    env["MASTER_PORT"] = str(port)
    env["WORLD_SIZE"] = str(world_size)
    env["RANK"] = str(rank)
    env["LOCAL_RANK"] = str(rank)
    return env


@cold_path
def launch_ranks(train_args: Sequence[str], world_size: int, *, grace_sec: float = 30.0) -> int:
    """Run ``trainrt train TRAIN_ARGS`` as ``world_size`` ranks; return the run's exit code.

    0 when every rank exits 0; otherwise the first non-zero code seen (130 on Ctrl-C). SIGTERM or SIGHUP
    sent to the launcher (``docker stop`` signals only the container's first process) is forwarded to every
    rank, which saves and stops as a single-process run does; the launcher then exits with 128 + the signal
    number. Ranks still running ``2 * grace_sec`` after a failure or a forwarded signal are killed.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    port = free_port()
    command = [sys.executable, "-m", "trainrt", "train", *train_args]
    children = [
        subprocess.Popen(command, env=rank_environment(rank, world_size, port)) for rank in range(world_size)
    ]
    forwarded: list[int] = []

    def forward(signum: int, frame: Any) -> None:
        forwarded.append(signum)
        _signal_all(children, signum)

    previous = (
        {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGHUP)}
        if threading.current_thread() is threading.main_thread()
        else {}
    )
    first_code: int | None = None
    failed_at: float | None = None
    terminated = False
    try:
        while any(child.poll() is None for child in children):
            for child in children:
                code = child.poll()
                if code not in (None, 0) and first_code is None:
                    first_code, failed_at = code, time.monotonic()
            if forwarded and failed_at is None:
                failed_at, terminated = time.monotonic(), True
            if failed_at is not None:
                waited = time.monotonic() - failed_at
                if waited > 2 * grace_sec:
                    _signal_all(children, signal.SIGKILL)
                elif waited > grace_sec and not terminated:
                    _signal_all(children, signal.SIGTERM)
                    terminated = True
            time.sleep(_POLL_SEC)
    except KeyboardInterrupt:
        # The children got the terminal's SIGINT too: they save, write "interrupted" and exit.
        for child in children:
            try:
                child.wait(timeout=grace_sec)
            except subprocess.TimeoutExpired:
                child.kill()
        return 130
    finally:
        _signal_all(children, signal.SIGKILL)  # nothing outlives the launcher
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if forwarded:
        return 128 + int(forwarded[0])
    if first_code is None:
        first_code = next((child.returncode for child in children if child.returncode != 0), 0)
    return int(first_code)


def _signal_all(children: Sequence[subprocess.Popen], sig: int) -> None:
    """Send ``sig`` to every child still running."""
    for child in children:
        if child.poll() is None:
            child.send_signal(sig)
