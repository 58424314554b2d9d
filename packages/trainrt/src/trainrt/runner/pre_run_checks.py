"""The checks of a run's input before anything is written: the checkpoint to resume and a probe of the config.

Both raise usage errors (``ValueError``, ``FileNotFoundError``) naming the setting to change, so a run that
cannot work stops before its run directory (and its summary) exists. The third check, whether the config
fits the device's memory, is ``trainrt.runner.preflight.check_memory_fits``.
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from trainrt.config import TrainConfig
from trainrt.hotpath import cold_path
from trainrt.runner.build import build_agent, build_env
from trainrt.runner.checkpoint import check_action_mapping, load_checkpoint, load_fitting_weights
from trainrt.runner.manifest import recorded_run_id
from trainrt.runner.run_dir import new_run_id


@cold_path
def load_resume_checkpoint(resume_dir: Path, cfg: TrainConfig, log: Callable[[str], None]) -> dict[str, Any]:
    """Load the last usable checkpoint of ``resume_dir``; ``ValueError`` unless it can continue ``cfg``."""
    if not resume_dir.is_dir():
        raise FileNotFoundError(f"training.resume={resume_dir}: no such run directory")
    checkpoint = load_checkpoint(resume_dir, map_location="cpu", log=log)
    saved = checkpoint["config"]
    for key, now in (("algo", cfg.algo.name), ("task", cfg.task.name)):
        before = saved.get(key, {}).get("name")
        if before != now:
            raise ValueError(f"cannot resume {resume_dir}: it trained {key} {before!r}, this run is {now!r}")
    iteration = int(checkpoint["iteration"])
    if iteration >= cfg.algo.max_iterations:
        raise ValueError(
            f"cannot resume {resume_dir}: its checkpoint is at iteration {iteration} and "
            f"algo.max_iterations={cfg.algo.max_iterations}; raise algo.max_iterations to train further"
        )
    if saved["algo"]["num_envs"] != cfg.algo.num_envs:
        log(f"note: resuming with {cfg.algo.num_envs} envs (the run used {saved['algo']['num_envs']})")
    return checkpoint


@cold_path
def run_id_to_continue(checkpoint: dict[str, Any] | None, resume: str) -> str:
    """The run id a resume continues: the checkpoint's, else the resumed directory's, else a new one."""
    return (checkpoint or {}).get("run_id") or recorded_run_id(resume) or new_run_id()


@cold_path
def probe_config(cfg: TrainConfig, checkpoint: dict[str, Any] | None) -> tuple[dict[str, int], int]:
    """Build ``cfg``'s env (one row, CPU MuJoCo) and agent (CPU), before anything is written; the env's
    observation group sizes and action count.

    ``ValueError`` or ``FileNotFoundError`` (usage errors) for input they cannot be built from, naming the
    setting to change, and for a ``checkpoint`` to resume whose actions or networks differ from them.
    The parts are dropped and change no generator training uses: they have their own, the agent initializes
    its networks under a forked global generator, and the runner's set-up seeds torch's global generator
    afterwards.
    """
    sim = cfg.sim.model_copy(update={"backend": "mujoco", "device": "cpu"})
    cfg = cfg.model_copy(update={"sim": sim})
    motion_file = cfg.task.motion_file
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # the real env says what it builds
            probe = build_env(cfg, num_envs=1)
    except (ValueError, FileNotFoundError) as err:
        if motion_file is not None:
            raise usage_error(err, "task.motion_file", f"change task.motion_file, now {motion_file}") from err
        raise usage_error(err, "task.", "check the task.* settings") from err
    try:
        # Every term once after a reset and once after a step: a term returning the wrong shape or dtype,
        # or NaN, is named here rather than failing deep in the env or the learner after the run directory
        # is written.
        probe.reset()
        probe.check_term_outputs()
        probe.step(torch.zeros(1, probe.num_actions, device=probe.device))
        probe.check_term_outputs()
    except ValueError as err:
        raise usage_error(err, "task.", "fix the term, or its task.* settings") from err
    try:
        try:
            agent = build_agent(cfg, probe.obs_dims, probe.num_actions, "cpu")
        except (ValueError, FileNotFoundError) as err:
            named = [k for k in type(cfg.algo.params).model_fields if re.search(rf"\b{k}\b", str(err))]
            if named:
                key = f"algo.params.{named[0]}"
                raise usage_error(err, key, f"change {key}") from err
            raise usage_error(err, "algo.params", "check the algo.params settings") from err
        if checkpoint is not None:
            # The actions must mean the same joint targets (a task's bounds can change between versions,
            # adr/0014), and the checkpoint's weights must fit this config's networks.
            check_action_mapping(checkpoint, probe)
            load_fitting_weights(checkpoint, agent, cfg, dict(probe.obs_dims))
        return dict(probe.obs_dims), probe.num_actions
    finally:
        probe.close()


def usage_error(err: ValueError | FileNotFoundError, key: str, hint: str) -> ValueError | FileNotFoundError:
    """``err`` as a usage error of its kind, with ``(hint)`` added unless its message names ``key``."""
    message = str(err)
    if key not in message:
        message += f" ({hint})"
    return FileNotFoundError(message) if isinstance(err, FileNotFoundError) else ValueError(message)
