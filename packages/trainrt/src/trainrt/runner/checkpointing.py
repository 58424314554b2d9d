"""A run's checkpoints: what one holds, writing them as the run goes, after a stop, and restoring one on resume.

The files themselves (names, atomic writes, loading, checks) are ``trainrt.runner.checkpoint``'s; this module
is what a training run does with them. A checkpoint holds the agent, the generators, the timings, the config,
the env's metadata, the run id and the replay's state (its rings too with ``training.save_replay``, and then
the env's and the collector's state: a resume continues exactly, ``continue_exactly``).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from trainrt.config import TrainConfig
from trainrt.hotpath import cold_path
from trainrt.runner.checkpoint import (
    capture_rng_states,
    check_motion_clips,
    load_agent_weights,
    restore_rng_states,
    save_checkpoint,
)
from trainrt.runner.stop_signals import StopSignals, raised_by_ctrl_c
from trainrt.runner.summary import IterationTiming

ERROR_TEXT_LIMIT = 4000  # characters of a summary's error text


def run_generators(env: Any) -> dict[str, torch.Generator]:
    """The run's generators outside the agent (the agent's own are in its state dict)."""
    return {"env": env.rng}


@cold_path
def checkpoint_payload(
    cfg: TrainConfig,
    *,
    env: Any,
    agent: Any,
    replay: Any,
    collector: Any,
    timings: list[IterationTiming],
    env_meta: dict[str, Any],
    run_id: str,
) -> dict[str, Any]:
    """What a checkpoint of the run holds (the iteration is added by ``save_checkpoint``)."""
    payload = {
        "agent": agent.state_dict(),
        "rng": capture_rng_states(run_generators(env)),
        "timings": [t.model_dump() for t in timings],
        "config": cfg.model_dump(mode="json"),
        "env_meta": env_meta,
        "device": str(env.device),
        "run_id": run_id,
        "replay": replay.state_dict(include_rings=cfg.training.save_replay),
    }
    if cfg.training.save_replay and collector is not None:
        # With the replay, the rest of the run state: a resume continues exactly (continue_exactly).
        payload["env_state"] = env.state_dict()
        payload["collector"] = collector.state_dict()
    return payload


class RunCheckpoints:
    """The checkpoints one run writes into its directory (rank 0 only: the weights are the same everywhere).

    Attributes:
        last_path: the newest checkpoint of this run (written or resumed from), ``None`` before any.
        last_iteration: the iteration it holds (-1 before any).
    """

    def __init__(self, run_dir: Path, *, log: Callable[[str], None]) -> None:
        self.run_dir = run_dir
        self.log = log
        self.last_path: Path | None = None
        self.last_iteration = -1
        self._exactly_from: dict[str, Any] | None = (
            None  # the checkpoint resumed, when it holds the whole state
        )

    @property
    def resumes_exactly(self) -> bool:
        """Whether the run resumed a checkpoint that holds the whole run state (``training.save_replay``)."""
        return self._exactly_from is not None

    @cold_path
    def restore(self, checkpoint: dict[str, Any], *, env: Any, agent: Any, replay: Any) -> Resumed:
        """``restore_checkpoint``, and the checkpoint becomes the run's newest."""
        resumed = restore_checkpoint(checkpoint, env=env, agent=agent, replay=replay, log=self.log)
        self.last_path, self.last_iteration = resumed.path, resumed.iteration
        self._exactly_from = checkpoint if resumed.exact else None
        return resumed

    @cold_path
    def continue_exactly(self, *, env: Any, agent: Any, replay: Any, collector: Any) -> None:
        """``continue_exactly`` from the checkpoint ``restore`` took (``resumes_exactly``)."""
        assert self._exactly_from is not None
        continue_exactly(
            self._exactly_from, env=env, agent=agent, replay=replay, collector=collector, log=self.log
        )

    def holds(self, iteration: int) -> bool:
        """Whether there is nothing new to save after ``iteration`` completed iterations."""
        return iteration in (0, self.last_iteration)

    @cold_path
    def save(self, iteration: int, payload: dict[str, Any]) -> None:
        """Atomically write the checkpoint of ``iteration`` completed iterations."""
        self.last_path = save_checkpoint(self.run_dir, iteration, payload)
        self.last_iteration = iteration

    @cold_path
    def save_on_interrupt(
        self,
        stop: KeyboardInterrupt,
        signals: StopSignals,
        iteration: int,
        *,
        built: bool,
        save: Callable[[], None],
    ) -> str:
        """Save (``save``) the last completed iteration after a stop; the summary's error text.

        ``iteration`` iterations completed; ``built``: the agent exists. A second Ctrl-C during the save stops
        it at once: it surfaces as ``KeyboardInterrupt``, or as the ``RuntimeError`` of an interrupted
        ``torch.save`` (the atomic write leaves no torn file). A save that fails is abandoned too: the run stops
        with its interrupted summary either way. The text names an abandoned save.
        """
        error = signals.describe()
        if signals.stopped_inside_iteration:
            # The agent, the replay and the generators hold part of the next iteration: saved as iteration
            # `iteration`, a resume would not continue that iteration's state.
            newest = self.last_iteration
            which = f"a Ctrl-C after the {signals.name}" if signals.then_ctrl_c else "a second Ctrl-C"
            note = (
                f"{which} stopped iteration {iteration + 1} half done, so no checkpoint was saved "
                f"(the newest is {f'iteration {newest}' if newest > 0 else 'none'})"
            )
            self.log(f"\ninterrupted ({signals.name}): {note}")
            return f"{error}; {note}"[-ERROR_TEXT_LIMIT:]
        if not built or self.holds(iteration):  # stopped in set-up or warm-up, or right after a checkpoint
            self.log(
                f"\ninterrupted ({signals.name}): no iteration completed since the start or the last "
                "checkpoint, so there is no checkpoint to save"
            )
            return error
        self.log(f"\ninterrupted ({signals.name}): saving a checkpoint of the last completed iteration")
        try:
            save()
        except (Exception, KeyboardInterrupt) as err:
            why = (
                "a second Ctrl-C stopped its write"
                if raised_by_ctrl_c(err, stop)
                else "".join(traceback.format_exception_only(type(err), err)).strip()
            )
            error += f"; the checkpoint of iteration {iteration} was abandoned ({why})"
            self.log(f"checkpoint of iteration {iteration} abandoned ({why}); writing the summary")
        return error[-ERROR_TEXT_LIMIT:]


