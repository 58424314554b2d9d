"""What a training run says while it runs: the progress line, blocks, scalars (TensorBoard, W&B), warnings, videos.

All of it is cold-path work between iterations: it reads device values (losses, episode statistics, overflow
counters) once per block. A compact block every ``training.log_every`` iterations (and at the first and
last), the progress line after every iteration (``trainrt.runner.progress``: in place on a terminal, a plain
line now and then elsewhere; it shows only numbers a block already read), a ``training.video_every`` video
outside every iteration's time. A contact or constraint buffer overflow is reported naming ``sim.nconmax`` /
``sim.njmax`` with a suggested value and listed in ``warnings`` (``training.fail_on_overflow=true`` raises
``ContactBufferOverflow``). A loss that went nan or infinite stops the run (``LearnerDiverged``): a learner's
networks do not come back from it.
"""

from __future__ import annotations

import math
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainrt.config import TrainConfig
from trainrt.hotpath import cold_path
from trainrt.runner.build import build_env
from trainrt.runner.console import Progress, format_iteration_block, format_progress_line
from trainrt.runner.failures import ExpectedRunFailure
from trainrt.runner.progress import ProgressDisplay, SmoothedEta
from trainrt.runner.scalar_sinks import TENSORBOARD_DIR_NAME, TensorBoardSink, open_scalar_sinks

__all__ = [
    "TENSORBOARD_DIR_NAME",
    "ContactBufferOverflow",
    "LearnerDiverged",
    "RunLog",
    "compile_note",
    "quiet_backend_diagnostics",
    "warm_up_line",
]


class ContactBufferOverflow(ExpectedRunFailure):
    """A contact or constraint buffer overflowed and ``training.fail_on_overflow=true``."""


class LearnerDiverged(ExpectedRunFailure):
    """The learner's losses went non-finite: its networks cannot recover, so the run stops."""


