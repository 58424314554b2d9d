"""``run_summary.json``: the measurement contract of a training run, its schema, and how it is computed.

The number that counts is ``tail_env_steps_per_sec``: the env steps of the last ``W`` completed iterations
divided by the wall time of those same iterations (one aggregate over the window, never a mean of
per-iteration rates). Warm-up (construction, compilation, graph captures, replay prefill, the first
update) is recorded separately in ``warmup_time_sec`` and never enters an iteration's timing.

A summary is validated against :class:`RunSummary` before it is written and when it is read; a summary
that does not validate (a missing field, a non-finite number, a tail value that does not follow from the
recorded timings) is a malformed summary, and a run that produced one is a failed run.

A run rewrites its summary with status ``running`` while it runs (at checkpoints and every few seconds at log
time), so the file on disk always tells the truth: ``running`` with the iterations done so far, then
``completed``, ``failed`` (with ``error``) or ``interrupted`` (with the ``signal``). A ``running`` summary
whose process is gone (no lock holder, see ``trainrt.runner.run_dir``) is a run that was killed.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib.metadata
import json
import math
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, NonNegativeFloat, NonNegativeInt, model_validator

from trainrt.config.renames import RenamedField, translate_renamed_fields
from trainrt.hotpath import cold_path
from trainrt.runner.atomic_files import atomic_write_text

SUMMARY_FILE_NAME = "run_summary.json"
SUMMARY_SCHEMA_VERSION = 1
RunStatus = Literal["running", "completed", "failed", "interrupted"]
COMMIT_ENV = "TRAINRT_REPO_COMMIT"

# Distribution name -> module name, for the versions recorded in every summary.
VERSIONED_PACKAGES: dict[str, str] = {
    "torch": "torch",
    "warp-lang": "warp",
    "mujoco": "mujoco",
    "mujoco-warp": "mujoco_warp",
    "simcore": "simcore",
    "trainrt": "trainrt",
}


class IterationTiming(BaseModel):
    """Timing of one training iteration (collector steps + updates), boundary to boundary."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    iteration: int = Field(ge=1, description="1-based iteration number")
    env_steps: NonNegativeInt = Field(
        description="env steps taken in the iteration (vector steps * num_envs)"
    )
    wall_time_sec: NonNegativeFloat = Field(description="wall time between the iteration's boundary syncs")
    collect_time_sec: NonNegativeFloat = Field(description="device time of the collector replays")
    learn_time_sec: NonNegativeFloat = Field(description="device time of the learner updates")
    acting_policy_version: NonNegativeInt | None = Field(
        None, description="learner updates the policy that collected this iteration had seen"
    )
    learner_view_steps: NonNegativeInt | None = Field(
        None, description="vector env steps (all collection so far) in the replay view the learner sampled"
    )
    elapsed_sec: NonNegativeFloat | None = Field(
        None,
        description="seconds from the set-up of the process that ran this iteration to the iteration's end "
        "(warm-up and the time between iterations included): the wall-clock axis of a learning curve",
    )


class TailThroughput(BaseModel):
    """The tail window's aggregate throughput and how many iterations it covers."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    env_steps_per_sec: NonNegativeFloat
    iteration_count: NonNegativeInt


def tail_throughput(iterations: Sequence[IterationTiming], window: int) -> TailThroughput:
    """Aggregate env steps/s over the last ``window`` iterations (all of them when fewer were run).

    ``sum(env_steps) / sum(wall_time_sec)`` over the window: an iteration that took twice as long counts
    twice as much, unlike a mean of per-iteration rates.
    """
    if window < 1:
        raise ValueError(f"tail window must be >= 1, got {window}")
    tail = list(iterations)[-window:]
    wall = math.fsum(it.wall_time_sec for it in tail)
    steps = sum(it.env_steps for it in tail)
    rate = steps / wall if wall > 0.0 else 0.0
    return TailThroughput(env_steps_per_sec=rate, iteration_count=len(tail))


def final_env_steps_per_sec(iterations: Sequence[IterationTiming]) -> float | None:
    """Env steps/s of the last iteration alone (diagnostic only; ``None`` before the first iteration)."""
    if not iterations or iterations[-1].wall_time_sec <= 0.0:
        return None
    return iterations[-1].env_steps / iterations[-1].wall_time_sec


class RankFigures(BaseModel):
    """One rank's own figures in a multi-rank run (its envs, its steps, its clock, its weights)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    rank: NonNegativeInt
    device: str
    seed: NonNegativeInt = Field(description="this rank's seed (trainrt.runner.distributed.rank_seed)")
    num_envs: NonNegativeInt
    completed_iterations: NonNegativeInt
    total_env_steps: NonNegativeInt = Field(description="this rank's env steps of the completed iterations")
    training_wall_time_sec: NonNegativeFloat
    tail_env_steps_per_sec: NonNegativeFloat = Field(description="this rank's tail rate (same window)")
    parameter_checksum: list[float] = Field(
        description="[sum, sum of squares] of all agent parameters and buffers at the end (float64)"
    )


