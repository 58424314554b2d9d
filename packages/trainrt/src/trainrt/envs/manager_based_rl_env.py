"""The manager-based RL env: fixed-shape, device-resident, sync-free step over a simcore backend.

One control step (``step``):

1. action manager processes the action and writes ``ctrl`` once; ``backend.step()`` runs the decimation
   substeps with those targets held;
2. rows whose ``qpos``/``qvel`` went non-finite, or whose velocities passed ``MAX_PHYSICS_SPEED`` (blown up),
   are detected on the device;
3. terminations (failures kept apart from time-outs), rewards (weighted, times ``step_dt``), metrics;
4. finished episodes are added to the device statistics;
5. the observation of every row is computed before any reset (the final observation of done rows);
6. done rows (including non-finite ones) are reset: curriculum, default payload, command resample, reset
   events filling the payload, ONE ``backend.reset(mask, payload, spec)``, then the managers' per-row resets;
7. commands advance and interval events fire;
8. observations of all rows (reset rows observe their new state).

Every command term and reset or interval event keeps its random draws apart from its math (one draw
protocol, `CommandTerm`, `EventTerm`), so steps 6 and 7 make all their draws first, in the order above, and
then run their math in two parts on either side of the reset transaction, which `compile_term_math` can
compile (``_reset_rows``). ``reset()`` takes the same path without step 7.

Quantities several terms read (rotated velocities, a command's reference, anchor-relative targets) are
memoized in ``state_cache`` for one version of the state; every write path bumps the version (the physics
step, the reset transaction, each command's and event's math), so each is computed once per state instead of
once per reading term and never read stale (see ``StateCache``).

Every result lives in a buffer allocated at construction and written in place, so a CUDA graph of ``step``
leaves its results in the same tensors. Non-finite and blown-up rows report ``valid=False``, ``reward=0``,
``terminated=False`` and ``truncated=True`` (a reset that is not the policy's failure), and their
``final_obs`` is the sane post-reset observation; they are counted in ``nonfinite_resets``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

import simcore
from trainrt.compiled import CompiledOnFirstCall
from trainrt.envs.compiled_step_math import CompiledStepMath
from trainrt.envs.env_cfg import EnvCfg
from trainrt.envs.env_description import (
    SUMMARY_WIDTH,
    action_meta_of,
    env_summary,
    env_tables,
    episode_stats_of,
)
from trainrt.envs.env_state import load_state_dict_into, state_dict_of
from trainrt.envs.robot_view import RobotView
from trainrt.envs.state_cache import StateCache
from trainrt.hotpath import cold_path
from trainrt.managers import (
    ActionManager,
    CommandManager,
    CurriculumManager,
    EventManager,
    MetricsManager,
    NullCommandManager,
    NullCurriculumManager,
    NullEventManager,
    NullMetricsManager,
    ObservationManager,
    RewardManager,
    TerminationManager,
)
from trainrt.terrain.scene import TerrainScene, make_scene_backend

# Channels every reset writes, and optional ones taken when the backend serves them (zeroed by default).
REQUIRED_RESET_CHANNELS = ("qpos", "qvel")
OPTIONAL_RESET_CHANNELS = ("time", "ctrl", "act", "qacc_warmstart")

Observations = dict[str, Any]
"""Observation groups: ``{group: (num_envs, D) float32}`` (a dict of terms for non-concatenated groups)."""


@dataclass
class StepResult:
    """Results of one env step; every tensor is a persistent buffer owned by the env (same storage each step).

    Attributes:
        obs: observation groups after auto-reset, ``{group: (num_envs, D)}``.
        reward: total reward (num_envs,) float32; 0 for non-finite rows.
        terminated: failure terminations (num_envs,) bool.
        truncated: time-outs and blown-up (non-finite or too fast) rows (num_envs,) bool.
        final_obs: the observation before reset for done rows, equal to ``obs`` for other rows.
        valid: False for rows whose physics went non-finite this step (num_envs,) bool.
    """

    obs: Observations
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: Observations
    valid: torch.Tensor


MAX_PHYSICS_SPEED = 1.0e3
"""A row with a generalized velocity above this (m/s or rad/s) has blown up, like one gone non-finite: a robot
moves at a few m/s and its joints at tens of rad/s, while a thrown one reaches hundreds within a step and then
rewards of -1e11, which would poison the learner's statistics before the row ever turned nan."""