class RunLog:
    """The console and the scalar sinks of one run (rank 0 speaks; other ranks pass a silent ``log``).

    Args:
        cfg: the run's config.
        log: where console lines go.
        is_main: rank 0 (the only rank that opens scalar sinks).
        run_env_steps_per_iteration: env steps of one iteration over all ranks.
        terminal: a rich ``Console`` to draw the progress line on in place (None: plain lines through ``log``).
        elapsed_sec: seconds since the run's set-up began (the clock of ``training.time_limit_sec``).

    Attributes:
        warnings: every warning the run reported (overflows, learning warnings), for the summary.
        episode_statistics: the latest episode statistics of a full block, for the summary.
        sinks: the open scalar sinks (TensorBoard, W&B); empty once closed.
    """

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        log: Callable[[str], None],
        is_main: bool,
        run_env_steps_per_iteration: int,
        terminal: Any = None,
        elapsed_sec: Callable[[], float] = lambda: 0.0,
    ) -> None:
        self.cfg = cfg
        self.log = log
        self.is_main = is_main
        self.run_env_steps_per_iteration = run_env_steps_per_iteration
        self.warnings: list[str] = []
        self.episode_statistics: dict[str, float] = {}
        self.sinks: list[Any] = []
        self.elapsed_sec = elapsed_sec
        self.eta = SmoothedEta(cfg.algo.max_iterations, cfg.training.time_limit_sec)
        self.progress = ProgressDisplay(log, terminal)
        self._last_episode: tuple[float | None, float | None] = (None, None)
        self._parts: dict[str, Any] = {}
        self._overflow_reported: dict[str, int] = {}
        self._learning_reported: set[str] = set()
        self._block_iteration: int | None = None
        self._video_env: Any = None
        self.video_time_sec = 0.0

    @property
    def writer(self) -> Any:
        """The TensorBoard ``SummaryWriter`` while it is open (``None`` otherwise)."""
        return next((s.writer for s in self.sinks if isinstance(s, TensorBoardSink)), None)

    @cold_path
    def start(
        self,
        run_dir: Path,
        *,
        env: Any,
        agent: Any,
        replay: Any,
        collector: Any,
        video_cfg: TrainConfig,
        run_id: str = "",
    ) -> None:
        """What the run logs from (built in warm-up); open the scalar sinks (rank 0: ``training.tensorboard``,
        ``training.wandb``)."""
        self._parts = {
            "env": env,
            "agent": agent,
            "replay": replay,
            "collector": collector,
            "video_cfg": video_cfg,
        }
        self._run_dir = run_dir
        if self.is_main:
            self.sinks = open_scalar_sinks(self.cfg, run_dir, run_id)

    def announce_run(self, run_dir: Path, device: str, ranks: Any) -> None:
        """The set-up's first lines: where the run writes, what it trains, and over how many ranks."""
        cfg = self.cfg
        self.log(f"run directory: {run_dir.resolve()}")
        self.log(
            f"training {cfg.algo.name} on {cfg.task.name} with {cfg.sim.backend} ({device}), "
            f"{cfg.algo.num_envs} envs, {cfg.algo.max_iterations} iterations of "
            f"{cfg.algo.steps_per_iteration} steps + {cfg.algo.params.updates_per_iteration} updates"
        )
        if ranks.world_size > 1:
            self.log(
                f"data-parallel over {ranks.world_size} ranks ({ranks.backend}): "
                f"{cfg.algo.num_envs} envs per rank, {self.run_env_steps_per_iteration} env steps per iteration"
            )

    def start_session(self, resumed_from: int | None) -> None:
        """This process's iterations start now (after ``resumed_from`` iterations of a resumed run)."""
        self.eta.start(time.perf_counter(), resumed_from or 0)

    @cold_path
    def end_session(self) -> None:
        """The iterations are over (or stopped): take the progress line off the terminal (idempotent)."""
        self.progress.close()

    @cold_path
    def close(self, failed: bool = False) -> None:
        """Take the progress line off and close the scalar sinks (idempotent); ``failed``: the run did not
        complete (an error or a stop), which a sink may record."""
        self.progress.close()
        sinks, self.sinks = self.sinks, []
        for sink in sinks:
            sink.close(failed)

    def _progress(self, iteration: int) -> Progress:
        """Where the run stands after ``iteration`` (its end counted in the smoothed rate)."""
        self.eta.iteration_ended(iteration, time.perf_counter())
        elapsed = self.elapsed_sec()
        eta, by_time = self.eta.eta(iteration, elapsed)
        return Progress(
            title=f"{self.cfg.algo.name} {self.cfg.task.name}",
            iteration=iteration,
            max_iterations=self.cfg.algo.max_iterations,
            env_steps_per_sec=self.eta.iterations_per_sec * self.run_env_steps_per_iteration,
            elapsed_sec=elapsed,
            eta_sec=eta,
            eta_by_time_limit=by_time,
            episode_length=self._last_episode[0],
            episode_return=self._last_episode[1],
        )

    # --- a full block --------------------------------------------------------------------------------------

    @cold_path
    def iteration_block(
        self,
        iteration: int,
        collect_sec: float,
        learn_sec: float,
        elapsed_sec: float,
    ) -> None:
        """Console block and scalars of one iteration (reads device values: cold path)."""
        env, agent, collector = self._parts["env"], self._parts["agent"], self._parts["collector"]
        self._check_overflow(iteration)
        self._check_learning(iteration)
        losses = _scalars(agent.losses())
        episode = {**collector.episode_summary(), **env.episode_stats()}
        self.episode_statistics.update(episode)
        if "Train/mean_reward" in episode:
            length = episode.get("Episode/length", episode.get("Train/mean_episode_length"))
            self._last_episode = (length, episode["Train/mean_reward"])
        self.log(
            format_iteration_block(
                self._progress(iteration),
                episode=episode,
                losses=losses,
                iteration_sec=elapsed_sec,
                collect_sec=collect_sec,
                learn_sec=learn_sec,
                total_env_steps=self.run_env_steps_per_iteration * iteration,
            )
        )
        self._block_iteration = iteration
        rate = self.run_env_steps_per_iteration / elapsed_sec if elapsed_sec > 0 else 0.0
        scalars = {f"Loss/{name}": value for name, value in losses.items()}
        scalars |= {
            "Perf/env_steps_per_sec": rate,
            "Perf/collect_time_sec": collect_sec,
            "Perf/learn_time_sec": learn_sec,
            "Perf/iteration_time_sec": elapsed_sec,
        }
        scalars |= {(name if "/" in name else f"Episode/{name}"): value for name, value in episode.items()}
        self._add_scalars(scalars, iteration)

    def _add_scalars(self, scalars: dict[str, float], step: int) -> None:
        """The same scalars at the same step to every open sink."""
        for sink in self.sinks:
            sink.add_scalars(scalars, step)

    @cold_path
    def check_losses(self, iteration: int) -> None:
        """Raise ``LearnerDiverged`` when a loss of the agent is nan or infinite (reads them from the device).

        The runner calls it inside the iteration, before the ranks' boundary, so every rank stops alike."""
        losses = _scalars(self._parts["agent"].losses())
        bad = {name: value for name, value in losses.items() if not math.isfinite(value)}
        if bad:
            named = ", ".join(f"{name}={value}" for name, value in bad.items())
            raise LearnerDiverged(
                f"iteration {iteration}: the learner's losses went non-finite ({named}); its networks cannot "
                "recover, so the run stops here. Evaluate or resume from the last checkpoint before it. The usual "
                "causes are physics that blew up (see the blown-up resets and buffer-overflow warnings above) or "
                "a learning rate too high"
            )

    @cold_path
    def _check_overflow(self, iteration: int) -> None:
        """Report contact/constraint buffer overflows new since the last check (reads device counters)."""
        diag = quiet_backend_diagnostics(self._parts["env"].backend)
        grown = {k: v for k, v in diag.overflow.items() if v > self._overflow_reported.get(k, 0)}
        if not grown:
            return
        self._overflow_reported.update(grown)
        num_envs = max(diag.num_envs, 1)
        advice = []
        if grown.get("contacts", 0) or any("contact" in k for k in grown):
            wanted = max(2 * diag.nconmax, math.ceil(1.5 * diag.contacts / num_envs))
            advice.append(f"sim.nconmax={wanted} (now {diag.nconmax})")
        if grown.get("constraints", 0) or any("constraint" in k or "efc" in k for k in grown):
            wanted = max(2 * diag.njmax, math.ceil(1.5 * diag.max_constraints))
            advice.append(f"sim.njmax={wanted} (now {diag.njmax})")
        worlds = ", ".join(f"{k}: {v} of {diag.num_envs} worlds" for k, v in grown.items())
        message = (
            f"iteration {iteration}: {diag.backend} buffer overflow ({worlds}) "
            f"(contacts or constraint rows beyond the buffer are dropped, so physics is wrong there); "
            f"raise {' and '.join(advice) or 'sim.nconmax / sim.njmax'}"
        )
        if message not in self.warnings:
            self.warnings.append(message)
        if self.cfg.training.fail_on_overflow:
            raise ContactBufferOverflow(message + " (training.fail_on_overflow=true)")
        self.log(f"warning: {message}")

    @cold_path
    def _check_learning(self, iteration: int) -> None:
        """Report each kind of the agent's `learning_warnings` the first time it appears."""
        found = self._parts["agent"].learning_warnings(self._parts["replay"].view_return_statistics())
        for kind, text in found.items():
            if kind in self._learning_reported:
                continue
            self._learning_reported.add(kind)
            message = f"iteration {iteration}: {text}"
            self.warnings.append(message)
            self.log(f"warning: {message}")

    # --- between iterations: the compact console line and videos (outside every iteration's time) ----------

    @cold_path
    def between_iterations(self, iteration: int) -> None:
        """The progress line after an iteration, and the ``video_every`` video.

        Runs after the iteration's timing is appended, so its time is in no iteration (and never in
        ``tail_env_steps_per_sec``); a video's own time is printed and written as ``Perf/video_time_sec``.
        The line shows the episode length and return of the last block: it reads no device value.
        """
        training = self.cfg.training
        if self.is_main:
            line = format_progress_line(self._progress(iteration))
            self.progress.show(line, block_printed=self._block_iteration == iteration)
        if training.video_every and iteration % training.video_every == 0 and self.is_main:
            self._record_training_video(iteration)

    @cold_path
    def _record_training_video(self, iteration: int) -> None:
        """A ``training.video_seconds`` video of the current deterministic policy on a separate one-env env."""
        from trainrt.viz.record import VideoOptions, record_policy_video
        from trainrt.viz.video import write_tensorboard_gif

        started = time.perf_counter()
        if self._video_env is None:
            self._video_env = build_env(self._parts["video_cfg"], num_envs=1)
        path = self._run_dir / "videos" / f"iter_{iteration:06d}.mp4"
        options = VideoOptions(
            seconds=self.cfg.training.video_seconds, renderer=self.cfg.training.video_renderer
        )
        result = record_policy_video(self._video_env, self._parts["agent"], path, options, keep_preview=24)
        if self.writer is not None and result.preview:
            write_tensorboard_gif(self.writer, "Video/policy", result.preview, fps=8.0, step=iteration)
        spent = time.perf_counter() - started
        self.video_time_sec += spent
        self._add_scalars({"Perf/video_time_sec": spent}, iteration)
        self.log(
            f"video: {path} ({result.frames} frames, {result.renderer} renderer) in {spent:.1f}s, "
            "outside the throughput window"
        )


