"""A training run's warm-up: everything before iteration 1, outside every throughput window.

Reset, prefill the replay for ``learning_starts`` vector steps (random actions; the restored policy on
resume), capture the collector graph, capture the learner graph, run the first update, synchronize. Each
phase says so on the console as it starts (a fresh machine compiles for minutes here) and its seconds go to
the summary's ``warmup_phases_sec``; the compilers' caches (``trainrt.runner.compile_cache``), pointed by the
runner before anything compiles, are counted again when warm-up ends (the summary's ``compile_cache``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainrt.config import TrainConfig
from trainrt.hotpath import cold_path
from trainrt.runner.checkpointing import RunCheckpoints
from trainrt.runner.collector import Collector
from trainrt.runner.compile_cache import cache_contents, compile_cache_note, compile_cache_record
from trainrt.runner.iteration_clock import IterationClock
from trainrt.runner.learner_partition import LearnerPartition
from trainrt.runner.learner_precompile import LearnerPrecompile, learner_key, mark_learner
from trainrt.runner.run_log import quiet_backend_diagnostics, warm_up_line
from trainrt.runner.schedule import IterationSchedule


@cold_path
def process_age_sec() -> float | None:
    """Seconds since this process started (Linux: its start time in ``/proc``), or None elsewhere."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            started_ticks = int(stat.read().rsplit(")", 1)[1].split()[19])  # field 22: starttime
            now = float(uptime.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, now - started_ticks / os.sysconf("SC_CLK_TCK"))


@cold_path
def first_steps_note(cfg: TrainConfig, env: Any) -> str:
    """What the first-steps phase of warm-up says it does: the replay's prefill, and what compiles there."""
    compiles = []
    if cfg.sim.backend == "mjwarp":
        ahead = quiet_backend_diagnostics(env.backend).compile_ahead  # set-up compiled them, or could not
        if not ahead or "error" in ahead:
            compiles.append("Warp compiles the physics kernels")
    if cfg.training.compile_collector and env.device.type == "cuda":
        compiles.append("torch inductor the step math")
    note = f"; on a fresh machine {' and '.join(compiles)} here: minutes the first time" if compiles else ""
    return f"first physics steps, filling the replay{note}"


@cold_path
def capture_learner(
    cfg: TrainConfig,
    agent: Any,
    replay: Any,
    next_phase: Callable[[str, str], None] | None = None,
    capture_stream: torch.cuda.Stream | None = None,
) -> None:
    """The learner's half of warm-up, once the replay holds its first rows: freeze the replay's view, set the
    learning-rate horizon, compile the replay's sampling and the update, capture the update. ``next_phase(name,
    what)`` is told as each phase starts. A run's warm-up runs it, and so does the helper that compiles the
    learner ahead (``trainrt.runner.learner_precompile``): one sequence, so both compile the same graphs.
    ``capture_stream``: where the update's graphs are captured (a ``LearnerPartition``'s stream)."""
    params = cfg.algo.params
    next_phase = next_phase or (lambda name, what: None)
    replay.freeze_view()
    updates = params.updates_per_iteration
    agent.set_lr_horizon(cfg.algo.max_iterations * updates)
    if cfg.training.compile_learner and cfg.training.cuda_graph and agent.device.type == "cuda":
        next_phase("replay_sample_compile", "compiling the replay's sampling")
        replay.compile_sample()  # compiles in the learner's warm-up, before its capture
    next_phase(
        "learner_capture",
        "compiling and capturing the learner update (torch inductor compiles here: minutes the first "
        "time without a warm cache)"
        if cfg.training.compile_learner and agent.device.type == "cuda"
        else "capturing the learner update",
    )
    agent.capture_update(
        lambda generator: replay.sample(params.batch_size, generator, from_view=True),
        enabled=cfg.training.cuda_graph,
        updates_per_replay=updates,
        compile=cfg.training.compile_learner,
        capture_stream=capture_stream,
    )


