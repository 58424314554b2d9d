"""The off-policy runner: warm-up, then iterations of N collector steps + M learner updates, then the summary.

Lifecycle of ``OffPolicyRunner.run()``:

1. **Set-up** (cold): resolve the run directory, write ``config.json`` and ``manifest.json``, build env,
   agent and replay buffer, restore the last checkpoint when ``training.resume`` is set.
2. **Warm-up**, all before iteration 1 and outside every throughput window: reset, prefill the replay for
   ``learning_starts`` vector steps (random actions; the restored policy on resume), capture the collector
   graph, capture the learner graph, run the first update, synchronize.
3. **Iterations** 1..``max_iterations``: ``steps_per_iteration`` collector steps (graph replays of K steps),
   ``updates_per_iteration`` learner updates, one synchronization at the boundary, then cold-path work
   (console block and TensorBoard every ``log_every`` iterations, checkpoint every ``checkpoint_every``).
   An iteration's wall time spans all of it.
4. **End**: last checkpoint, optional evaluation rollout and ONNX export, ``run_summary.json``.

Ctrl-C, SIGTERM and SIGHUP save a checkpoint of the last completed iteration and write a summary with
status ``interrupted`` naming the signal (``RunInterrupted`` carries the exit code, 128 + the signal number;
a second Ctrl-C abandons that checkpoint, never the summary);
any exception writes status ``failed`` with the error text and is re-raised (a write the filesystem refuses,
disk full or a size limit, as a one-line ``WriteFailure`` naming the file and the free space). While the run
runs, the summary says ``running`` and is rewritten at every checkpoint and at most every
``_RUNNING_SUMMARY_EVERY_SEC`` at log time, so a run killed without warning (``kill -9``) still leaves the
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
"""

from __future__ import annotations

import math
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainrt.config import TrainConfig
from trainrt.hotpath import cold_path
from trainrt.runner.build import (
    build_agent,
    build_env,
    build_replay,
    env_cfg_summary,
    env_metadata,
    resolve_device,
)
from trainrt.runner.checkpoint import (
    capture_rng_states,
    check_motion_clips,
    load_agent_weights,
    restore_rng_states,
    save_checkpoint,
)
from trainrt.runner.collector import Collector
from trainrt.runner.console import format_iteration_block
from trainrt.runner.distributed import (
    LaunchEnv,
    RankFailure,
    diverged_ranks,
    injected_failure,
    make_ranks,
    parameter_checksum,
)
from trainrt.runner.export import ONNX_FILE_NAME, export_metadata, export_policy_onnx, policy_obs_group
from trainrt.runner.failures import ExpectedRunFailure, WriteFailure, write_failure_of
from trainrt.runner.iteration_clock import IterationClock
from trainrt.runner.manifest import (
    CONFIG_FILE_NAME,
    recorded_run_id,
    write_manifest,
    write_resolved_config,
)
from trainrt.runner.play import evaluate_policy
from trainrt.runner.pre_run_checks import load_resume_checkpoint, probe_config
from trainrt.runner.preflight import check_memory_fits, memory_record
from trainrt.runner.run_dir import RunDirLock, check_run_dir_usable, claim_run_dir, new_run_id
from trainrt.runner.schedule import IterationSchedule
from trainrt.runner.stop_signals import RunInterrupted, StopSignals, raise_stop, raised_by_ctrl_c
from trainrt.runner.summary import (
    SUMMARY_FILE_NAME,
    IterationTiming,
    RankFigures,
    RunStatus,
    RunSummary,
    final_env_steps_per_sec,
    json_safe,
    provenance,
    tail_throughput,
    utc_now,
    write_run_summary,
)

__all__ = [
    "RANKS_DIR_NAME",
    "TENSORBOARD_DIR_NAME",
    "ContactBufferOverflow",
    "OffPolicyRunner",
    "RunInterrupted",
    "default_run_dir",
]

TENSORBOARD_DIR_NAME = "tensorboard"
RANKS_DIR_NAME = "ranks"
_ERROR_TEXT_LIMIT = 4000
_RUNNING_SUMMARY_EVERY_SEC = 10.0  # log-time rewrites of the running summary, at most this often


class ContactBufferOverflow(ExpectedRunFailure):
    """A contact or constraint buffer overflowed and ``training.fail_on_overflow=true``."""


