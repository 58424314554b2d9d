"""Writing a training run's ``run_summary.json``: while it runs, when it ends, and when it fails or stops.

The summary says ``running`` from set-up on and is rewritten at every checkpoint and at most every
``RUNNING_SUMMARY_EVERY_SEC`` at log time, so a run killed without warning (``kill -9``) still leaves the
truth on disk; ``completed``, ``interrupted`` or ``failed`` when the run ends. A summary that fails validation
is replaced by a ``failed`` one and the run fails. The schema is ``trainrt.runner.summary``'s.
"""

from __future__ import annotations

import math
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trainrt.hotpath import cold_path
from trainrt.runner.checkpointing import ERROR_TEXT_LIMIT
from trainrt.runner.failures import WriteFailure, write_failure_of
from trainrt.runner.manifest import CONFIG_FILE_NAME
from trainrt.runner.preflight import memory_record
from trainrt.runner.run_log import TENSORBOARD_DIR_NAME, quiet_backend_diagnostics
from trainrt.runner.summary import (
    IterationTiming,
    RunStatus,
    RunSummary,
    final_env_steps_per_sec,
    json_safe,
    provenance,
    tail_throughput,
    utc_now,
    write_run_summary,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from trainrt.config import TrainConfig
    from trainrt.runner.checkpointing import RunCheckpoints
    from trainrt.runner.preflight import MemoryEstimate
    from trainrt.runner.run_log import RunLog
    from trainrt.runner.stop_signals import StopSignals
    from trainrt.runner.summary import RankFigures
    from trainrt.runner.warm_up import WarmUp

RUNNING_SUMMARY_EVERY_SEC = 10.0  # log-time rewrites of the running summary, at most this often


class SummarisedRun(Protocol):
    """What the summary reads of a run (``trainrt.runner.off_policy_runner.OffPolicyRunner``'s state)."""

    cfg: TrainConfig
    device: str
    ranks: Any
    run_dir: Path
    run_id: str
    log: Callable[[str], None]
    env: Any
    agent: Any
    replay: Any
    warm_up: WarmUp
    timings: list[IterationTiming]
    per_rank: list[RankFigures]
    resumed_from_iteration: int | None
    time_limit_reached: bool
    memory_estimate: MemoryEstimate | None
    final_eval: dict[str, float] | None
    onnx_path: str | None
    signals: StopSignals
    checkpoints: RunCheckpoints
    run_log: RunLog

    @property
    def collector(self) -> Any: ...

    @property
    def schedule(self) -> Any: ...


class RunSummaryWriter:
    """Writes the summary of ``run`` (a view of the runner's state) to ``path``, and says where the outputs are.

    Args:
        run: the run whose state the summary records (``SummarisedRun``: the runner).
        path: ``run_summary.json`` of this rank.
    """

    def __init__(self, run: SummarisedRun, path: Path) -> None:
        self.run = run
        self.path = path
        self.started_at = utc_now()
        self._provenance: dict[str, Any] | None = None
        self._running_written_at = 0.0

    @cold_path
    def write(self, status: RunStatus, error: str | None) -> RunSummary:
        """Write the summary; one that fails validation is replaced by a failed one and raised."""
        try:
            summary = self._fields(status, error)
            written = write_run_summary(self.path, summary)
        except WriteFailure:  # the filesystem refused it: a fallback summary would meet the same refusal
            raise
        except Exception as exc:  # a malformed summary is a failed run
            problem = f"run summary failed validation: {exc}"[-ERROR_TEXT_LIMIT:]
            fallback = self._fields("failed", problem, measurement=False)
            write_run_summary(self.path, fallback)
            raise RuntimeError(problem) from exc
        if status != "running":
            self._announce_outputs(written)
        return written

    @cold_path
    def write_running(self) -> None:
        """Rewrite the summary with status ``running`` (after a checkpoint, or every few seconds at log time)."""
        self._running_written_at = time.perf_counter()
        self.write("running", None)

    def running_due(self) -> bool:
        """Whether the log-time rewrite of the running summary is due."""
        return time.perf_counter() - self._running_written_at >= RUNNING_SUMMARY_EVERY_SEC

    @cold_path
    def write_failed(self, exc: BaseException) -> BaseException:
        """Write the ``failed`` summary of ``exc``; what to raise: ``exc``, or the one-line ``WriteFailure`` of a
        write the filesystem refused (saying so when the summary was refused too)."""
        failure = write_failure_of(exc, self.run.run_dir)
        error = str(failure) if failure is not None else error_text(exc)
        try:
            self.write("failed", error[-ERROR_TEXT_LIMIT:])
        except WriteFailure as refused:
            if failure is None:
                self.run.log(f"the failed summary was not written: {refused}")
                return exc
            failure = WriteFailure(failure.path, failure.errno, "the failed summary was not written either")
        return failure if failure is not None else exc

    @cold_path
    def _fields(self, status: RunStatus, error: str | None, *, measurement: bool = True) -> dict[str, Any]:
        """The summary as a dict (``measurement=False``: without timings, for the fallback failed summary)."""
        run = self.run
        cfg, env, ranks = run.cfg, run.env, run.ranks
        timings = self._run_timings() if measurement else []
        tail = tail_throughput(timings, cfg.training.tail_window)
        diagnostics = self._diagnostics() if measurement else ({}, {}, {})
        if status == "running":
            self._provenance = self._provenance or provenance(env.device if env is not None else run.device)
            origin = self._provenance
        else:
            origin = provenance(env.device if env is not None else run.device)
        last_checkpoint = run.checkpoints.last_path
        return {
            "status": status,
            "error": error,
            "signal": run.signals.name if status == "interrupted" else None,
            "warnings": list(run.run_log.warnings),
            "run_id": run.run_id,
            "algo": cfg.algo.name,
            "task": cfg.task.name,
            "sim_backend": cfg.sim.backend,
            "device": str(env.device) if env is not None else run.device,
            "num_envs": cfg.algo.num_envs,
            "world_size": ranks.world_size,
            "rank": ranks.rank,
            "steps_per_iteration": cfg.algo.steps_per_iteration,
            "updates_per_iteration": cfg.algo.params.updates_per_iteration,
            "max_iterations": cfg.algo.max_iterations,
            "time_limit_reached": run.time_limit_reached,
            "resumed_from_iteration": run.resumed_from_iteration,
            "tail_env_steps_per_sec": tail.env_steps_per_sec,
            "tail_iteration_count": tail.iteration_count,
            "tail_window": cfg.training.tail_window,
            "final_env_steps_per_sec": final_env_steps_per_sec(timings),
            "completed_iterations": len(timings),
            "total_env_steps": sum(t.env_steps for t in timings),
            "training_wall_time_sec": math.fsum(t.wall_time_sec for t in timings),
            "startup_sec": run.warm_up.startup_sec,
            "warmup_time_sec": run.warm_up.time_sec,
            "warmup_env_steps": run.warm_up.env_steps * ranks.world_size,
            "warmup_phases_sec": dict(run.warm_up.phases_sec),
            "compile_cache": run.warm_up.compile_cache,
            "learner_precompile": run.learner_precompile.record
            if run.learner_precompile is not None
            else None,
            "iterations": [t.model_dump() for t in timings],
            "per_rank": [f.model_dump() for f in run.per_rank] if measurement else [],
            "effective_steps_per_replay": cfg.training.collector_steps_per_replay,
            "collector_graph": diagnostics[0],
            "learner_graph": diagnostics[1],
            "backend_diagnostics": diagnostics[2],
            "episode_statistics": _finite(run.run_log.episode_statistics) if measurement else {},
            "memory": memory_record(run.memory_estimate, env.device if env is not None else None),
            "final_eval": _finite(run.final_eval) if (measurement and run.final_eval) else None,
            "onnx_path": run.onnx_path,
            "checkpoint_path": str(last_checkpoint) if last_checkpoint is not None else None,
            "run_dir": str(run.run_dir.resolve()),
            "config_path": str((run.run_dir / CONFIG_FILE_NAME).resolve()),
            "started_at": self.started_at,
            "finished_at": None if status == "running" else utc_now(),
            "updated_at": utc_now(),
            **origin,
        }

    def _run_timings(self) -> list[IterationTiming]:
        """This rank's timings with env steps summed over ranks (each rank steps the same number)."""
        timings, world_size = self.run.timings, self.run.ranks.world_size
        if world_size == 1:
            return timings
        return [t.model_copy(update={"env_steps": t.env_steps * world_size}) for t in timings]

    @cold_path
    def _diagnostics(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(collector graph, learner graph, backend) diagnostics as JSON-safe dicts ({} for unbuilt parts)."""
        run = self.run
        collector = json_safe(run.collector.diagnostics()) if run.collector is not None else {}
        learner = json_safe(run.agent.update_diagnostics()) if run.agent is not None else {}
        if run.schedule is not None:
            learner |= json_safe(run.schedule.diagnostics())
        if run.replay is not None and learner:
            learner |= json_safe(run.replay.sample_diagnostics())
        backend = json_safe(quiet_backend_diagnostics(run.env.backend)) if run.env is not None else {}
        if hasattr(backend, "items") is False:
            backend = {"value": backend}
        return collector, learner, backend

    @cold_path
    def _announce_outputs(self, summary: RunSummary) -> None:
        """Say where the run directory, summary and checkpoints are."""
        run = self.run
        run_dir = run.run_dir.resolve()
        last = run.checkpoints.last_path
        lines = [
            f"run {summary.status}: {summary.completed_iterations} iterations, "
            f"tail {summary.tail_env_steps_per_sec:,.0f} env steps/s over the last "
            f"{summary.tail_iteration_count} iterations",
            f"  run directory: {run_dir}",
            f"  summary:       {self.path.resolve()}",
            f"  checkpoints:   {last.resolve() if last else '(none written)'}",
        ]
        if run.onnx_path:
            lines.append(f"  onnx policy:   {Path(run.onnx_path).resolve()}")
        if run.run_log.writer is not None or (run_dir / TENSORBOARD_DIR_NAME).is_dir():
            lines.append(f"  tensorboard:   tensorboard --logdir {run_dir / TENSORBOARD_DIR_NAME}")
        run.log("\n".join(lines))


def error_text(exc: BaseException) -> str:
    """``Type: message`` of a failed run's exception, as the summary's ``error`` records it."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _finite(values: dict[str, float] | None) -> dict[str, float]:
    """Drop non-finite entries (JSON has no NaN; a non-finite statistic is not a statistic)."""
    return {k: float(v) for k, v in (values or {}).items() if math.isfinite(float(v))}