# --- resume ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Resumed:
    """What a run continues from a checkpoint: its timings, its iteration and file, whether exactly."""

    timings: list[IterationTiming]
    iteration: int
    path: Path
    exact: bool  # the checkpoint holds the whole run state and it fits: continue_exactly after warm-up


@cold_path
def restore_checkpoint(
    checkpoint: dict[str, Any], *, env: Any, agent: Any, replay: Any, log: Callable[[str], None]
) -> Resumed:
    """Put the checkpoint's weights, generators and replay state in place (before warm-up)."""
    check_motion_clips(checkpoint, env, consequence="training goes on with the clip as it is now")
    load_agent_weights(agent, checkpoint)
    if torch.device(checkpoint["device"]).type == env.device.type:
        restore_rng_states(run_generators(env), checkpoint["rng"])
    else:  # generator states do not transfer between device types
        log(f"note: the checkpoint comes from a {checkpoint['device']} run; generators start fresh")
    timings = [IterationTiming.model_validate(t) for t in checkpoint["timings"]]
    iteration = int(checkpoint["iteration"])
    log(f"resumed from {checkpoint['path']} at iteration {iteration}")
    _restore_replay(replay, checkpoint.get("replay"), log)
    exact = _can_continue_exactly(checkpoint, env, replay, log)
    return Resumed(timings=timings, iteration=iteration, path=Path(checkpoint["path"]), exact=exact)


@cold_path
def _restore_replay(replay: Any, state: dict[str, Any] | None, log: Callable[[str], None]) -> None:
    """Load the checkpoint's replay state (return statistics; rings if saved) and say what refills."""
    if state is None:
        log("note: the checkpoint has no replay state; return statistics restart and the replay refills")
        return
    for note in replay.load_state_dict(state):
        log(f"note: {note}")
    if "rings" in state:
        log(f"replay restored from the checkpoint ({replay.num_rows()} rows per env)")
    else:
        log(
            "replay statistics restored; the replay itself refills during warm-up "
            "(training.save_replay=true saves it in checkpoints)"
        )


@cold_path
def _can_continue_exactly(
    checkpoint: dict[str, Any], env: Any, replay: Any, log: Callable[[str], None]
) -> bool:
    """Whether the checkpoint holds the whole run state (``training.save_replay``) and it fits this run.

    Then warm-up takes no steps of its own and ends by putting the env, the collector, the replay, the
    learner and every generator back as the checkpoint left them: the run continues as if never stopped.
    """
    saved_replay = checkpoint.get("replay") or {}
    if "rings" not in saved_replay or "env_state" not in checkpoint or "collector" not in checkpoint:
        return False
    if torch.device(checkpoint["device"]).type != env.device.type:
        log("note: the checkpoint comes from another device type; the run continues from a fresh env")
        return False
    if replay.num_rows() == 0:  # the rings did not fit (the note above says why)
        return False
    try:
        env.load_state_dict(checkpoint["env_state"])  # also the check that it fits
    except ValueError as err:
        log(f"note: {err}; the run continues from a fresh env")
        return False
    return True


@cold_path
def continue_exactly(
    checkpoint: dict[str, Any],
    *,
    env: Any,
    agent: Any,
    replay: Any,
    collector: Any,
    log: Callable[[str], None],
) -> None:
    """Put the checkpoint's run state back in place (after warm-up's captures and first updates)."""
    load_agent_weights(agent, checkpoint)
    replay.load_state_dict(checkpoint["replay"])
    env.load_state_dict(checkpoint["env_state"])
    collector.load_state_dict(checkpoint["collector"])
    restore_rng_states(run_generators(env), checkpoint["rng"])
    log(
        f"continuing exactly where iteration {checkpoint['iteration']} ended: env, collector, replay, "
        "learner and generators as the checkpoint saved them"
    )