@cold_path
def default_run_dir(cfg: TrainConfig) -> Path:
    """``runs/<algo>_<task>_<sim>_<UTC timestamp>`` under the current directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return Path("runs") / f"{cfg.algo.name}_{cfg.task.name}_{cfg.sim.backend}_{stamp}"


class OffPolicyRunner:
    """Trains ``cfg.algo`` on ``cfg.task`` and writes the run directory (see the module docstring).

    Args:
        cfg: the resolved, validated config.
        log: where console lines go (``print`` by default).
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
        self.log = log or (lambda line: print(line, flush=True))
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
        if cfg.training.run_dir is not None:
            self.run_dir = Path(cfg.training.run_dir)
        elif resume is not None:
            self.run_dir = Path(resume)
        else:
            self.run_dir = default_run_dir(cfg)
        self.run_dir = Path(self.ranks.shared_object(str(self.run_dir)))  # rank 0's default run directory
        check_run_dir_usable(self.run_dir)
        self.summary_path = self.run_dir / SUMMARY_FILE_NAME
        self.device = resolve_device(cfg)
        # What this rank builds from: its own device and seed (the config itself for one process).
        self.rank_cfg = cfg
        if self.ranks.world_size > 1:
            self.device = self.ranks.device(self.device)
            self.rank_cfg = cfg.model_copy(
                update={
                    "sim": cfg.sim.model_copy(update={"device": self.device}),
                    "training": cfg.training.model_copy(update={"seed": self.ranks.seed(cfg.training.seed)}),
                }
            )
            self.manifest["distributed"] = self.ranks.facts()
            if not self.ranks.is_main:
                self.summary_path = (
                    self.run_dir / RANKS_DIR_NAME / f"rank_{self.ranks.rank}" / SUMMARY_FILE_NAME
                )
                self.log = lambda line: None  # rank 0 speaks for the run
        self.per_rank: list[RankFigures] = []
        self.env: Any = None
        self.agent: Any = None
        self.replay: Any = None
        self.collector: Collector | None = None
        self.schedule: IterationSchedule | None = None
        self.env_meta: dict[str, Any] = {}
        self.timings: list[IterationTiming] = []
        self.resumed_from_iteration: int | None = None
        self._exact_resume = False  # the checkpoint resumed holds the whole run state (training.save_replay)
        self.warmup_time_sec = 0.0
        self.warmup_env_steps = 0
        self.last_checkpoint: Path | None = None
        self.last_checkpoint_iteration = -1
        self.episode_statistics: dict[str, float] = {}
        self.final_eval: dict[str, float] | None = None
        self.onnx_path: str | None = None
        self.started_at = utc_now()
        self._writer: Any = None
        self.warnings: list[str] = []
        self.signals = StopSignals()
        self.time_limit_reached = False  # the run ended at training.time_limit_sec
        self._overflow_reported: dict[str, int] = {}
        self._learning_reported: set[str] = set()
        self._running_summary_at = 0.0
        self._provenance: dict[str, Any] | None = None
        self._lock: RunDirLock | None = None
        # The run's clock (warm-up time, training.time_limit_sec) starts with the checks of its input below.
        self._setup_started = time.perf_counter()
        # A resume that cannot work is a usage error: raised here, before the run (and its summary) starts.
        self._resume_checkpoint = (
            load_resume_checkpoint(Path(resume), cfg, self.log) if resume is not None else None
        )
        # So is a config that needs more memory than the device has free (estimated, nothing allocated yet).
        self._memory_estimate = check_memory_fits(self.rank_cfg)
        # So is input the env or agent cannot be built from (a motion file, an observation group, other networks).
        self._probe_config(self._resume_checkpoint)
        self.run_id = self._run_id_to_continue(resume) if resume is not None else new_run_id()
        # So is a run directory that is in use or holds another run: refused before anything is written.
        if self.ranks.is_main:
            self._lock = claim_run_dir(
                self.run_dir, self.run_id, resume=resume, overwrite=cfg.training.overwrite, log=self.log
            )

    @cold_path
    def _run_id_to_continue(self, resume: str) -> str:
        """The run id a resume continues: the checkpoint's, else the resumed directory's, else a new one."""
        checkpoint = self._resume_checkpoint or {}
        return checkpoint.get("run_id") or recorded_run_id(resume) or new_run_id()

    @cold_path
    def _release_run_dir(self) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _elapsed_sec(self) -> float:
        """Seconds since this process began the run's set-up."""
        return time.perf_counter() - self._setup_started

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
        try:
            try:
                self._set_up()
                self._warm_up()
                self._train()
                self._finish()
            except KeyboardInterrupt as exc:
                stop = self.signals.first_stop(exc)
                error = self._save_on_interrupt(stop)
                with self.signals.ignored():  # signals are ignored while the summary is written
                    self._write_summary("interrupted", error)
                if stop is exc:
                    raise
                raise stop from exc
            except BaseException as exc:
                raised = self._record_failure(exc)
                if raised is exc:
                    raise
                raise raised from exc
            finally:
                self._close_writer()
            summary = self._write_summary("completed", None)
        finally:
            self.signals.restore()
            self._release_run_dir()
        self.ranks.close()
        return summary

    @cold_path
    def _save_on_interrupt(self, stop: KeyboardInterrupt) -> str:
        """Save the last completed iteration after a stop; the summary's error text (it names an abandoned save).

        A second Ctrl-C during the save stops it at once: it surfaces as ``KeyboardInterrupt``, or as the
        ``RuntimeError`` of an interrupted ``torch.save`` (the atomic write leaves no torn file). A save that
        fails is abandoned too: the run stops with its interrupted summary either way.
        """
        error = self.signals.describe()
        iteration = self.completed_iterations
        if self.signals.stopped_inside_iteration:
            # The agent, the replay and the generators hold part of the next iteration: saved as iteration
            # `iteration`, a resume would not continue that iteration's state.
            newest = self.last_checkpoint_iteration
            which = (
                f"a Ctrl-C after the {self.signals.name}" if self.signals.then_ctrl_c else "a second Ctrl-C"
            )
            note = (
                f"{which} stopped iteration {iteration + 1} half done, so no checkpoint was saved "
                f"(the newest is {f'iteration {newest}' if newest > 0 else 'none'})"
            )
            self.log(f"\ninterrupted ({self.signals.name}): {note}")
            return f"{error}; {note}"[-_ERROR_TEXT_LIMIT:]
        nothing_new = self.agent is None or self.completed_iterations in (0, self.last_checkpoint_iteration)
        if nothing_new:  # stopped in set-up or warm-up, or right after a checkpoint
            self.log(
                f"\ninterrupted ({self.signals.name}): no iteration completed since the start or the last "
                "checkpoint, so there is no checkpoint to save"
            )
            return error
        self.log(f"\ninterrupted ({self.signals.name}): saving a checkpoint of the last completed iteration")
        try:
            self._save_checkpoint_if_new()
        except (Exception, KeyboardInterrupt) as err:
            why = (
                "a second Ctrl-C stopped its write"
                if raised_by_ctrl_c(err, stop)
                else "".join(traceback.format_exception_only(type(err), err)).strip()
            )
            error += f"; the checkpoint of iteration {iteration} was abandoned ({why})"
            self.log(f"checkpoint of iteration {iteration} abandoned ({why}); writing the summary")
        return error[-_ERROR_TEXT_LIMIT:]

    @cold_path
    def _set_up(self) -> None:
        """Run directory, resolved config, env, agent, replay; restore the checkpoint on resume."""
        cfg = self.cfg
        checkpoint = self._resume_checkpoint
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if self.ranks.is_main:
            write_resolved_config(self.run_dir, cfg)
            write_manifest(self.run_dir, device=self.device, run_id=self.run_id, **self.manifest)
        self.log(f"run directory: {self.run_dir.resolve()}")
        self.log(
            f"training {cfg.algo.name} on {cfg.task.name} with {cfg.sim.backend} ({self.device}), "
            f"{cfg.algo.num_envs} envs, {cfg.algo.max_iterations} iterations of "
            f"{cfg.algo.steps_per_iteration} steps + {cfg.algo.params.updates_per_iteration} updates"
        )
        if self.ranks.world_size > 1:
            self.log(
                f"data-parallel over {self.ranks.world_size} ranks ({self.ranks.backend}): "
                f"{cfg.algo.num_envs} envs per rank, {self.run_env_steps_per_iteration} env steps per iteration"
            )
        rank_cfg = self.rank_cfg
        torch.manual_seed(rank_cfg.training.seed)
        self.env = build_env(rank_cfg)
        self.log(self.env.summary())
        if self.ranks.is_main:
            env_tables = self.run_dir / "env.txt"
            env_tables.write_text(str(self.env) + "\n")
            self.log(f"full manager tables written to {env_tables}")
            write_manifest(
                self.run_dir,
                device=str(self.env.device),
                env=env_cfg_summary(self.env.cfg),
                run_id=self.run_id,
                **self.manifest,
            )
        self.env_meta = env_metadata(self.env)
        self.agent = build_agent(rank_cfg, self.env.obs_dims, self.env.num_actions, self.env.device)
        self.replay = build_replay(rank_cfg, self.env)
        self.log(
            f"replay: {self.replay.num_envs} envs x {self.replay.capacity_per_env} steps per env, "
            f"{self.replay.memory_bytes() / 2**30:,.2f} GiB on {self.replay.device}"
        )
        self.ranks.attach_agent(self.agent)  # rank 0's initial weights everywhere; gradients averaged
        if cfg.training.save_replay:
            size_mib = self.replay.memory_bytes() / 2**20
            self.log(f"training.save_replay=true: every checkpoint holds the replay ({size_mib:,.1f} MiB)")
        if checkpoint is not None:
            check_motion_clips(
                checkpoint, self.env, consequence="training goes on with the clip as it is now"
            )
            load_agent_weights(self.agent, checkpoint)
            if torch.device(checkpoint["device"]).type == self.env.device.type:
                restore_rng_states(self._generators(), checkpoint["rng"])
            else:  # generator states do not transfer between device types
                self.log(
                    f"note: the checkpoint comes from a {checkpoint['device']} run; generators start fresh"
                )
            self.timings = [IterationTiming.model_validate(t) for t in checkpoint["timings"]]
            self.resumed_from_iteration = int(checkpoint["iteration"])
            self.last_checkpoint = Path(checkpoint["path"])
            self.last_checkpoint_iteration = self.resumed_from_iteration
            self.log(f"resumed from {checkpoint['path']} at iteration {self.resumed_from_iteration}")
            self._restore_replay(checkpoint.get("replay"))
            self._exact_resume = self._can_continue_exactly(checkpoint)
        if self.ranks.is_main:
            self._write_summary("running", None)

    @cold_path
    def _restore_replay(self, state: dict[str, Any] | None) -> None:
        """Load the checkpoint's replay state (return statistics; rings if saved) and say what refills."""
        if state is None:
            self.log(
                "note: the checkpoint has no replay state; return statistics restart and the replay refills"
            )
            return
        for note in self.replay.load_state_dict(state):
            self.log(f"note: {note}")
        if "rings" in state:
            self.log(f"replay restored from the checkpoint ({self.replay.num_rows()} rows per env)")
        else:
            self.log(
                "replay statistics restored; the replay itself refills during warm-up "
                "(training.save_replay=true saves it in checkpoints)"
            )

    @cold_path
    def _can_continue_exactly(self, checkpoint: dict[str, Any]) -> bool:
        """Whether the checkpoint holds the whole run state (``training.save_replay``) and it fits this run.

        Then warm-up takes no steps of its own and ends by putting the env, the collector, the replay, the
        learner and every generator back as the checkpoint left them: the run continues as if never stopped.
        """
        replay = checkpoint.get("replay") or {}
        if "rings" not in replay or "env_state" not in checkpoint or "collector" not in checkpoint:
            return False
        if torch.device(checkpoint["device"]).type != self.env.device.type:
            self.log(
                "note: the checkpoint comes from another device type; the run continues from a fresh env"
            )
            return False
        if self.replay.num_rows() == 0:  # the rings did not fit (the note above says why)
            return False
        try:
            self.env.load_state_dict(checkpoint["env_state"])  # also the check that it fits
        except ValueError as err:
            self.log(f"note: {err}; the run continues from a fresh env")
            return False
        return True

    @cold_path
    def _continue_exactly(self) -> None:
        """Put the checkpoint's run state back in place (after warm-up's captures and first updates)."""
        checkpoint = self._resume_checkpoint
        assert checkpoint is not None and self.collector is not None
        load_agent_weights(self.agent, checkpoint)
        self.replay.load_state_dict(checkpoint["replay"])
        self.env.load_state_dict(checkpoint["env_state"])
        self.collector.load_state_dict(checkpoint["collector"])
        restore_rng_states(self._generators(), checkpoint["rng"])
        self.log(
            f"continuing exactly where iteration {checkpoint['iteration']} ended: env, collector, replay, "
            "learner and generators as the checkpoint saved them"
        )

    def _probe_config(self, checkpoint: dict[str, Any] | None) -> None:
        """Build this config's env and agent on the CPU before anything is written (``probe_config``)."""
        probe_config(self.cfg, checkpoint)

    @cold_path
    def _warm_up(self) -> None:
        """Everything before iteration 1: reset, replay prefill, graph captures, first update."""
        cfg, params = self.cfg, self.cfg.algo.params
        env, agent = self.env, self.agent
        steps_before = int(env.common_step_counter.cpu())
        obs = env.reset()
        self.collector = Collector(
            env,
            agent,
            self.replay,
            obs,
            steps_per_replay=cfg.training.collector_steps_per_replay,
            use_graph=cfg.training.cuda_graph,
            compile_math=cfg.training.compile_collector,
        )
        resumed = self.resumed_from_iteration is not None
        # An exact resume restored the replay's rows: warm-up steps nothing it would have to undo.
        self.collector.prefill(0 if self._exact_resume else params.learning_starts, use_policy=resumed)
        self.collector.capture()
        self.replay.freeze_view()
        updates = params.updates_per_iteration
        agent.set_lr_horizon(cfg.algo.max_iterations * updates)
        if cfg.training.compile_learner and cfg.training.cuda_graph and agent.device.type == "cuda":
            self.replay.compile_sample()  # compiles in the learner's warm-up, before its capture
        agent.capture_update(
            lambda generator: self.replay.sample(params.batch_size, generator, from_view=True),
            enabled=cfg.training.cuda_graph,
            updates_per_replay=updates,
            compile=cfg.training.compile_learner,
        )
        # The first iteration's worth of updates: allocations and lazy state happen here, not in iteration 1.
        agent.replay_updates(updates)
        self.schedule = IterationSchedule(
            self.collector,
            agent,
            self.replay,
            steps_per_iteration=cfg.algo.steps_per_iteration,
            updates_per_iteration=updates,
            overlap=cfg.training.overlap,
        )
        if cfg.training.tensorboard and self.ranks.is_main:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=str(self.run_dir / TENSORBOARD_DIR_NAME))
        IterationClock(self.device).synchronize()
        self.warmup_env_steps = (int(env.common_step_counter.cpu()) - steps_before) * env.num_envs
        self.warmup_time_sec = self._elapsed_sec()
        self.collector.episode_summary()  # warm-up episodes do not count towards iteration 1's statistics
        env.episode_stats()
        if self._exact_resume:
            self._continue_exactly()
        collector_graph = self.collector.diagnostics()
        learner_graph = agent.update_diagnostics()
        schedule = self.schedule.diagnostics()
        overlap = (
            "overlapped (learner one iteration behind the data)"
            if schedule["overlap_enabled"]
            else f"sequential ({schedule['overlap_fallback_reason']})"
        )
        self.log(
            f"warm-up done in {self.warmup_time_sec:.1f}s ({self.warmup_env_steps} env steps, outside the "
            f"throughput window); collector: {_graph_status(collector_graph)}; "
            f"learner: {_graph_status(learner_graph)}"
            + _compile_note(learner_graph)
            + (
                ""
                if collector_graph.get("step_math_compiled")
                else f"; step math eager ({collector_graph.get('step_math_fallback_reason')})"
            )
            + f"; schedule: {overlap}"
        )

    @cold_path
    def _train(self) -> None:
        """Iterations from the first not yet completed to ``algo.max_iterations``."""
        assert self.collector is not None
        clock = IterationClock(self.device)
        session_started = time.perf_counter()
        first = self.completed_iterations + 1
        with self.signals.at_iteration_ends():
            self._iterate(first, clock, session_started)
        if self.ranks.world_size > 1:
            self._gather_rank_figures()
        raise_stop(self.signals.request)  # one that came after the last iteration's agreement

    @cold_path
    def _iterate(self, first: int, clock: IterationClock, session_started: float) -> None:
        """Iterations ``first`` to ``algo.max_iterations``; a stop signal is honoured after each one."""
        cfg = self.cfg
        agent, schedule, ranks = self.agent, self.schedule, self.ranks
        assert schedule is not None
        for iteration in range(first, cfg.algo.max_iterations + 1):
            clock.start()
            local_error: Exception | None = None
            try:
                schedule.run(clock)
                collect_sec, learn_sec, elapsed_sec = clock.synchronize_split()
                injected_failure(ranks.rank, iteration)
            except Exception as exc:  # every rank hears of it at the boundary below, then all stop
                local_error = exc
            limit = cfg.training.time_limit_sec
            time_up = limit is not None and self._elapsed_sec() >= limit
            # Every rank learns of any rank's error, stop request or time limit here; all stop alike.
            boundary = ranks.end_iteration(iteration, local_error, self.signals.request, time_up)
            ranks.check_agreement(agent, iteration)
            is_last = iteration == cfg.algo.max_iterations or boundary.time_up
            if iteration % cfg.training.log_every == 0 or is_last or iteration == first:
                self._log_iteration(iteration, collect_sec, learn_sec, elapsed_sec, session_started)
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

    def _iteration_timing(
        self, clock: IterationClock, iteration: int, stamp: dict[str, Any]
    ) -> IterationTiming:
        """Iteration ``iteration``'s timing as of now, with its policy ``stamp`` and the seconds since set-up."""
        finished = clock.finish(iteration, self.env_steps_per_iteration)
        return finished.model_copy(update={**stamp, "elapsed_sec": self._elapsed_sec()})

    @cold_path
    def _gather_rank_figures(self) -> None:
        """Every rank's own figures (and weight checksum) on every rank; ``RankFailure`` if weights differ."""
        tail = tail_throughput(self.timings, self.cfg.training.tail_window)
        mine = RankFigures(
            rank=self.ranks.rank,
            device=str(self.env.device),
            seed=self.rank_cfg.training.seed,
            num_envs=self.cfg.algo.num_envs,
            completed_iterations=len(self.timings),
            total_env_steps=sum(t.env_steps for t in self.timings),
            training_wall_time_sec=math.fsum(t.wall_time_sec for t in self.timings),
            tail_env_steps_per_sec=tail.env_steps_per_sec,
            parameter_checksum=parameter_checksum(self.agent),
        )
        self.per_rank = [RankFigures.model_validate(f) for f in self.ranks.gather(mine.model_dump())]
        checksums = [f.parameter_checksum for f in self.per_rank]
        diverged = diverged_ranks(checksums)
        if diverged:
            raise RankFailure(
                f"weights diverged: rank(s) {diverged} end with checksums "
                f"{[checksums[r] for r in diverged]}, rank 0 with {checksums[0]}"
            )

    @cold_path
    def _log_iteration(
        self, iteration: int, collect_sec: float, learn_sec: float, elapsed_sec: float, session_started: float
    ) -> None:
        """Console block and TensorBoard scalars of one iteration (reads device values: cold path)."""
        cfg = self.cfg
        self._check_overflow(iteration)
        self._check_learning(iteration)
        losses = _scalars(self.agent.losses())
        episode = {**self.collector.episode_summary(), **self.env.episode_stats()}
        self.episode_statistics.update(episode)
        rate = self.run_env_steps_per_iteration / elapsed_sec if elapsed_sec > 0 else 0.0
        done_this_session = iteration - (self.resumed_from_iteration or 0)
        session_sec = time.perf_counter() - session_started
        eta = session_sec / max(done_this_session, 1) * (cfg.algo.max_iterations - iteration)
        shown = {
            k: v for k, v in episode.items() if k.startswith(("Train/", "Episode/length", "Episode/rew_"))
        }
        self.log(
            format_iteration_block(
                title=f"{cfg.algo.name} {cfg.task.name}",
                iteration=iteration,
                max_iterations=cfg.algo.max_iterations,
                env_steps_per_sec=rate,
                collect_time_sec=collect_sec,
                learn_time_sec=learn_sec,
                wall_time_sec=elapsed_sec,
                total_env_steps=self.run_env_steps_per_iteration * iteration,
                elapsed_sec=sum(t.wall_time_sec for t in self.timings) + elapsed_sec,
                eta_sec=eta,
                losses=losses,
                episode=shown,
            )
        )
        if self._writer is not None:
            step = iteration
            for name, value in losses.items():
                self._writer.add_scalar(f"Loss/{name}", value, step)
            self._writer.add_scalar("Perf/env_steps_per_sec", rate, step)
            self._writer.add_scalar("Perf/collect_time_sec", collect_sec, step)
            self._writer.add_scalar("Perf/learn_time_sec", learn_sec, step)
            self._writer.add_scalar("Perf/iteration_time_sec", elapsed_sec, step)
            for name, value in episode.items():
                tag = name if "/" in name else f"Episode/{name}"
                self._writer.add_scalar(tag, value, step)
        if time.perf_counter() - self._running_summary_at >= _RUNNING_SUMMARY_EVERY_SEC:
            self._write_running_summary()

    @cold_path
    def _check_overflow(self, iteration: int) -> None:
        """Report contact/constraint buffer overflows new since the last check (reads device counters)."""
        diag = _quiet_backend_diagnostics(self.env.backend)
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
        found = self.agent.learning_warnings(self.replay.view_return_statistics())
        for kind, text in found.items():
            if kind in self._learning_reported:
                continue
            self._learning_reported.add(kind)
            message = f"iteration {iteration}: {text}"
            self.warnings.append(message)
            self.log(f"warning: {message}")

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
            group = policy_obs_group(self.agent)
            metadata = export_metadata(
                self.env_meta,
                obs_group=group,
                algo=cfg.algo.name,
                task=cfg.task.name,
                iteration=self.completed_iterations,
            )
            result = export_policy_onnx(
                self.agent.actor_for_export(),
                self.env_meta["obs_dims"][group],
                self.run_dir / ONNX_FILE_NAME,
                metadata=metadata,
            )
            self.onnx_path = result["path"]
            checked = f"checked with onnxruntime (max diff {result['max_abs_diff']:.2g})"
            self.log(
                f"exported {self.onnx_path}: " + (checked if result["onnxruntime_checked"] else "unchecked")
            )

    # --- between iterations: the compact console line and videos (outside every iteration's time) ----------

    @cold_path
    def _after_iteration(self, iteration: int) -> None:
        """The compact console line of an iteration without a full block, and the ``video_every`` video.

        Runs after the iteration's timing is appended, so its time is in no iteration (and never in
        ``tail_env_steps_per_sec``); a video's own time is printed and written as ``Perf/video_time_sec``.
        """
        from trainrt.runner.console import format_iteration_line

        training = self.cfg.training
        if not hasattr(self, "_session_first_iteration"):
            self._session_first_iteration = iteration
            self.video_time_sec = 0.0
        block_shown = (
            iteration % training.log_every == 0
            or iteration == self.cfg.algo.max_iterations
            or iteration == self._session_first_iteration
        )
        if not block_shown and self.ranks.is_main:
            timing = self.timings[-1]
            recent = self.timings[-20:]
            mean_wall = math.fsum(t.wall_time_sec for t in recent) / len(recent)
            length, ret = _running_episode_means(self.collector)
            self.log(
                format_iteration_line(
                    iteration=iteration,
                    max_iterations=self.cfg.algo.max_iterations,
                    env_steps_per_sec=self.run_env_steps_per_iteration / max(timing.wall_time_sec, 1e-9),
                    wall_time_sec=timing.wall_time_sec,
                    episode_length=length,
                    episode_return=ret,
                    eta_sec=mean_wall * (self.cfg.algo.max_iterations - iteration),
                )
            )
        if training.video_every and iteration % training.video_every == 0 and self.ranks.is_main:
            self._record_training_video(iteration)

    @cold_path
    def _record_training_video(self, iteration: int) -> None:
        """A ``training.video_seconds`` video of the current deterministic policy on a separate one-env env."""
        from trainrt.viz.record import VideoOptions, record_policy_video
        from trainrt.viz.video import write_tensorboard_gif

        started = time.perf_counter()
        if getattr(self, "_video_env", None) is None:
            self._video_env = build_env(self.rank_cfg, num_envs=1)
        path = self.run_dir / "videos" / f"iter_{iteration:06d}.mp4"
        options = VideoOptions(
            seconds=self.cfg.training.video_seconds, renderer=self.cfg.training.video_renderer
        )
        result = record_policy_video(self._video_env, self.agent, path, options, keep_preview=24)
        if self._writer is not None and result.preview:
            write_tensorboard_gif(self._writer, "Video/policy", result.preview, fps=8.0, step=iteration)
        spent = time.perf_counter() - started
        self.video_time_sec += spent
        if self._writer is not None:
            self._writer.add_scalar("Perf/video_time_sec", spent, iteration)
        self.log(
            f"video: {path} ({result.frames} frames, {result.renderer} renderer) in {spent:.1f}s, "
            "outside the throughput window"
        )

    # --- checkpoints ---------------------------------------------------------------------------------------

    def _generators(self) -> dict[str, torch.Generator]:
        """The run's generators outside the agent (the agent's own are in its state dict)."""
        return {"env": self.env.rng}

    @cold_path
    def _save_checkpoint(self) -> None:
        """Atomically write the checkpoint of the completed iterations (rank 0 only: weights are identical)."""
        if not self.ranks.is_main:
            return
        iteration = self.completed_iterations
        payload = {
            "agent": self.agent.state_dict(),
            "rng": capture_rng_states(self._generators()),
            "timings": [t.model_dump() for t in self.timings],
            "config": self.cfg.model_dump(mode="json"),
            "env_meta": self.env_meta,
            "device": str(self.env.device),
            "run_id": self.run_id,
            "replay": self.replay.state_dict(include_rings=self.cfg.training.save_replay),
        }
        if self.cfg.training.save_replay and self.collector is not None:
            # With the replay, the rest of the run state: a resume continues exactly (_continue_exactly).
            payload["env_state"] = self.env.state_dict()
            payload["collector"] = self.collector.state_dict()
        self.last_checkpoint = save_checkpoint(self.run_dir, iteration, payload)
        self.last_checkpoint_iteration = iteration
        self._write_running_summary()

    @cold_path
    def _save_checkpoint_if_new(self) -> None:
        """Save unless the last checkpoint already holds the completed iterations (or nothing was built)."""
        if (
            self.agent is None
            or self.env is None
            or self.completed_iterations == self.last_checkpoint_iteration
        ):
            return
        if self.completed_iterations == 0:
            return
        self._save_checkpoint()

    # --- summary -------------------------------------------------------------------------------------------

    @cold_path
    def _write_summary(self, status: RunStatus, error: str | None) -> RunSummary:
        """Write ``run_summary.json``; a summary that fails validation is replaced by a failed one and raised."""
        try:
            summary = self._summary_fields(status, error)
            written = write_run_summary(self.summary_path, summary)
        except WriteFailure:  # the filesystem refused it: a fallback summary would meet the same refusal
            raise
        except Exception as exc:  # a malformed summary is a failed run
            problem = f"run summary failed validation: {exc}"[-_ERROR_TEXT_LIMIT:]
            fallback = self._summary_fields("failed", problem, measurement=False)
            write_run_summary(self.summary_path, fallback)
            raise RuntimeError(problem) from exc
        if status != "running":
            self._announce_outputs(written)
        return written

    @cold_path
    def _record_failure(self, exc: BaseException) -> BaseException:
        """Write the ``failed`` summary of ``exc``; what to raise: ``exc``, or the one-line ``WriteFailure`` of a
        write the filesystem refused (saying so when the summary was refused too)."""
        failure = write_failure_of(exc, self.run_dir)
        error = str(failure) if failure is not None else _error_text(exc)
        try:
            self._write_summary("failed", error[-_ERROR_TEXT_LIMIT:])
        except WriteFailure as refused:
            if failure is None:
                self.log(f"the failed summary was not written: {refused}")
                return exc
            failure = WriteFailure(failure.path, failure.errno, "the failed summary was not written either")
        return failure if failure is not None else exc

    @cold_path
    def _write_running_summary(self) -> None:
        """Rewrite the summary with status ``running`` (after a checkpoint, or every few seconds at log time)."""
        self._running_summary_at = time.perf_counter()
        self._write_summary("running", None)

    @cold_path
    def _summary_fields(
        self, status: RunStatus, error: str | None, *, measurement: bool = True
    ) -> dict[str, Any]:
        """The summary as a dict (``measurement=False``: without timings, for the fallback failed summary)."""
        cfg = self.cfg
        timings = self._run_timings() if measurement else []
        tail = tail_throughput(timings, cfg.training.tail_window)
        diagnostics = self._diagnostics() if measurement else ({}, {}, {})
        if status == "running":
            self._provenance = self._provenance or provenance(
                self.env.device if self.env is not None else self.device
            )
            origin = self._provenance
        else:
            origin = provenance(self.env.device if self.env is not None else self.device)
        return {
            "status": status,
            "error": error,
            "signal": self.signals.name if status == "interrupted" else None,
            "warnings": list(self.warnings),
            "run_id": self.run_id,
            "algo": cfg.algo.name,
            "task": cfg.task.name,
            "sim_backend": cfg.sim.backend,
            "device": str(self.env.device) if self.env is not None else self.device,
            "num_envs": cfg.algo.num_envs,
            "world_size": self.ranks.world_size,
            "rank": self.ranks.rank,
            "steps_per_iteration": cfg.algo.steps_per_iteration,
            "updates_per_iteration": cfg.algo.params.updates_per_iteration,
            "max_iterations": cfg.algo.max_iterations,
            "time_limit_reached": self.time_limit_reached,
            "resumed_from_iteration": self.resumed_from_iteration,
            "tail_env_steps_per_sec": tail.env_steps_per_sec,
            "tail_iteration_count": tail.iteration_count,
            "tail_window": cfg.training.tail_window,
            "final_env_steps_per_sec": final_env_steps_per_sec(timings),
            "completed_iterations": len(timings),
            "total_env_steps": sum(t.env_steps for t in timings),
            "training_wall_time_sec": math.fsum(t.wall_time_sec for t in timings),
            "warmup_time_sec": self.warmup_time_sec,
            "warmup_env_steps": self.warmup_env_steps * self.ranks.world_size,
            "iterations": [t.model_dump() for t in timings],
            "per_rank": [f.model_dump() for f in self.per_rank] if measurement else [],
            "effective_steps_per_replay": cfg.training.collector_steps_per_replay,
            "collector_graph": diagnostics[0],
            "learner_graph": diagnostics[1],
            "backend_diagnostics": diagnostics[2],
            "episode_statistics": _finite(self.episode_statistics) if measurement else {},
            "memory": memory_record(self._memory_estimate, self.env.device if self.env is not None else None),
            "final_eval": _finite(self.final_eval) if (measurement and self.final_eval) else None,
            "onnx_path": self.onnx_path,
            "checkpoint_path": str(self.last_checkpoint) if self.last_checkpoint is not None else None,
            "run_dir": str(self.run_dir.resolve()),
            "config_path": str((self.run_dir / CONFIG_FILE_NAME).resolve()),
            "started_at": self.started_at,
            "finished_at": None if status == "running" else utc_now(),
            "updated_at": utc_now(),
            **origin,
        }

    def _run_timings(self) -> list[IterationTiming]:
        """This rank's timings with env steps summed over ranks (each rank steps the same number)."""
        if self.ranks.world_size == 1:
            return self.timings
        return [t.model_copy(update={"env_steps": t.env_steps * self.ranks.world_size}) for t in self.timings]

    @cold_path
    def _diagnostics(self) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        """(collector graph, learner graph, backend) diagnostics as JSON-safe dicts ({} for unbuilt parts)."""
        collector = json_safe(self.collector.diagnostics()) if self.collector is not None else {}
        learner = json_safe(self.agent.update_diagnostics()) if self.agent is not None else {}
        if self.schedule is not None:
            learner |= json_safe(self.schedule.diagnostics())
        if self.replay is not None and learner:
            learner |= json_safe(self.replay.sample_diagnostics())
        backend = json_safe(_quiet_backend_diagnostics(self.env.backend)) if self.env is not None else {}
        if hasattr(backend, "items") is False:
            backend = {"value": backend}
        return collector, learner, backend

    @cold_path
    def _announce_outputs(self, summary: RunSummary) -> None:
        """Say where the run directory, summary and checkpoints are."""
        run_dir = self.run_dir.resolve()
        lines = [
            f"run {summary.status}: {summary.completed_iterations} iterations, "
            f"tail {summary.tail_env_steps_per_sec:,.0f} env steps/s over the last "
            f"{summary.tail_iteration_count} iterations",
            f"  run directory: {run_dir}",
            f"  summary:       {self.summary_path.resolve()}",
            f"  checkpoints:   {self.last_checkpoint.resolve() if self.last_checkpoint else '(none written)'}",
        ]
        if self.onnx_path:
            lines.append(f"  onnx policy:   {Path(self.onnx_path).resolve()}")
        if self._writer is not None or (run_dir / TENSORBOARD_DIR_NAME).is_dir():
            lines.append(f"  tensorboard:   tensorboard --logdir {run_dir / TENSORBOARD_DIR_NAME}")
        self.log("\n".join(lines))

    @cold_path
    def _close_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