class CompileCacheEntry(BaseModel):
    """One compiler's cache as a run found and left it (``trainrt.runner.compile_cache``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    dir: str | None = Field(
        description="the folder the compiler reads and writes (None: the run's backend compiles nothing, "
        "or the compiler is not installed)"
    )
    unit: str = Field(
        description="what the entries count: modules (Warp), files (inductor), kernels (Triton)"
    )
    before: NonNegativeInt | None = Field(
        description="entries when the run started, before anything compiled"
    )
    after: NonNegativeInt | None = Field(
        None,
        description="entries when warm-up ended (None until then); after - before is what this run compiled "
        "(or another run sharing the folder meanwhile): 0 new means a warm cache was reused",
    )


class CompileCacheRecord(BaseModel):
    """The compilers' caches of a run: ``$TRAINRT_CACHE_DIR`` and each cache's folder and entries."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    root: str | None = Field(
        description="$TRAINRT_CACHE_DIR, the folder the three caches are below (None: unset, each "
        "compiler's default folder)"
    )
    warp: CompileCacheEntry = Field(description="Warp's kernel cache (MuJoCo Warp's kernels)")
    inductor: CompileCacheEntry = Field(
        description="torch inductor's cache (the compiled learner and collector)"
    )
    triton: CompileCacheEntry = Field(description="Triton's cache (GPU kernels not generated by inductor)")


