"""The off-policy runner: warm-up, then iterations of N collector steps + M learner updates, then the summary.

Lifecycle of ``OffPolicyRunner.run()``:

1. **Set-up** (cold): resolve the run directory, write ``config.json`` and ``manifest.json``, build env,
   agent and replay buffer, restore the last checkpoint when ``training.resume`` is set.
2. **Warm-up**, all before iteration 1 and outside every throughput window: reset, prefill the replay for
   ``learning_starts`` vector steps (random actions; the restored policy on resume), capture the collector
   graph, capture the learner graph, run the first update, synchronize. Each phase says so on the console as
   it starts (a fresh machine compiles for minutes here) and its seconds go to the summary's
   ``warmup_phases_sec``; the compilers' caches (``$TRAINRT_CACHE_DIR``, see ``compile_cache``) are
   pointed (in ``__init__``) before anything compiles and counted before and after warm-up (the summary's
   ``compile_cache``). ``warm_up.WarmUp`` does this stage, and keeps the collector and schedule it builds.
3. **Iterations** 1..``max_iterations``: ``steps_per_iteration`` collector steps (graph replays of K steps),
   ``updates_per_iteration`` learner updates, one synchronization at the boundary, then cold-path work
   (console block and scalars every ``log_every`` iterations, checkpoint every ``checkpoint_every``).
   An iteration's wall time spans all of it.
4. **End**: last checkpoint, optional evaluation rollout and ONNX export, ``run_summary.json``.

Ctrl-C, SIGTERM and SIGHUP save a checkpoint of the last completed iteration and write a summary with
status ``interrupted`` naming the signal (``RunInterrupted`` carries the exit code, 128 + the signal number;
a second Ctrl-C abandons that checkpoint, never the summary);
any exception writes status ``failed`` with the error text and is re-raised (a write the filesystem refuses,
disk full or a size limit, as a one-line ``WriteFailure`` naming the file and the free space). While the run
runs, the summary says ``running`` and is rewritten at every checkpoint and at most every
``RUNNING_SUMMARY_EVERY_SEC`` at log time, so a run killed without warning (``kill -9``) still leaves the
truth on disk.

The run owns its directory (``trainrt.runner.run_dir``): a lock while it runs, a refusal of a directory
holding another run's files (unless resuming it, or ``training.overwrite=true``, which deletes only what
trainrt wrote and never the run being resumed), and a run id in every checkpoint. A contact or constraint
buffer overflow is reported at log time naming ``sim.nconmax`` / ``sim.njmax`` with a suggested value, and
listed in the summary's ``warnings`` (``training.fail_on_overflow=true`` fails the run instead).

Launched as several ranks (``torchrun`` or ``trainrt train --gpus N``; see ``trainrt.runner.distributed``),
every rank runs this same lifecycle on its own envs, device and replay shard; gradients are averaged
across ranks, every iteration ends with a cold-path agreement that all ranks are fine (an error on one
fails all), and rank 0 alone writes the config, manifest, logs, TensorBoard, checkpoints, evaluation and
export. Rank 0's ``run_summary.json`` sums env steps over ranks and lists each rank's own figures; rank
``r`` > 0 writes its summary under ``ranks/rank_<r>/``.

The runner holds the run's parts and its loop; each other concern is a small object of its own module:

- ``stop_signals.StopSignals``: the handlers of Ctrl-C, SIGTERM and SIGHUP, and when they stop the run;
- ``run_dir.claim_run_dir``: the run directory's lock, and the refusal (or overwrite) of a used one;
- ``pre_run_checks``: the checkpoint to resume and a probe of the config, before anything is written
  (with ``preflight.check_memory_fits``);
- ``learner_precompile.LearnerPrecompile``: the helper process that compiles the learner while the envs
  build (unless inductor's cache holds this learner: ``TRAINRT_PRECOMPILE_LEARNER``), and what it did;
- ``warm_up.WarmUp``: warm-up's phases, the collector and iteration schedule it builds, and what it measured
  (its seconds and env steps, each phase's seconds, the compile caches);
- ``checkpointing.RunCheckpoints``: writing checkpoints, after a stop too, and restoring one on resume;
- ``run_log.RunLog``: the progress line and blocks (``console``, ``progress``), the scalar sinks (TensorBoard,
  optional W&B: ``scalar_sinks``), warnings and videos;
- ``summary_writer.RunSummaryWriter``: ``run_summary.json`` and the closing lines that say where things are.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from trainrt.config import TrainConfig
from trainrt.hotpath import cold_path
from trainrt.runner.build import (
    build_agent,
    build_env,
    build_replay,
    env_metadata,
    quiet_backend_log,
    resolve_device,
)
from trainrt.runner.checkpointing import (
    RunCheckpoints,
    checkpoint_payload,
)
from trainrt.runner.collector import Collector
from trainrt.runner.compile_cache import cache_contents, point_compile_caches, resolve_cache_dir
from trainrt.runner.distributed import (
    LaunchEnv,
    gather_rank_figures,
    injected_failure,
    make_ranks,
    rank_config,
)
from trainrt.runner.export import export_trained_policy
from trainrt.runner.iteration_clock import IterationClock
from trainrt.runner.learner_precompile import (
    LearnerPrecompile,
    learner_key,
    learner_marked,
    precompile_refusal,
)
from trainrt.runner.manifest import write_env_record, write_manifest, write_resolved_config
from trainrt.runner.play import evaluate_policy
from trainrt.runner.pre_run_checks import load_resume_checkpoint, probe_config, run_id_to_continue
from trainrt.runner.preflight import check_memory_fits, free_device_bytes
from trainrt.runner.progress import terminal_console, terminal_printer
from trainrt.runner.run_dir import (
    RANKS_DIR_NAME,
    RunDirLock,
    check_run_dir_usable,
    claim_run_dir,
    new_run_id,
    point_latest_at,
)
from trainrt.runner.run_log import TENSORBOARD_DIR_NAME, ContactBufferOverflow, RunLog, replay_line
from trainrt.runner.run_log import compile_note as _compile_note
from trainrt.runner.scalar_sinks import check_scalar_sinks
from trainrt.runner.schedule import IterationSchedule
from trainrt.runner.stop_signals import RunInterrupted, StopSignals, raise_stop
from trainrt.runner.summary import (
    SUMMARY_FILE_NAME,
    IterationTiming,
    RankFigures,
    RunSummary,
)
from trainrt.runner.summary_writer import RunSummaryWriter
from trainrt.runner.warm_up import WarmUp

__all__ = [
    "RANKS_DIR_NAME",
    "TENSORBOARD_DIR_NAME",
    "ContactBufferOverflow",
    "OffPolicyRunner",
    "RunInterrupted",
    "_compile_note",
    "default_run_dir",
]


@cold_path
def default_run_dir(cfg: TrainConfig) -> Path:
    """``runs/<algo>_<task>_<sim>_<UTC timestamp>_<4 hex digits>`` under the current directory: the digits
    tell apart runs started in the same second."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path("runs") / f"{cfg.algo.name}_{cfg.task.name}_{cfg.sim.backend}_{stamp}_{uuid.uuid4().hex[:4]}"


