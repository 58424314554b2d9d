"""Running training: the collector, the off-policy runner, run_summary.json, checkpoints, play and export.

Names resolve lazily, so ``import trainrt.runner.summary`` (schema checks, tools reading summaries) does
not import the env, tasks and physics backends.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Collector": "trainrt.runner.collector",
    "OffPolicyRunner": "trainrt.runner.off_policy_runner",
    "evaluate_policy": "trainrt.runner.play",
    "play_run": "trainrt.runner.play",
    "export_policy_onnx": "trainrt.runner.export",
    "export_run": "trainrt.runner.export",
    "SUMMARY_FILE_NAME": "trainrt.runner.summary",
    "IterationTiming": "trainrt.runner.summary",
    "RunSummary": "trainrt.runner.summary",
    "load_run_summary": "trainrt.runner.summary",
    "tail_throughput": "trainrt.runner.summary",
    "write_run_summary": "trainrt.runner.summary",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` on first use."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'trainrt.runner' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