class WarmUp:
    """One run's warm-up (see the module docstring): the parts it builds and what it measured.

    The collector is kept as soon as it is built, and each phase's seconds as soon as the phase ends, so a
    run that fails or stops during warm-up still reports (and checkpoints) what was there.

    Args:
        cfg: the run's config.
        device: the device whose queued work each phase waits for.
        log: where console lines go.
        elapsed_sec: seconds since the run's set-up began (warm-up's clock).
        cache_root: ``$TRAINRT_CACHE_DIR``'s folder (None when unset), as ``point_compile_caches`` returned it.
        caches_before: the compilers' caches as the run found them (``cache_contents``).

    Attributes:
        collector: the collector (None until built).
        schedule: the iteration schedule (None until warm-up's last phase).
        time_sec: seconds from the start of set-up to the end of warm-up.
        env_steps: env steps warm-up took on this rank.
        phases_sec: seconds of each phase that ended, in order (``set_up`` first).
        compile_cache: the summary's ``compile_cache`` (``after`` None until warm-up ends).
    """

    def __init__(
        self,
        cfg: TrainConfig,
        device: str,
        *,
        log: Callable[[str], None],
        elapsed_sec: Callable[[], float],
        cache_root: Path | None,
        caches_before: dict[str, tuple[Path | None, int | None]],
    ) -> None:
        self.cfg = cfg
        self.device = device
        self.log = log
        self.elapsed_sec = elapsed_sec
        self.cache_root = cache_root
        self.caches_before = caches_before
        self.collector: Collector | None = None
        self.schedule: IterationSchedule | None = None
        self.time_sec = 0.0
        self.env_steps = 0
        self.phases_sec: dict[str, float] = {}
        self.startup_sec = process_age_sec()
        """Seconds the process had lived when the run's clock started (interpreter, imports, the checks of the
        command line); None where the system does not say."""
        self.compile_cache = compile_cache_record(cache_root, caches_before, None)
        self.learner_partition = LearnerPartition(
            cfg.training.learner_sms, torch.device(device), overlap=cfg.training.overlap
        )
        self._phase: tuple[str, float] | None = None  # the phase running, and when it began

    @cold_path
    def run(
        self,
        env: Any,
        agent: Any,
        replay: Any,
        checkpoints: RunCheckpoints,
        *,
        resumed: bool,
        start_log: Callable[..., None],
        learner_helper: LearnerPrecompile | None = None,
    ) -> None:
        """Reset, replay prefill, graph captures, first update; ``start_log(env=, agent=, replay=, collector=)``
        starts the run's log in the last phase. ``resumed``: the run restored a checkpoint (its policy acts in
        the prefill); one that ``checkpoints`` resumes exactly is put back in place after the captures. A
        ``learner_helper`` still running is waited for before the learner's phases, so that its compiling
        overlaps the env's reset and first steps as well as the build."""
        cfg, params = self.cfg, self.cfg.algo.params
        self._phase = ("set_up", 0.0)  # from the checks of the input to the built parts
        if env.backend.compile_pending:  # set-up compiled the step math beside
            self._next_phase("physics_kernels", "waiting for Warp's physics kernels, compiling since set-up")
            env.backend.wait_compiled()
        self._next_phase("reset", "resetting the envs")
        steps_before = int(env.common_step_counter.cpu())
        obs = env.reset()
        self._next_phase("first_steps", first_steps_note(cfg, env))
        self.collector = collector = Collector(
            env,
            agent,
            replay,
            obs,
            steps_per_replay=cfg.training.collector_steps_per_replay,
            use_graph=cfg.training.cuda_graph,
            compile_math=cfg.training.compile_collector,
        )
        # An exact resume restored the replay's rows: warm-up steps nothing it would have to undo.
        exact = checkpoints.resumes_exactly
        collector.prefill(0 if exact else params.learning_starts, use_policy=resumed)
        self._next_phase("collector_capture", "capturing the collector's steps")
        collector.capture()
        if learner_helper is not None and learner_helper.running:
            self._next_phase("learner_helper_wait", "waiting for the learner helper")
            self.log(f"warm-up: {learner_helper.wait_note()} ... {self.elapsed_sec():.1f}s")
        capture_learner(cfg, agent, replay, self._next_phase, self.learner_partition.stream)
        self._mark_compiled_learner(agent, env.obs_dims, env.num_actions)
        updates = params.updates_per_iteration
        # The first iteration's worth of updates: allocations and lazy state happen here, not in iteration 1.
        self._next_phase("first_updates", "first learner updates")
        agent.replay_updates(updates)
        self.schedule = IterationSchedule(
            collector,
            agent,
            replay,
            steps_per_iteration=cfg.algo.steps_per_iteration,
            updates_per_iteration=updates,
            overlap=cfg.training.overlap,
            learner_partition=self.learner_partition,
        )
        start_log(env=env, agent=agent, replay=replay, collector=collector)
        self._next_phase(None)  # waits for the device's work
        self.env_steps = (int(env.common_step_counter.cpu()) - steps_before) * env.num_envs
        self.time_sec = self.elapsed_sec()
        caches_after = cache_contents(cfg.sim.backend)
        self.compile_cache = compile_cache_record(self.cache_root, self.caches_before, caches_after)
        collector.episode_summary()  # warm-up episodes do not count towards iteration 1's statistics
        env.episode_stats()
        if exact:  # the checkpoint's run state back in place, after the captures and first updates
            checkpoints.continue_exactly(env=env, agent=agent, replay=replay, collector=collector)
        self.log(
            warm_up_line(self.time_sec, self.env_steps, collector, agent, self.schedule, self.startup_sec)
        )
        self.log(compile_cache_note(self.compile_cache))

    @cold_path
    def _mark_compiled_learner(self, agent: Any, obs_dims: Any, num_actions: int) -> None:
        """Mark a learner whose every part compiled on CUDA as held by inductor's cache, so the next run of it
        on this cache starts no learner helper (``learner_precompile``'s ``auto``)."""
        if (
            torch.device(self.device).type != "cuda"
            or not agent.compile_enabled
            or agent.compile_fallback_reason
        ):
            return
        key = learner_key(self.cfg, obs_dims, num_actions, self.device)
        what = {"algo": self.cfg.algo.name, "task": self.cfg.task.name, "obs_dims": dict(obs_dims)}
        mark_learner(self.caches_before["inductor"][0], key, {**what, "num_actions": num_actions})

    @cold_path
    def _next_phase(self, name: str | None, what: str = "") -> None:
        """End the phase running (its seconds go to ``phases_sec``) and start ``name`` (None: warm-up ended),
        saying on the console what it does and the seconds since set-up began. The device's queued work is
        waited for first, so each phase's seconds include the device time it queued."""
        IterationClock(self.device).synchronize()
        now = self.elapsed_sec()
        if self._phase is not None:
            ended, began = self._phase
            self.phases_sec[ended] = now - began
        self._phase = (name, now) if name is not None else None
        if name is not None:
            self.log(f"warm-up: {what} ... {now:.1f}s")