# --- set-up's and warm-up's lines --------------------------------------------------------------------------------


@cold_path
def replay_line(replay: Any) -> str:
    """The console line on the replay set-up allocated: its envs, rows per env, size and device."""
    size_gib = replay.memory_bytes() / 2**30
    rows = f"{replay.num_envs} envs x {replay.capacity_per_env} steps per env"
    return f"replay: {rows}, {size_gib:,.2f} GiB on {replay.device}"


@cold_path
def warm_up_line(
    warmup_time_sec: float,
    warmup_env_steps: int,
    collector: Any,
    agent: Any,
    schedule: Any,
    startup_sec: float | None = None,
) -> str:
    """The console line that ends warm-up: its time (and, with ``startup_sec``, the process's time before the
    run's clock started, the time since the command), and how the collector, learner and schedule run."""
    collector_graph = collector.diagnostics()
    learner_graph = agent.update_diagnostics()
    schedule = schedule.diagnostics()
    overlap = (
        "overlapped (learner one iteration behind the data)"
        if schedule["overlap_enabled"]
        else f"sequential ({schedule['overlap_fallback_reason']})"
    )
    return (
        f"warm-up done in {warmup_time_sec:.1f}s ({warmup_env_steps} env steps, outside the "
        "throughput window"
        + ("" if startup_sec is None else f"; {startup_sec + warmup_time_sec:.1f}s since the command started")
        + f"); collector: {_graph_status(collector_graph)}; "
        f"learner: {_graph_status(learner_graph)}"
        + compile_note(learner_graph)
        + (
            ""
            if collector_graph.get("step_math_compiled")
            else f"; step math eager ({collector_graph.get('step_math_fallback_reason')})"
        )
        + f"; schedule: {overlap}"
        + _partition_note(schedule)
    )