def finite_rows(qpos: torch.Tensor, qvel: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """Rows whose ``qpos`` (num_envs, nq) is all finite and whose ``qvel`` (num_envs, nv) is finite and within
    ``MAX_PHYSICS_SPEED``, into ``out`` (num_envs,) bool.

    ``x * 0`` is zero for finite ``x`` and nan for inf or nan, so a ``qpos`` row is finite iff its products sum
    to zero; the largest ``|qvel|`` of a row is nan or inf when any is, and either fails the bound.
    """
    finite = torch.eq(qpos.mul(0).sum(dim=1), 0)
    return torch.logical_and(finite, qvel.abs().amax(dim=1) < MAX_PHYSICS_SPEED, out=out)


@cold_path
def _supported_reset_channels(backend: simcore.SimBackend) -> list[str]:
    """The reset channels to request from ``backend``: the required ones, then each optional one it serves
    (``act`` only for a model with activation states)."""
    channels = list(REQUIRED_RESET_CHANNELS)
    for channel in OPTIONAL_RESET_CHANNELS:
        if channel == "act" and backend.mj_model.na == 0:
            continue
        try:
            backend.reset_spec([*REQUIRED_RESET_CHANNELS, channel])
        except (ValueError, NotImplementedError):
            continue
        channels.append(channel)
    return channels


def _flat_tensors(obs: Observations) -> list[torch.Tensor]:
    """The tensors of an observation dict in a fixed order (groups, then terms of non-concatenated groups)."""
    out = []
    for value in obs.values():
        out.extend(value.values() if isinstance(value, dict) else [value])
    return out


def _clone_obs(obs: Observations) -> Observations:
    return {
        k: {t: v.clone() for t, v in value.items()} if isinstance(value, dict) else value.clone()
        for k, value in obs.items()
    }


class ManagerBasedRlEnv(CompiledStepMath):
    """Vectorized RL env over a simcore backend, driven by managers built from an ``EnvCfg``."""

    @cold_path
    def __init__(
        self,
        cfg: EnvCfg,
        *,
        sim: str,
        num_envs: int,
        device: str | None = None,
        seed: int = 0,
        compile_in_background: bool = False,
    ) -> None:
        """Build the backend, read plan, robot view, reset transaction and managers; run startup events.

        Args:
            cfg: the env config (scene and term dicts).
            sim: backend name, ``"mujoco"`` or ``"mjwarp"``.
            num_envs: number of parallel worlds.
            device: torch device; ``None`` lets the backend choose.
            seed: seed of ``env.rng``, the one generator every random draw uses.
            compile_in_background: the backend compiles its kernels beside what follows its construction
                (``simcore.SimConfig.compile_in_background``): the first reset or step waits for them.
        """
        if num_envs < 1:
            raise ValueError(f"num_envs must be >= 1, got {num_envs}")
        self.cfg = cfg
        self.seed = int(seed)
        self.num_envs = int(num_envs)
        scene = cfg.scene
        self.terrain = None if scene.terrain is None else TerrainScene(scene.terrain, self.seed)
        """The generated terrain and each env's tile (``trainrt.terrain.scene``); None without ``scene.terrain``."""
        sim_config = simcore.SimConfig(
            num_envs=self.num_envs,
            decimation=cfg.decimation,
            device=None if device is None else str(device),
            nconmax=scene.nconmax,
            njmax=scene.njmax,
            compile_in_background=compile_in_background,
        )
        self.backend = make_scene_backend(sim, scene, self.terrain, sim_config)
        self.device = torch.device(self.backend.device)
        self.rng = torch.Generator(device=self.device)
        """The env's only random generator (on ``device``), seeded with ``seed``."""
        self.rng.manual_seed(self.seed)
        self.physics_dt = float(self.backend.physics_dt)
        self.step_dt = float(self.backend.control_dt)
        # The tolerance keeps e.g. 0.14 s / 0.02 s = 7.000000000000001 from becoming 8 steps.
        self.max_episode_length = max(1, math.ceil(cfg.episode_length_s / self.step_dt - 1e-9))
        """Episode length limit in control steps (time-out terms compare ``episode_length_buf`` to it)."""
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        """Control steps since each row's last reset (num_envs,) long."""
        self.common_step_counter = torch.zeros((), dtype=torch.long, device=self.device)
        """Control steps taken since construction: a device scalar, so graph replays advance it too."""

        self.state_cache = StateCache()
        """Derived quantities several terms read, memoized while the state holds (inside ``step``/``reset``)."""
        self.plan = self.backend.read_plan(
            bodies=scene.plan_bodies, sensors=scene.sensors, contact_bodies=scene.contact_bodies
        )
        self.robot = RobotView(
            self.backend,
            self.plan,
            default_joint_pos=scene.default_joint_pos,
            init_root_height=scene.init_root_height,
            state_cache=self.state_cache,
        )
        # No forward here: the backend's construction ran one (or runs it once its kernels are compiled,
        # compile_in_background) and the read plan refreshed itself; the state has not changed since.

        self.reset_spec = self.backend.reset_spec(_supported_reset_channels(self.backend))
        self.reset_payload: dict[str, torch.Tensor] = self.reset_spec.new_payload()
        """Full-width reset payload (one ``(num_envs, ...)`` tensor per channel); reset events write it."""
        self._default_qpos = self.robot.default_qpos.to(self.reset_payload["qpos"].dtype).expand(
            self.num_envs, -1
        )
        self._zeroed_channels = [
            self.reset_payload[c]
            for c in ("qvel", "time", "act", "qacc_warmstart")
            if c in self.reset_payload
        ]
        self._ctrl_payload = self.reset_payload.get("ctrl")
        if self.terrain is not None:
            self.terrain.attach(self)

        self.event_manager = EventManager(cfg.events, self) if cfg.events else NullEventManager(self)
        self.command_manager = (
            CommandManager(cfg.commands, self) if cfg.commands else NullCommandManager(self)
        )
        self.action_manager = ActionManager(cfg.actions, self)
        self.reward_manager = RewardManager(cfg.rewards, self)
        self.termination_manager = TerminationManager(cfg.terminations, self)
        self.metrics_manager = MetricsManager(cfg.metrics, self) if cfg.metrics else NullMetricsManager(self)
        self.curriculum_manager = (
            CurriculumManager(cfg.curriculum, self) if cfg.curriculum else NullCurriculumManager(self)
        )
        self.observation_manager = ObservationManager(cfg.observations, self)
        self.num_actions = self.action_manager.total_action_dim
        self.obs_dims: dict[str, int] = self.observation_manager.group_obs_dim

        n, dev = self.num_envs, self.device
        self._all_rows = torch.ones(n, dtype=torch.bool, device=dev)
        self._done = torch.zeros(n, dtype=torch.bool, device=dev)
        self._finished = torch.zeros(n, dtype=torch.bool, device=dev)
        self._obs = self.observation_manager.buffers
        self._final_obs = _clone_obs(self._obs)
        self._obs_pairs = list(zip(_flat_tensors(self._final_obs), _flat_tensors(self._obs)))
        self._result = StepResult(
            obs=self._obs,
            reward=torch.zeros(n, device=dev),
            terminated=torch.zeros(n, dtype=torch.bool, device=dev),
            truncated=torch.zeros(n, dtype=torch.bool, device=dev),
            final_obs=self._final_obs,
            valid=torch.ones(n, dtype=torch.bool, device=dev),
        )
        self.nonfinite_resets = torch.zeros((), dtype=torch.long, device=dev)
        """Rows reset because their physics state went non-finite or blew up (``MAX_PHYSICS_SPEED``), since
        construction (device scalar; the name predates the speed bound)."""
        self._finished_episodes = torch.zeros((), dtype=torch.long, device=dev)
        self._finished_length_sum = torch.zeros((), dtype=torch.long, device=dev)
        # device zeros for selects (a Python 0 in torch.where becomes one more fill kernel per call)
        self._zero_reward = torch.zeros((), device=dev)
        self._zero_length = torch.zeros((), dtype=torch.long, device=dev)

        # The per-step term math after physics, eager until `compile_term_math`.
        self._step_terms = CompiledOnFirstCall(self._evaluate_step_terms)
        # The math of the step's resets and updates, on either side of the reset transaction (draws made first).
        self._reset_payload_math = CompiledOnFirstCall(self._build_reset_payload)
        self._after_reset_math = CompiledOnFirstCall(self._after_reset)

        self.event_manager.apply_startup()
        # The curriculum terms on no rows: their reported state exists from the start (env state a resume loads)
        self.curriculum_manager.compute(torch.zeros_like(self._done))

    # --- hot path ----------------------------------------------------------------------------------------

    @property
    def terminated(self) -> torch.Tensor:
        """Failures of the last step, finite rows only (num_envs,) bool; all False right after ``reset()``."""
        return self._result.terminated

    def reset(self) -> Observations:
        """Reset every row through the same path as the auto-reset; return the observation buffers."""
        with self.state_cache.memoizing():
            self._result.terminated.zero_()
            self._result.truncated.zero_()
            rows = self._all_rows
            self._draw_resets(rows)
            self._build_reset_payload(rows)  # eager: a full reset is no per-step call
            self._reset_transaction(rows)
            self._reset_manager_rows(rows)
            self.state_cache.bump()
            self.observation_manager.compute(update_history=True)
            for final, obs in self._obs_pairs:
                final.copy_(obs)
        return self._obs

    @cold_path
    def check_term_outputs(self) -> None:
        """Call every observation, reward, termination and metric term once on the current state (after a
        reset or a step): ``ValueError`` naming the first term whose output a manager cannot take (wrong shape, a
        termination that is not bool, NaN or infinite values). A check for set-up: stateful terms advance."""
        with self.state_cache.memoizing():
            for manager in (
                self.observation_manager,
                self.reward_manager,
                self.termination_manager,
                self.metrics_manager,
            ):
                manager.check_outputs()

    def step(self, action: torch.Tensor) -> StepResult:
        """Advance one control step with ``action`` (num_envs, num_actions); auto-reset done rows."""
        with self.state_cache.memoizing():
            return self._step(action)

    def _step(self, action: torch.Tensor) -> StepResult:
        result = self._result
        self.action_manager.process_action(action)
        self.action_manager.apply_action()
        self.backend.step()
        self.state_cache.bump()
        self.episode_length_buf.add_(1)
        self.common_step_counter.add_(1)

        self._step_terms()

        # Final observation: every row, before any reset (fixed shapes); kept below for finite done rows only.
        self.observation_manager.compute(update_history=False)
        for final, obs in self._obs_pairs:
            final.copy_(obs)

        self._reset_rows(self._done)
        self.observation_manager.compute(update_history=True)
        keep = self._finished.unsqueeze(1)
        for final, obs in self._obs_pairs:
            torch.where(keep, final, obs, out=final)
        return result

    def _evaluate_step_terms(self) -> None:
        """After physics: finite rows, terminations, rewards and metrics, the step's flags and reward, and the
        statistics of the episodes that end.

        No random draws and no host logic on tensor values, so `compile_term_math` can fuse it into a few
        kernels."""
        result = self._result
        valid = result.valid
        finite_rows(self.backend.qpos, self.backend.qvel, out=valid)
        self.termination_manager.compute()
        reward = self.reward_manager.compute(self.step_dt)
        self.metrics_manager.compute()

        torch.logical_and(self.termination_manager.failures, valid, out=result.terminated)
        torch.logical_or(self.termination_manager.time_outs, ~valid, out=result.truncated)
        torch.logical_or(result.terminated, result.truncated, out=self._done)
        torch.where(valid, reward, self._zero_reward, out=result.reward)

        torch.logical_and(self._done, valid, out=self._finished)
        self._record_episode_end(self._finished)
        self.nonfinite_resets.add_((~valid).sum())

    def _reset_rows(self, env_mask: torch.Tensor, transact: bool = True) -> None:
        """Start new episodes in rows where ``env_mask`` (num_envs,) is True with one reset transaction, then
        advance the commands and the interval events by one step: every random draw first, then the math.

        The draws come in a fixed order (command resets, reset events, event timers; then command updates,
        interval events), so the generator yields the same numbers to the same places whatever the mask. The
        updates' draws wait until the payload's math has read the resets' (a command term draws both into
        the same buffers). The math draws nothing and can run compiled (`compile_term_math`). ``transact``
        False leaves the simulation alone (`compile_term_math_now`); the state's version moves as it would."""
        self._draw_resets(env_mask)
        self._reset_payload_math(env_mask)
        self.command_manager.draw_compute_()
        self.event_manager.draw_interval_()
        if transact:
            self._reset_transaction(env_mask)
        else:
            self.state_cache.bump()
        self._after_reset_math(env_mask)
        self.state_cache.bump()

    def _draw_resets(self, env_mask: torch.Tensor) -> None:
        """The curriculum on the rows that reset, then every draw of their reset: command resets, reset events,
        event timers."""
        self.curriculum_manager.compute(env_mask)
        self.state_cache.bump()
        self.command_manager.draw_reset_()
        self.event_manager.draw_reset_()

    def _build_reset_payload(self, env_mask: torch.Tensor) -> None:
        """The reset payload of rows where ``env_mask`` is True: defaults, commands, reset events (drawn)."""
        self._fill_default_payload()
        self.command_manager.apply_reset(env_mask)
        self.event_manager.apply_reset(env_mask)

    def _reset_transaction(self, env_mask: torch.Tensor) -> None:
        """Write the reset payload into the simulation state of rows where ``env_mask`` is True."""
        self.backend.reset(env_mask, self.reset_payload, self.reset_spec)
        self.state_cache.bump()

    def _after_reset(self, env_mask: torch.Tensor) -> None:
        """After the reset transaction: the managers' per-row resets, then the commands' update and the
        interval events (drawn)."""
        self._reset_manager_rows(env_mask)
        self.command_manager.apply_compute(self.step_dt)
        self.event_manager.apply_interval(self.step_dt)

    def _reset_manager_rows(self, env_mask: torch.Tensor) -> None:
        """The managers' per-row state and the episode length of rows where ``env_mask`` is True (the event
        timers take what `EventManager.draw_reset_` drew)."""
        self.action_manager.reset(env_mask)
        self.observation_manager.reset(env_mask)
        self.reward_manager.reset(env_mask)
        self.termination_manager.reset(env_mask)
        self.metrics_manager.reset(env_mask)
        self.event_manager.reset(env_mask)
        self.episode_length_buf.masked_fill_(env_mask, 0)

    def _fill_default_payload(self) -> None:
        """Safe defaults for all rows before reset events run: default pose (on each env's terrain tile), zero
        velocity, zero-action ctrl."""
        self.reset_payload["qpos"].copy_(self._default_qpos)
        if self.terrain is not None:  # each env starts on its terrain tile
            self.terrain.place(self.reset_payload["qpos"])
        for tensor in self._zeroed_channels:
            tensor.zero_()
        if self._ctrl_payload is not None:
            self._ctrl_payload.zero_()
            self.action_manager.write_reset_ctrl(self._ctrl_payload)

    def _record_episode_end(self, env_mask: torch.Tensor) -> None:
        """Add the episodes ending in rows where ``env_mask`` (num_envs,) is True to the device statistics."""
        self._finished_episodes.add_(env_mask.sum())
        self._finished_length_sum.add_(
            torch.where(env_mask, self.episode_length_buf, self._zero_length).sum()
        )
        self.reward_manager.record_episode_end(env_mask)
        self.termination_manager.record_episode_end(env_mask)
        self.metrics_manager.record_episode_end(env_mask, self.episode_length_buf)

    # --- cold path -------------------------------------------------------------------------------------------

    @cold_path
    def episode_stats(self) -> dict[str, float]:
        """Publish the statistics of episodes finished since the last call, and zero the accumulators.

        Keys: ``Episode/num_finished``, ``Episode/length`` (mean, control steps), ``Episode/rew_<term>`` (mean
        per-term return), ``Episode/term_<name>`` (fraction of episodes the term ended), ``Metrics/<name>``,
        ``Curriculum/<name>`` and ``Diagnostics/nonfinite_resets`` (cumulative). Means appear only when at least
        one episode finished. Episodes ended by non-finite physics are counted only in the diagnostic.
        """
        finished = float(self._finished_episodes.cpu())
        length_sum = float(self._finished_length_sum.cpu())
        self._finished_episodes.zero_()
        self._finished_length_sum.zero_()
        return episode_stats_of(self, finished, length_sum)

    @cold_path
    def action_meta(self) -> dict[str, Any]:
        """Action layout for export and deployment: joint names, default pose, gains, action scale, timing
        (`action_meta_of`)."""
        return action_meta_of(self)

    @cold_path
    def state_dict(self) -> dict[str, torch.Tensor]:
        """CPU copies of every tensor the env carries between steps (simulation and managers), by name."""
        return state_dict_of(self)

    @cold_path
    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        """Put a :meth:`state_dict` back in place; ``ValueError`` when it was saved from another env layout."""
        # A backend still compiling runs its first forward (and derived constants) at the wait: before the
        # saved state goes in, as when it was built at once, so the saved constants are not recomputed.
        self.backend.wait_compiled()
        load_state_dict_into(self, state, what="env state")
        self.state_cache.bump()

    @cold_path
    def close(self) -> None:
        """Release nothing yet (kept for runner symmetry); the backend frees its memory with the env."""

    @cold_path
    def summary(self, width: int = SUMMARY_WIDTH) -> str:
        """The env in a few lines: the header, then per manager its term count and names (cut to ``width``).

        ``str(env)`` has the full per-manager tables.
        """
        return env_summary(self, width)

    @cold_path
    def __str__(self) -> str:
        return env_tables(self)
