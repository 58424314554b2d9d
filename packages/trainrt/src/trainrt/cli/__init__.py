"""The ``trainrt`` command line: ``train``, ``play``, ``export``, ``bench``.

    trainrt train --algo sac --task g1_walk_flat algo.max_iterations=160 training.final_eval=false
    trainrt play runs/<run>            # deterministic evaluation of the last checkpoint
    trainrt export runs/<run>          # ONNX export of the last checkpoint's actor
    trainrt eval runs/<run>            # deterministic evaluation (walk: fixed commands; tracking: whole clip)
    trainrt eval runs/<run> --onnx runs/<run>/policy.onnx   # the same, with the exported ONNX policy acting
    trainrt bench collector            # diagnostic timings (not the acceptance number)
    trainrt checkpoint convert PATH    # an earlier version's checkpoint with numpy values, as tensors
    trainrt train --gpus 2 ...         # data-parallel: one rank per GPU (torchrun launches work too)

Also runs as ``python -m trainrt ...``. Exit codes: 0 success; 1 a failed run; 2 a bad command line, config
or run directory (one line naming the problem and the fix); 130 interrupted by Ctrl-C, 143 by SIGTERM, 129 by
SIGHUP (each saves a checkpoint of the last completed iteration and an ``interrupted`` summary). Expected
failures print one line; a traceback means a bug, or ``trainrt --debug ...`` asked for it.

One module per command group: ``training`` (train), ``rollouts`` (play, export, eval), ``bench``, ``viz`` (motion,
report), ``config_show`` (config show), ``checkpoints`` (checkpoint convert); ``common`` holds the app, the option
types and the error lines. The commands parse, call ``trainrt.config`` and the runner, and print: a Python caller
builds the config a command line would with ``trainrt.config.resolve_train_config`` (``train``, ``config show``,
``bench``) or ``trainrt.config.run_config`` (a run directory's, for ``eval``, ``play``, ``export``).
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings

from trainrt.cli.common import Algo, CliState, PresetChoice, Sim, TaskOpt, app
from trainrt.cli.training import CPU_THREADS_NOTE
from trainrt.tasks.registry import DEFAULT_ALGO, DEFAULT_TASK

# Importing a command module registers its commands; `trainrt --help` lists them in this order.
COMMAND_MODULES = ("training", "rollouts", "bench", "viz", "config_show", "checkpoints")
for _module in COMMAND_MODULES:
    importlib.import_module(f"trainrt.cli.{_module}")

__all__ = [
    "CPU_THREADS_NOTE",
    "DEFAULT_ALGO",
    "DEFAULT_TASK",
    "Algo",
    "PresetChoice",
    "Sim",
    "TaskOpt",
    "app",
    "format_warning",
    "main",
    "one_cpu_thread_unless_set",
]


def __getattr__(name: str) -> object:
    """The config resolution's old home: ``trainrt.cli.resolve_train_config`` and ``check_device_available`` are
    ``trainrt.config.resolve``'s (imported on first use, so ``import trainrt.cli`` stays free of torch)."""
    if name in ("resolve_train_config", "check_device_available"):
        from trainrt.config import resolve

        return getattr(resolve, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_python_warning_format = warnings.formatwarning


def format_warning(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: str | None = None
) -> str:
    """Our own warnings (a clip's joints beyond their limits, say) as one ``warning: ...`` line; others as Python
    prints them."""
    if category.__module__.split(".")[0] in ("trainrt", "simcore"):
        return f"warning: {message}\n"
    return _python_warning_format(message, category, filename, lineno, line)


def one_cpu_thread_unless_set() -> bool:
    """Give this process (and the processes it starts) one torch CPU thread unless ``OMP_NUM_THREADS`` is set.

    torch starts one thread per core in every process, so two CPU runs on one machine (or a run and its
    ``eval``) oversubscribe the cores and each slows down several times; the env steps and the small networks
    of a CPU run gain little from more threads. Set before torch is imported, so launched ranks inherit it.
    Returns whether the default was applied.
    """
    if "OMP_NUM_THREADS" in os.environ:
        return False
    os.environ["OMP_NUM_THREADS"] = "1"
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(1)
    return True


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``trainrt``)."""
    CliState.one_cpu_thread = one_cpu_thread_unless_set()
    warnings.formatwarning = format_warning
    app(args=argv if argv is not None else sys.argv[1:], prog_name="trainrt")