@cold_path
def _partition_note(schedule: dict[str, Any]) -> str:
    """The warm-up line's note on ``training.learner_sms``: none when unset."""
    if schedule.get("learner_sms") is None:
        return ""
    if schedule["learner_partitioned"]:
        return f", learner held to {schedule['learner_sms']} multiprocessors"
    return f", learner on the whole GPU ({schedule['learner_partition_fallback_reason']})"


@cold_path
def compile_note(learner: dict[str, Any]) -> str:
    """The warm-up line's note on the learner's compiled parts: none when all compiled, else which did not."""
    reason = learner.get("compile_fallback_reason")
    if not learner.get("compile_enabled"):
        return f" [uncompiled: {reason}]"
    return f" [parts uncompiled: {reason}]" if reason else ""


def _graph_status(facts: dict[str, Any]) -> str:
    """``graph`` or ``eager (<reason>)`` from a diagnostics dict."""
    enabled = facts.get("graph_enabled", facts.get("update_graph_enabled", False))
    if enabled:
        return "CUDA graph"
    reason = (
        facts.get("eager_fallback_reason")
        or facts.get("update_fallback_reason")
        or facts.get("disabled_by")
        or "unknown reason"
    )
    return f"eager ({reason})"


@cold_path
def quiet_backend_diagnostics(backend: Any) -> Any:
    """The backend's diagnostics without its own overflow warning (the runner reports overflows itself)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*buffer overflow", category=RuntimeWarning)
        return backend.diagnostics()


@cold_path
def _scalars(tensors: dict[str, torch.Tensor]) -> dict[str, float]:
    """Read device scalars with one transfer (cold path)."""
    if not tensors:
        return {}
    values = torch.stack([t.detach().float().reshape(()) for t in tensors.values()]).cpu().tolist()
    return dict(zip(tensors, values))