class RunSummary(BaseModel):
    """Schema of ``run_summary.json``; its field docs are the contract (docs/design.md, measurement)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    schema_version: Literal[1] = SUMMARY_SCHEMA_VERSION
    status: RunStatus = Field(
        description="running (rewritten as the run goes), completed, failed or interrupted"
    )
    error: str | None = Field(None, description="error text of a failed run, what stopped an interrupted one")
    signal: str | None = Field(
        None, description="SIGINT, SIGTERM or SIGHUP for an interrupted run (else None)"
    )
    warnings: list[str] = Field(
        default_factory=list, description="problems that did not stop the run (e.g. contact buffer overflow)"
    )
    run_id: str | None = Field(None, description="id of the run that owns the run directory")
    # What ran.
    algo: str
    task: str
    sim_backend: str
    device: str
    num_envs: NonNegativeInt = Field(description="envs per rank (algo.num_envs)")
    world_size: int = Field(1, ge=1, description="ranks (processes, one per GPU) of the run")
    rank: NonNegativeInt = Field(0, description="the rank that wrote this summary (0: the run's summary)")
    steps_per_iteration: NonNegativeInt = Field(description="vector env steps per iteration")
    updates_per_iteration: NonNegativeInt
    max_iterations: NonNegativeInt
    time_limit_reached: bool = Field(
        False, description="the run ended at training.time_limit_sec, before algo.max_iterations"
    )
    resumed_from_iteration: NonNegativeInt | None = None
    # The measurement.
    tail_env_steps_per_sec: NonNegativeFloat = Field(
        description="sum(env steps)/sum(wall) over the tail window (env steps summed over ranks)"
    )
    tail_iteration_count: NonNegativeInt = Field(
        description="iterations in the tail window (min(W, completed))"
    )
    tail_window: int = Field(ge=1, description="configured window W (training.tail_window)")
    final_env_steps_per_sec: NonNegativeFloat | None = Field(
        None, description="last iteration only: diagnostic"
    )
    completed_iterations: NonNegativeInt
    total_env_steps: NonNegativeInt = Field(description="env steps of the completed iterations (no warm-up)")
    training_wall_time_sec: NonNegativeFloat = Field(description="sum of the iterations' wall times")
    startup_sec: NonNegativeFloat | None = Field(
        None,
        description="seconds from the process's start to the run's construction (interpreter, imports, the checks "
        "of the command line); startup_sec + warmup_time_sec is the time from the command to iteration 1. None "
        "where the system does not say (Linux does)",
    )
    warmup_time_sec: NonNegativeFloat = Field(description="construction to iteration 1, outside every window")
    warmup_env_steps: NonNegativeInt = Field(
        description="env steps taken during warm-up (prefill, captures), summed over ranks"
    )
    warmup_phases_sec: dict[str, NonNegativeFloat] = Field(
        default_factory=dict,
        description="seconds of each warm-up phase, in order (set_up: from the checks of the input to the "
        "built parts, the step math compiled; physics_kernels (on mjwarp with compiled step math): the wait "
        "for the Warp kernels compiling since set-up; reset, first_steps, collector_capture, learner_helper_wait (with a learner helper), "
        "replay_sample_compile, learner_capture, first_updates); the phases that ran so far, summing to about "
        "warmup_time_sec",
    )
    compile_cache: CompileCacheRecord | None = Field(
        None,
        description="the compilers' caches ($TRAINRT_CACHE_DIR or the defaults): each one's folder and entries "
        "before and after warm-up (trainrt.runner.compile_cache)",
    )
    learner_precompile: dict[str, NonNegativeFloat | str | dict[str, float]] | None = Field(
        None,
        description="the helper process that compiled the learner while the envs built, reset and took their "
        "first steps (trainrt.runner.learner_precompile): its seconds and the seconds the run waited for it, "
        "where its time went (steps_sec: start, config, imports, agent, learner), "
        "its error, or why the run started none or stopped it ('skipped'); None before set-up started it",
    )
    iterations: list[IterationTiming] = Field(
        description="per-iteration timings, in order; env_steps summed over ranks, wall time of the rank "
        "that wrote the summary (ranks run in lockstep: every iteration ends with a collective)"
    )
    per_rank: list[RankFigures] = Field(
        default_factory=list, description="each rank's own figures (multi-rank runs that completed)"
    )
    # How it ran.
    effective_steps_per_replay: int = Field(ge=1, description="K: control steps per collector replay")
    collector_graph: dict[str, Any] = Field(
        description="collector CapturedWork diagnostics (graph enabled...)"
    )
    learner_graph: dict[str, Any] = Field(description="learner graph status / eager-fallback reason")
    backend_diagnostics: dict[str, Any]
    # Outcome.
    episode_statistics: dict[str, float] = Field(
        description="final episode statistics (Episode/..., Train/...)"
    )
    final_eval: dict[str, float] | None = Field(
        None,
        description="the deterministic evaluation rollout at the end of training (training.final_eval=true; "
        "trainrt.runner.play.evaluate_policy): mean_return, mean_episode_length, terminated_fraction, "
        "num_envs, num_steps",
    )
    memory: dict[str, Any] | None = Field(
        None,
        description="the pre-flight estimate of device bytes by consumer (estimate_bytes, estimate_total_bytes; "
        "trainrt.runner.preflight) beside what was in use when this summary was written: device_used_bytes "
        "(the whole device, CUDA only) and torch_peak_reserved_bytes",
    )
    onnx_path: str | None = None
    checkpoint_path: str | None = Field(None, description="last checkpoint written")
    run_dir: str
    config_path: str
    # Provenance.
    commit: str = Field(description="git rev-parse HEAD of this repository, or 'unknown'")
    commit_dirty: bool | None = Field(None, description="uncommitted changes present (None if unknown)")
    versions: dict[str, str]
    python_version: str
    gpu_name: str | None
    cuda_visible_devices: str | None
    started_at: str
    finished_at: str | None = Field(None, description="when the run ended (None while it runs)")
    updated_at: str | None = Field(None, description="when this summary was written")

    renamed_fields: ClassVar[tuple[RenamedField, ...]] = (RenamedField("evaluation", "final_eval"),)
    """Fields renamed since summaries were first written: an older summary still loads, with the new names."""

    @model_validator(mode="before")
    @classmethod
    @cold_path
    def _read_renamed_fields(cls, data: Any) -> Any:
        """Read a summary written before a rename (``renamed_fields``) with the new field names, silently:
        a summary on disk is a record, not a use of the old name."""
        return translate_renamed_fields(cls, data)

    @model_validator(mode="after")
    @cold_path
    def _measurement_is_consistent(self) -> RunSummary:
        """Reject a summary whose derived numbers do not follow from its own per-iteration timings."""
        its = self.iterations
        if [it.iteration for it in its] != list(range(1, len(its) + 1)):
            raise ValueError("iterations must be numbered 1..n in order")
        if self.completed_iterations != len(its):
            raise ValueError(
                f"completed_iterations={self.completed_iterations} but {len(its)} iteration timings"
            )
        if self.total_env_steps != sum(it.env_steps for it in its):
            raise ValueError("total_env_steps differs from the sum of the iterations' env_steps")
        if not math.isclose(
            self.training_wall_time_sec, math.fsum(it.wall_time_sec for it in its), rel_tol=1e-6
        ):
            raise ValueError("training_wall_time_sec differs from the sum of the iterations' wall times")
        tail = tail_throughput(its, self.tail_window)
        if self.tail_iteration_count != tail.iteration_count:
            raise ValueError(
                f"tail_iteration_count={self.tail_iteration_count}, expected {tail.iteration_count} "
                f"(window {self.tail_window}, {len(its)} iterations)"
            )
        if not math.isclose(self.tail_env_steps_per_sec, tail.env_steps_per_sec, rel_tol=1e-6, abs_tol=1e-9):
            raise ValueError(
                f"tail_env_steps_per_sec={self.tail_env_steps_per_sec} does not follow from the timings "
                f"({tail.env_steps_per_sec})"
            )
        if self.per_rank:
            if [f.rank for f in self.per_rank] != list(range(self.world_size)):
                raise ValueError(f"per_rank must list ranks 0..{self.world_size - 1} in order")
            if sum(f.total_env_steps for f in self.per_rank) != self.total_env_steps:
                raise ValueError("total_env_steps differs from the sum of the ranks' total_env_steps")
        if self.status == "completed" and self.error is not None:
            raise ValueError("a completed run carries no error")
        if self.status == "failed" and not self.error:
            raise ValueError("a failed run must say why (error)")
        if self.status != "running" and self.finished_at is None:
            raise ValueError(f"a {self.status} run must say when it finished (finished_at)")
        return self


@cold_path
def write_run_summary(path: str | os.PathLike, summary: RunSummary | dict[str, Any]) -> RunSummary:
    """Validate ``summary`` against :class:`RunSummary` and write it atomically as JSON to ``path``.

    Raises pydantic's ``ValidationError`` (a ``ValueError``) without writing anything when it is malformed, and
    ``trainrt.runner.failures.WriteFailure`` (leaving the previous file) when the filesystem refuses the write.
    """
    model = RunSummary.model_validate(summary.model_dump() if isinstance(summary, RunSummary) else summary)
    atomic_write_text(path, json.dumps(model.model_dump(mode="json"), indent=2) + "\n")
    return model


@cold_path
def load_run_summary(path: str | os.PathLike) -> RunSummary:
    """Read and validate a ``run_summary.json`` (a file or the run directory holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / SUMMARY_FILE_NAME
    return RunSummary.model_validate_json(path.read_text())


@cold_path
def repo_commit() -> tuple[str, bool | None]:
    """``(git rev-parse HEAD, dirty)`` of the repository holding this source.

    Without git, outside a repository, or inside one that does not track this file (a copy of the tree
    exported into an ignored folder of another checkout, whose HEAD says nothing about the copy):
    ``($TRAINRT_REPO_COMMIT, None)`` when that variable is set, else ``("unknown", None)``.
    """
    source = Path(__file__).resolve()
    here = source.parent
    try:
        subprocess.run(  # fails unless the enclosing repository tracks this very file
            ["git", "ls-files", "--error-unmatch", source.name],
            cwd=here,
            capture_output=True,
            timeout=10,
            check=True,
        )
        head = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        # A copy of the tree without its own .git (e.g. on a remote GPU machine): the caller may say which
        # commit it is.
        return os.environ.get(COMMIT_ENV, "unknown"), None
    return (head or "unknown"), bool(status.strip())


@cold_path
def package_versions() -> dict[str, str]:
    """Versions of torch, warp, mujoco, mujoco-warp (and ours), from package metadata.

    Falls back to an already-imported module's ``__version__`` (never imports a backend package here);
    ``"not installed"`` when neither is available.
    """
    versions = {}
    for dist, module_name in VERSIONED_PACKAGES.items():
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            module = sys.modules.get(module_name)
            versions[dist] = str(getattr(module, "__version__", "not installed"))
    return versions


@cold_path
def gpu_name(device: torch.device | str | None = None) -> str | None:
    """Name of the CUDA device the run uses (``None`` on a machine or device without CUDA)."""
    if not torch.cuda.is_available():
        return None
    device = torch.device(device) if device is not None else torch.device("cuda")
    if device.type != "cuda":
        return None
    return torch.cuda.get_device_name(device)


@cold_path
def provenance(device: torch.device | str | None) -> dict[str, Any]:
    """Fields of the summary that say where and with what the run happened."""
    commit, dirty = repo_commit()
    return {
        "commit": commit,
        "commit_dirty": dirty,
        "versions": package_versions(),
        "python_version": sys.version.split()[0],
        "gpu_name": gpu_name(device),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }


def utc_now() -> str:
    """Current UTC time as an ISO-8601 string (seconds)."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@cold_path
def json_safe(value: Any) -> Any:
    """Convert tensors, arrays, paths, enums, dataclasses and tuples into JSON-serializable values."""
    if isinstance(value, torch.Tensor):
        return json_safe(value.detach().cpu().tolist())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return json_safe(dataclasses.asdict(value))
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return json_safe(value.tolist())
    if isinstance(value, float) and value != value:  # NaN is not JSON; keep the fact, as text
        return "nan"
    if isinstance(value, float) and value in (float("inf"), float("-inf")):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "name") and hasattr(value, "value"):  # enums
        return str(value.name)
    return str(value)
