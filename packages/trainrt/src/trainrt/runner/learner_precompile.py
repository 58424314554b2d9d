"""Compiling the learner update in a helper process while the run builds its envs.

On a machine whose compile caches are empty, inductor compiles the learner's update parts in warm-up's
learner phase (tens of seconds), after the envs are built (where Warp compiles the physics kernels, tens of
seconds more). The two do not depend on each other: the learner's graphs need only the config and the
observation and action sizes, which the pre-run probe already found. So a single-process CUDA run starts a
helper process (``python -m trainrt.runner.learner_precompile``) right before it builds its envs; the helper
builds the same agent on the same device with a small replay of the same batch shapes, runs the learner's
half of warm-up (``warm_up.capture_learner``, the very sequence the run runs), and exits. The run waits for it
right before its own learner phase (``warmup_phases_sec``'s ``learner_helper_wait``), so the helper compiles
beside the env's build, reset and first steps; by then inductor's and Triton's caches hold the learner's
kernels, and the run's learner phase finds them there. Where the device's free memory leaves less than
``HEADROOM_BYTES`` beside the helper once the replay is allocated, the run waits for it before allocating the
replay instead.

The helper changes nothing a run computes: it writes compiler cache entries only (inductor's, Triton's: the
folders the run uses, ``TRAINRT_CACHE_DIR`` included), keyed by the graphs they compile, and the run compiles
or loads each graph as it would anyway. If it fails, the run compiles its learner itself, as without it; what
happened is in the run summary's ``learner_precompile``.

``TRAINRT_PRECOMPILE_LEARNER``: ``auto`` (the default) starts the helper unless inductor's cache already holds
this run's learner; on a fresh machine the helper shortened a walk's warm-up by about 15 s on an H100, and with
the learner in the cache the run loads it in a few seconds, less than the helper's own start-up. Whether the
cache holds it is told by a mark (``LEARNER_MARKS``, a small JSON file in inductor's cache folder) that a run
leaves once its learner compiled (``warm_up``): keyed by what decides the learner's graphs (the algo section, the
observation and action sizes, the GPU model, torch's version), so a second task on the same machine, or a
cache shared between tasks, still gets its helper. ``1`` starts it whenever the run can use it, ``0`` never.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from trainrt.hotpath import cold_path

PRECOMPILE_ENV = "TRAINRT_PRECOMPILE_LEARNER"
"""``auto`` (the default: a helper unless inductor's cache holds this learner), ``1`` (always) or ``0`` (never)."""

_ON, _OFF, _AUTO = ("1", "true", "yes", "on"), ("0", "false", "no", "off"), ("auto", "")

WAIT_LIMIT_SEC = 600.0
"""How long a run waits for its helper before stopping it and compiling the learner itself."""

HEADROOM_BYTES = 8 * 2**30
"""Free device memory a run keeps beside a running helper, past what it still allocates (``room_beside``)."""

HELPER_ROWS = 8
"""Rows per env of the helper's replay: the batch shapes, not the capacity, decide the learner's graphs."""


LEARNER_MARKS = "trainrt-learners"
"""The folder, in inductor's cache folder, of the marks of learners compiled there (``mark_learner``)."""


@cold_path
def learner_key(cfg: Any, obs_dims: Mapping[str, int], num_actions: int, device: Any) -> str:
    """What decides a learner's compiled graphs, hashed: the algo section (networks, batch, updates, inductor
    options; not the env count, which sizes the replay, not the batch), whether the learner is compiled and
    captured, the observation and action sizes, the model of GPU ``device`` and torch's version. Two runs
    with equal keys compile the same learner graphs."""
    import torch

    device = torch.device(device)
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else device.type
    facts = {
        "algo": cfg.algo.model_dump(mode="json", exclude={"num_envs"}),
        "compile_learner": cfg.training.compile_learner,
        "cuda_graph": cfg.training.cuda_graph,
        "obs_dims": dict(sorted(obs_dims.items())),
        "num_actions": num_actions,
        "gpu": gpu,
        "torch": torch.__version__,
    }
    return hashlib.sha256(json.dumps(facts, sort_keys=True).encode()).hexdigest()[:32]


def _mark_path(inductor_dir: Path, key: str) -> Path:
    return inductor_dir / LEARNER_MARKS / f"{key}.json"


@cold_path
def learner_marked(inductor_dir: Path | None, key: str) -> bool:
    """Whether a run left the mark of learner ``key`` in inductor's cache folder ``inductor_dir``."""
    return inductor_dir is not None and _mark_path(inductor_dir, key).is_file()


@cold_path
def mark_learner(inductor_dir: Path | None, key: str, what: Mapping[str, Any]) -> None:
    """Leave the mark of learner ``key`` (its compiled graphs are in the cache now), ``what`` in it for a
    reader. Best effort: a folder that cannot be written costs the next run a helper, nothing else."""
    if inductor_dir is None:
        return
    path = _mark_path(inductor_dir, key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        scratch = path.with_name(f".{path.name}.{os.getpid()}")
        scratch.write_text(json.dumps(dict(what), sort_keys=True) + "\n")
        scratch.replace(path)
    except OSError:
        pass


@cold_path
def precompile_refusal(
    cfg: Any,
    device: str,
    world_size: int,
    learner_cached: bool,
    environ: Mapping[str, str] | None = None,
) -> str | None:
    """Why this run compiles its learner without a helper (None: it starts one). ``learner_cached``: inductor's
    cache holds this run's learner (``learner_marked``)."""
    environ = os.environ if environ is None else environ
    setting = environ.get(PRECOMPILE_ENV, "auto").strip().lower()
    if setting not in _ON + _OFF + _AUTO:
        raise ValueError(
            f"{PRECOMPILE_ENV}={environ[PRECOMPILE_ENV]!r}: set it to auto (the default: a helper unless "
            "inductor's cache holds this learner), 1 (always) or 0 (never)"
        )
    if setting in _OFF:
        return f"off ({PRECOMPILE_ENV}={environ[PRECOMPILE_ENV].strip()})"
    if not device.startswith("cuda"):
        return "not a CUDA device"
    if not (cfg.training.compile_learner and cfg.training.cuda_graph):
        return "the learner is not compiled (training.compile_learner or training.cuda_graph is off)"
    if world_size != 1:
        return "a data-parallel run (its optimizers step through the gradient average)"
    if setting in _AUTO and learner_cached:
        return (
            "inductor's cache holds this learner (an earlier run compiled the same algo settings and sizes on "
            f"this GPU model): the run loads it from there ({PRECOMPILE_ENV}=1 starts a helper anyway)"
        )
    return None


class LearnerPrecompile:
    """A running helper process (``start``), and what it did once waited for (``wait``)."""

    def __init__(
        self, process: subprocess.Popen[bytes] | None, output: IO[bytes] | None, refusal: str | None
    ) -> None:
        self._process, self._output = process, output
        self._started = time.perf_counter()
        self._launched_at = time.time()
        self.record: dict[str, Any] = {"skipped": refusal} if refusal is not None else {}

    @classmethod
    @cold_path
    def start(
        cls, cfg: Any, obs_dims: Mapping[str, int], num_actions: int, refusal: str | None
    ) -> LearnerPrecompile:
        """Start the helper for ``cfg``, or none when ``refusal`` (``precompile_refusal``) says why not."""
        if refusal is not None:
            return cls(None, None, refusal)
        spec = {"config": cfg.model_dump(mode="json"), "obs_dims": dict(obs_dims), "num_actions": num_actions}
        return cls.launch(json.dumps(spec), dict(os.environ))

    @classmethod
    @cold_path
    def launch(cls, spec: str, environ: dict[str, str]) -> LearnerPrecompile:
        """Start ``python -m trainrt.runner.learner_precompile`` with ``spec`` (JSON: the config, the observation
        group sizes, the action count) on its input; its output goes to a temporary file (the error's source)."""
        output = tempfile.TemporaryFile()  # noqa: SIM115 (closed when the helper is waited for or stopped)
        process = subprocess.Popen(
            [sys.executable, "-m", "trainrt.runner.learner_precompile"],
            stdin=subprocess.PIPE,
            stdout=output,
            stderr=subprocess.STDOUT,
            env=environ,
        )
        assert process.stdin is not None
        process.stdin.write(spec.encode())
        process.stdin.close()
        return cls(process, output, None)

    @staticmethod
    def room_beside(estimate: Any, free_bytes: int | None) -> bool:
        """Whether a run with pre-flight ``estimate`` (``trainrt.runner.preflight.MemoryEstimate``) can allocate
        its replay, update batch and runtime beside the running helper with ``HEADROOM_BYTES`` to spare, device
        memory now ``free_bytes``. Without one or the other, no: the run waits for the helper first."""
        if estimate is None or free_bytes is None:
            return False
        return free_bytes - (estimate.replay + estimate.update_batch + estimate.runtime) >= HEADROOM_BYTES

    @property
    def started_note(self) -> str:
        """The console's line (after ``set-up: ``) for a helper just started."""
        return (
            "a helper process compiles the learner update while the envs build and take their first steps "
            f"({PRECOMPILE_ENV}=0 turns it off)"
        )

    @cold_path
    def wait_note(self) -> str:
        """Wait for the running helper (``wait``); the console's line on what it did (after ``set-up: `` or
        ``warm-up: ``)."""
        record = self.wait()
        error = record.get("error")
        what = f"failed ({(error.splitlines() or ['no output'])[-1]})" if error is not None else "done"
        seconds, waited = record["seconds"], record["waited_sec"]
        return f"the learner helper {what} after {seconds:.1f}s, waited for it {waited:.1f}s"

    @property
    def running(self) -> bool:
        return self._process is not None and not self.record

    @cold_path
    def wait(self, limit_sec: float = WAIT_LIMIT_SEC) -> dict[str, Any]:
        """Wait for the helper (stopped after ``limit_sec``); the summary's record: its seconds and the seconds
        waited for it, or the reason it did not run, or its error (the tail of its output)."""
        if not self.running:
            return self.record
        process = self._process
        assert process is not None
        waited_from = time.perf_counter()
        note = ""
        try:
            process.wait(timeout=limit_sec)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            note = f"stopped after {limit_sec:.0f} s of waiting"
        now = time.perf_counter()
        self.record = {"seconds": round(now - self._started, 2), "waited_sec": round(now - waited_from, 2)}
        output = self._read_output()
        if process.returncode != 0:
            self.record["error"] = "\n".join(filter(None, (output, note)))
        else:
            steps = _helper_steps(output, self._launched_at)
            if steps is not None:
                self.record["steps_sec"] = steps
        return self.record

    def _read_output(self, lines: int = 12) -> str:
        """The last lines of the helper's output (its error), and the temporary file closed."""
        assert self._output is not None
        self._output.seek(0)
        text = self._output.read().decode(errors="replace")
        self._output.close()
        return "\n".join(text.strip().splitlines()[-lines:])[-2000:]

    @cold_path
    def stop(self) -> None:
        """Stop a helper still running (the run ended before waiting for it)."""
        if self.running:
            assert self._process is not None and self._output is not None
            self._process.kill()
            self._process.wait()
            self._output.close()
            self.record = {"skipped": "the run ended before its learner phase"}


@cold_path
def helper_replay(cfg: Any, obs_dims: Mapping[str, int], num_actions: int, device: str) -> Any:
    """The helper's replay: a run's batch shapes (``algo.params``, ``obs_dims``, ``num_actions``) in one env of
    ``HELPER_ROWS`` rows."""
    from trainrt.replay.buffer import DeviceReplayBuffer

    params = cfg.algo.params
    return DeviceReplayBuffer(
        num_envs=1,
        capacity_per_env=max(HELPER_ROWS, params.n_step + 1),
        obs_dims=dict(obs_dims),
        num_actions=num_actions,
        n_step=params.n_step,
        device=device,
        gamma=params.gamma,
    )


@cold_path
def precompile(cfg: Any, obs_dims: Mapping[str, int], num_actions: int) -> dict[str, float]:
    """The helper's work: the run's agent on the run's device and the learner's half of warm-up; the seconds
    of its steps (``imports``, ``agent``, ``learner``)."""
    began = time.perf_counter()
    import torch

    from trainrt.runner.build import build_agent, resolve_device
    from trainrt.runner.compile_cache import point_compile_caches
    from trainrt.runner.warm_up import capture_learner

    steps = {"imports": time.perf_counter() - began}
    # the run's cache folders ($TRAINRT_CACHE_DIR), pointed as the run points them
    point_compile_caches(cfg.sim.backend)
    device = resolve_device(cfg)
    torch.manual_seed(cfg.training.seed)
    agent = build_agent(cfg, dict(obs_dims), num_actions, device)
    steps["agent"] = time.perf_counter() - began - sum(steps.values())
    capture_learner(cfg, agent, helper_replay(cfg, obs_dims, num_actions, device))
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)  # the kernels ran: every compile finished
    steps["learner"] = time.perf_counter() - began - sum(steps.values())
    return steps


STEPS_LINE = "learner helper steps: "
"""How the helper's last line of output starts: then JSON, its steps' seconds (``steps_sec`` in its record)."""


def _helper_steps(output: str, launched_at: float) -> dict[str, float] | None:
    """The helper's steps' seconds from its last line of ``output`` (JSON data, nothing run), with ``start``:
    from its launch (wall clock ``launched_at``) to its own first line, the interpreter's start and imports.
    None when the line is missing or unreadable (the record then goes without it)."""
    last = output.splitlines()[-1] if output.strip() else ""
    if not last.startswith(STEPS_LINE):
        return None
    try:
        steps = json.loads(last[len(STEPS_LINE) :])
        return {"start": round(float(steps.pop("entered_at")) - launched_at, 2), **steps}
    except (ValueError, KeyError, TypeError, AttributeError):
        return None


def main() -> None:
    from trainrt.config.schema import load_stored_config

    entered = time.time()
    spec = json.loads(sys.stdin.read())
    cfg = load_stored_config(json.dumps(spec["config"]))
    steps = {"config": time.time() - entered}
    steps.update(precompile(cfg, spec["obs_dims"], int(spec["num_actions"])))
    print(STEPS_LINE + json.dumps({"entered_at": entered, **{k: round(v, 2) for k, v in steps.items()}}))


if __name__ == "__main__":
    main()