@cold_path
def _quiet_backend_diagnostics(backend: Any) -> Any:
    """The backend's diagnostics without its own overflow warning (the runner reports overflows itself)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*buffer overflow", category=RuntimeWarning)
        return backend.diagnostics()


def _error_text(exc: BaseException) -> str:
    """``Type: message`` of a failed run's exception, as the summary's ``error`` records it."""
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


@cold_path
def _compile_note(learner: dict[str, Any]) -> str:
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
def _scalars(tensors: dict[str, torch.Tensor]) -> dict[str, float]:
    """Read device scalars with one transfer (cold path)."""
    if not tensors:
        return {}
    values = torch.stack([t.detach().float().reshape(()) for t in tensors.values()]).cpu().tolist()
    return dict(zip(tensors, values))


@cold_path
def _running_episode_means(collector: Any) -> tuple[float | None, float | None]:
    """Mean length and return of the episodes finished since the last full block (None before any)."""
    sums = [getattr(collector, f"_finished_{k}", None) for k in ("length_sum", "return_sum", "count")]
    if any(s is None for s in sums):
        return None, None
    length, ret, count = (float(v) for v in torch.stack([s.double() for s in sums]).cpu())
    return (length / count, ret / count) if count > 0 else (None, None)


def _finite(values: dict[str, float] | None) -> dict[str, float]:
    """Drop non-finite entries (JSON has no NaN; a non-finite statistic is not a statistic)."""
    return {k: float(v) for k, v in (values or {}).items() if math.isfinite(float(v))}