class OffPolicyRunner:
    """Trains ``cfg.algo`` on ``cfg.task`` and writes the run directory (see the module docstring).

    Args:
        cfg: the resolved, validated config.
        log: where console lines go (``print`` by default: then, on a terminal, the progress line is
            redrawn in place under them; with a ``log`` given, it is a plain line now and then).
        manifest: extra facts for ``manifest.json`` (preset name, overrides, ...).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        *,
        log: Callable[[str], None] | None = None,
        manifest: dict[str, Any] | None = None,
    ) -> None:
        self.cfg = cfg
        # On a terminal, the run's lines print above the progress line it redraws in place.
        terminal = terminal_console() if log is None else None
        self.log = log or (terminal_printer(terminal) if terminal else lambda line: print(line, flush=True))
        # An enabled scalar sink whose package is missing is a usage error, before anything is written.
        check_scalar_sinks(cfg)
        # So is a $TRAINRT_CACHE_DIR that is a file or cannot be written (trainrt.runner.compile_cache).
        resolve_cache_dir()
        self.manifest = dict(manifest or {})
        resume = cfg.training.resume
        if resume is not None and LaunchEnv.from_environ().world_size > 1:
            raise ValueError(
                "training.resume is not supported with several ranks yet: resume with one process"
            )
        distributed = cfg.training.distributed
        # SingleProcess (no-op collectives) unless a launcher set WORLD_SIZE > 1.
        self.ranks = make_ranks(
            resolve_device(cfg),
            backend=distributed.backend,
            timeout_sec=distributed.timeout_sec,
            check_every=distributed.check_every,
        )
        run_dir = cfg.training.run_dir if cfg.training.run_dir is not None else resume
        self._default_named = run_dir is None  # a new run under runs/: runs/latest points at it
        run_dir = Path(run_dir) if run_dir is not None else default_run_dir(cfg)
        self.run_dir = Path(self.ranks.shared_object(str(run_dir)))  # rank 0's default run directory
        check_run_dir_usable(self.run_dir)
        self.summary_path = self.run_dir / SUMMARY_FILE_NAME
        # Every compiler's cache below $TRAINRT_CACHE_DIR before anything compiles, and what they hold now.
        quiet_backend_log(cfg.sim.backend)  # before Warp initializes: no greeting, no line per module
        cache_root = point_compile_caches(cfg.sim.backend)
        caches_before = cache_contents(cfg.sim.backend)
        # What this rank builds from: its own device and seed (the config itself for one process).
        self.device, self.rank_cfg = rank_config(cfg, self.ranks, resolve_device(cfg))
        if self.ranks.world_size > 1:
            self.manifest["distributed"] = self.ranks.facts()
            if not self.ranks.is_main:
                self.summary_path = (
                    self.run_dir / RANKS_DIR_NAME / f"rank_{self.ranks.rank}" / SUMMARY_FILE_NAME
                )
                self.log = lambda line: None  # rank 0 speaks for the run
        # The run's parts (built in set-up and warm-up) and what it measured.
        self.env: Any = None
        self.agent: Any = None
        self.replay: Any = None
        self.env_meta: dict[str, Any] = {}
        self.timings: list[IterationTiming] = []
        self.per_rank: list[RankFigures] = []
        self.learner_precompile: LearnerPrecompile | None = None  # started in set-up
        self.resumed_from_iteration: int | None = None
        self.final_eval: dict[str, float] | None = None
        self.onnx_path: str | None = None
        self.time_limit_reached = False  # the run ended at training.time_limit_sec
        # Its concerns, each an object of its own module.
        self.signals = StopSignals()
        self.warm_up = WarmUp(  # builds the collector and schedule, and measures warm-up
            cfg,
            self.device,
            log=self.log,
            elapsed_sec=self._elapsed_sec,
            cache_root=cache_root,
            caches_before=caches_before,
        )
        self.checkpoints = RunCheckpoints(self.run_dir, log=self.log)
        self.run_log = RunLog(
            cfg,
            log=self.log,
            is_main=self.ranks.is_main,
            run_env_steps_per_iteration=self.run_env_steps_per_iteration,
            terminal=terminal if self.ranks.is_main else None,
            elapsed_sec=self._elapsed_sec,
        )
        self.summary_writer = RunSummaryWriter(self, self.summary_path)
        self._lock: RunDirLock | None = None
        # The run's clock (warm-up time, training.time_limit_sec) starts with the checks of its input below.
        self._setup_started = time.perf_counter()
        # A resume that cannot work is a usage error: raised here, before the run (and its summary) starts.
        self._resume_checkpoint = (
            load_resume_checkpoint(Path(resume), cfg, self.log) if resume is not None else None
        )
        # So is a config that needs more memory than the device has free (estimated, nothing allocated yet).
        self.memory_estimate = check_memory_fits(self.rank_cfg)
        # So is input the env or agent cannot be built from (a motion file, an observation group, other networks).
        self._probed_sizes = self._probe_config(self._resume_checkpoint)
        cached = learner_marked(
            caches_before["inductor"][0], learner_key(cfg, *self._probed_sizes, self.device)
        )
        self._precompile_refusal = precompile_refusal(cfg, self.device, self.ranks.world_size, cached)
        self.run_id = (
            run_id_to_continue(self._resume_checkpoint, resume) if resume is not None else new_run_id()
        )
        # So is a run directory that is in use or holds another run: refused before anything is written.
        if self.ranks.is_main:
            self._lock = claim_run_dir(
                self.run_dir, self.run_id, resume=resume, overwrite=cfg.training.overwrite, log=self.log
            )
            if self._default_named:
                point_latest_at(self.run_dir, log=self.log)

    @property
    def collector(self) -> Collector | None:
        """The collector, built in warm-up (as soon as it exists: a stop there reports and saves it)."""
        return self.warm_up.collector

    @property
    def schedule(self) -> IterationSchedule | None:
        """The iteration schedule, built at the end of warm-up."""
        return self.warm_up.schedule

    @property
    def completed_iterations(self) -> int:
        """Iterations completed so far, including those of the run this one resumed."""
        return len(self.timings)

    @property
    def env_steps_per_iteration(self) -> int:
        """Env steps of one iteration on this rank: vector steps per iteration times num_envs."""
        return self.cfg.algo.steps_per_iteration * self.cfg.algo.num_envs

    @property
    def run_env_steps_per_iteration(self) -> int:
        """Env steps of one iteration summed over ranks (every rank steps the same number)."""
        return self.env_steps_per_iteration * self.ranks.world_size

    # --- the run -------------------------------------------------------------------------------------------

    @cold_path
    def run(self) -> RunSummary:
        """Set up, warm up, train, finish; always leaves a validated ``run_summary.json`` behind."""
        self.signals.install()
        completed = False
        try:
            try:
                try:
                    self._set_up()
                    self._warm_up()
                finally:  # a learner helper still running here: set-up or warm-up raised
                    self._stop_learner_helper()
                self._train()
                self._finish()
                completed = True
            except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM or SIGHUP: save what completed, then stop
                stop = self.signals.first_stop(exc)
                error = self.checkpoints.save_on_interrupt(
                    stop,
                    self.signals,
                    self.completed_iterations,
                    built=self.agent is not None,
                    save=self._save_checkpoint_if_new,
                )
                with self.signals.ignored():  # signals are ignored while the summary is written
                    self.summary_writer.write("interrupted", error)
                if stop is exc:
                    raise
                raise stop from exc
            except BaseException as exc:
                raised = self.summary_writer.write_failed(exc)
                if raised is exc:
                    raise
                raise raised from exc
            finally:
                self.run_log.close(failed=not completed)
            summary = self.summary_writer.write("completed", None)
        finally:
            self.signals.restore()
            self._release_run_dir()
        self.ranks.close()
        return summary

    @cold_path
    def _train(self) -> None:
        """Iterations from the first not yet completed to ``algo.max_iterations`` (or the time limit)."""
        assert self.collector is not None
        clock = IterationClock(self.device)
        self.run_log.start_session(self.resumed_from_iteration)
        first = self.completed_iterations + 1
        try:
            with self.signals.at_iteration_ends():
                self._iterate(first, clock)
        finally:
            self.run_log.end_session()
        if self.ranks.world_size > 1:  # every rank's own figures, and the check that their weights agree
            self.per_rank = gather_rank_figures(
                self.ranks, self.agent, self.rank_cfg, self.timings, device=str(self.env.device)
            )
        raise_stop(self.signals.request)  # one that came after the last iteration's agreement

    @cold_path
    def _iterate(self, first: int, clock: IterationClock) -> None:
        """Iterations ``first`` to ``algo.max_iterations``; a stop signal is honoured after each one."""
        cfg = self.cfg
        agent, schedule, ranks = self.agent, self.schedule, self.ranks
        assert schedule is not None
        for iteration in range(first, cfg.algo.max_iterations + 1):
            clock.start()
            local_error: Exception | None = None
            try:
                schedule.run(clock)  # steps_per_iteration collector steps, updates_per_iteration updates
                collect_sec, learn_sec, elapsed_sec = clock.synchronize_split()
                injected_failure(ranks.rank, iteration)
                if iteration % cfg.training.log_every == 0 or iteration in (first, cfg.algo.max_iterations):
                    self.run_log.check_losses(iteration)  # a diverged learner stops every rank alike
            except Exception as exc:  # every rank hears of it at the boundary below, then all stop
                local_error = exc
            limit = cfg.training.time_limit_sec
            time_up = limit is not None and self._elapsed_sec() >= limit
            # Every rank learns of any rank's error, stop request or time limit here; all stop alike.
            boundary = ranks.end_iteration(iteration, local_error, self.signals.request, time_up)
            ranks.check_agreement(agent, iteration)
            is_last = iteration == cfg.algo.max_iterations or boundary.time_up
            if iteration % cfg.training.log_every == 0 or is_last or iteration == first:
                self.run_log.iteration_block(iteration, collect_sec, learn_sec, elapsed_sec)
                if self.summary_writer.running_due():
                    self.summary_writer.write_running()
            record = schedule.records[-1]  # which policy acted, which rows the learner saw
            stamp = {
                "acting_policy_version": record.acting_policy_version,
                "learner_view_steps": record.learner_view_steps,
            }
            self.timings.append(self._iteration_timing(clock, iteration, stamp))
            if (cfg.training.checkpoint_every and iteration % cfg.training.checkpoint_every == 0) or is_last:
                self._save_checkpoint()  # reads self.timings (the summary it writes includes this iteration)
                # The checkpoint's own write time belongs to this iteration too: re-time it now.
                self.timings[-1] = self._iteration_timing(clock, iteration, stamp)
            self._after_iteration(iteration)
            raise_stop(boundary.stop_signal)
            if boundary.time_up:
                self.time_limit_reached = iteration < cfg.algo.max_iterations
                if self.time_limit_reached:
                    self.log(
                        f"training.time_limit_sec={cfg.training.time_limit_sec:g} reached after iteration "
                        f"{iteration} of {cfg.algo.max_iterations}: finishing the run here"
                    )
                break

    @cold_path
    def _after_iteration(self, iteration: int) -> None:
        """Outside every iteration's time: the compact console line of an iteration without a block, videos."""
        self.run_log.between_iterations(iteration)

    def _iteration_timing(
        self, clock: IterationClock, iteration: int, stamp: dict[str, Any]
    ) -> IterationTiming:
        """Iteration ``iteration``'s timing as of now, with its policy ``stamp`` and the seconds since set-up."""
        finished = clock.finish(iteration, self.env_steps_per_iteration)
        return finished.model_copy(update={**stamp, "elapsed_sec": self._elapsed_sec()})

    def _elapsed_sec(self) -> float:
        """Seconds since this process began the run's set-up."""
        return time.perf_counter() - self._setup_started

    # --- before the loop -----------------------------------------------------------------------------------

    @cold_path
    def _probe_config(self, checkpoint: dict[str, Any] | None) -> tuple[dict[str, int], int]:
        """Build this config's env and agent on the CPU before anything is written (``probe_config``): the
        observation group sizes and action count."""
        return probe_config(self.cfg, checkpoint)

    @cold_path
    def _release_run_dir(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    @cold_path
    def _set_up(self) -> None:
        """Run directory, resolved config, env, agent, replay; restore the checkpoint on resume."""
        cfg, ranks = self.cfg, self.ranks
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if ranks.is_main:
            write_resolved_config(self.run_dir, cfg)
            write_manifest(self.run_dir, device=self.device, run_id=self.run_id, **self.manifest)
        self.run_log.announce_run(self.run_dir, self.device, ranks)
        rank_cfg = self.rank_cfg
        torch.manual_seed(rank_cfg.training.seed)
        obs_dims, num_actions = self._probed_sizes
        helper = self.learner_precompile = LearnerPrecompile.start(
            rank_cfg, obs_dims, num_actions, self._precompile_refusal
        )
        if helper.running:
            self.log(f"set-up: {helper.started_note} ... {self._elapsed_sec():.1f}s")
        self._build_env_and_agent(rank_cfg)
        if helper.running and not helper.room_beside(self.memory_estimate, free_device_bytes(self.device)):
            self.log(f"set-up: {helper.wait_note()} ... {self._elapsed_sec():.1f}s")  # its memory freed first
        self.replay = build_replay(rank_cfg, self.env)
        self.log(replay_line(self.replay))
        ranks.attach_agent(self.agent)  # rank 0's initial weights everywhere; gradients averaged
        if cfg.training.save_replay:
            size_mib = self.replay.memory_bytes() / 2**20
            self.log(f"training.save_replay=true: every checkpoint holds the replay ({size_mib:,.1f} MiB)")
        if self._resume_checkpoint is not None:
            resumed = self.checkpoints.restore(
                self._resume_checkpoint, env=self.env, agent=self.agent, replay=self.replay
            )
            self.timings, self.resumed_from_iteration = resumed.timings, resumed.iteration
        if ranks.is_main:
            self.summary_writer.write("running", None)

    @cold_path
    def _build_env_and_agent(self, rank_cfg: TrainConfig) -> None:
        """The env and the agent (the run's tables and manifest written)."""
        if rank_cfg.sim.backend == "mjwarp":
            self.log(
                "set-up: building the envs; on a fresh machine Warp compiles the physics kernels here, on CUDA "
                f"beside torch compiling the step math (tens of seconds the first time) ... {self._elapsed_sec():.1f}s"
            )
        self.env = build_env(rank_cfg)
        self.log(self.env.summary())
        if self.ranks.is_main:
            write_env_record(self.run_dir, self.env, run_id=self.run_id, facts=self.manifest, log=self.log)
        self.env_meta = env_metadata(self.env)
        self.agent = build_agent(rank_cfg, self.env.obs_dims, self.env.num_actions, self.env.device)

    @cold_path
    def _warm_up(self) -> None:
        """Everything before iteration 1 (``warm_up.WarmUp``); the run log starts in its last phase."""
        start_log = partial(self.run_log.start, self.run_dir, video_cfg=self.rank_cfg, run_id=self.run_id)
        parts = (self.env, self.agent, self.replay, self.checkpoints)
        resumed = self.resumed_from_iteration is not None
        self.warm_up.run(*parts, resumed=resumed, start_log=start_log, learner_helper=self.learner_precompile)

    @cold_path
    def _stop_learner_helper(self) -> None:
        if self.learner_precompile is not None:
            self.learner_precompile.stop()

    # --- after the loop ------------------------------------------------------------------------------------

    @cold_path
    def _finish(self) -> None:
        """Last checkpoint (if the loop did not just write it), evaluation rollout, ONNX export."""
        cfg = self.cfg
        self._save_checkpoint_if_new()
        self.agent.publish_policy()  # evaluate the weights after the last iteration's updates
        if not self.ranks.is_main:  # rank 0 evaluates and exports the (identical) policy
            return
        if cfg.training.final_eval:
            self.log(f"final evaluation: deterministic rollout of {cfg.training.play_steps} steps")
            self.final_eval = evaluate_policy(self.env, self.agent, cfg.training.play_steps)
            self.log("final evaluation: " + ", ".join(f"{k} {v:.4g}" for k, v in self.final_eval.items()))
        if cfg.training.export_onnx:
            result = export_trained_policy(
                self.agent,
                self.env_meta,
                self.run_dir,
                algo=cfg.algo.name,
                task=cfg.task.name,
                iteration=self.completed_iterations,
            )
            self.onnx_path = result["path"]
            checked = f"checked with onnxruntime (max diff {result['max_abs_diff']:.2g})"
            self.log(
                f"exported {self.onnx_path}: " + (checked if result["onnxruntime_checked"] else "unchecked")
            )

    # --- checkpoints ---------------------------------------------------------------------------------------

    @cold_path
    def _save_checkpoint(self) -> None:
        """Write the checkpoint of the completed iterations (rank 0 only: weights are identical) and the summary."""
        if not self.ranks.is_main:
            return
        payload = checkpoint_payload(
            self.cfg,
            env=self.env,
            agent=self.agent,
            replay=self.replay,
            collector=self.collector,
            timings=self.timings,
            env_meta=self.env_meta,
            run_id=self.run_id,
        )
        self.checkpoints.save(self.completed_iterations, payload)
        self.summary_writer.write_running()

    @cold_path
    def _save_checkpoint_if_new(self) -> None:
        """Save unless the last checkpoint already holds the completed iterations (or nothing was built)."""
        if self.agent is None or self.env is None or self.checkpoints.holds(self.completed_iterations):
            return
        self._save_checkpoint()
