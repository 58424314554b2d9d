"""How a training command line becomes a ``TrainConfig``: the preset choice, resume semantics, reserved keys.

``trainrt train`` and ``trainrt config show`` call `resolve_train_config` and print what it returns; a Python
caller (a benchmark, a notebook, a test) calls it directly and gets the config the command line would run,
without importing the CLI (typer):

    >>> from trainrt.config.resolve import resolve_train_config
    >>> cfg, how = resolve_train_config("sac", "g1_walk_flat", "mujoco", ["algo.num_envs=64"], "cpu-demo")
    >>> (cfg.algo.num_envs, cfg.sim.backend, how["preset"])
    (64, 'mujoco', 'cpu-demo')

The rules:

* **Base.** A new run starts from the ``(algo, task)`` preset (``trainrt.config.presets``): the canonical one with
  CUDA, the CPU demo without (``preset_choice``: ``"auto"``; ``"canonical"`` or ``"cpu-demo"`` force one).
  ``None`` for ``algo`` or ``task`` is ``DEFAULT_ALGO`` / ``DEFAULT_TASK`` (``trainrt.tasks.registry``);
  ``None`` for ``sim`` is mjwarp for the canonical preset and mujoco for the CPU demo.
* **Resume.** With ``training.resume=<run dir>`` (the last such override wins; ``null``/``none``/``~``/empty is no
  resume), the base is that run's stored ``config.json``: ``algo`` and ``task`` must be ``None`` or the stored
  ones, ``sim`` may change the backend, a ``task.motion_file`` override replaces the stored clip, and the run
  writes where this command says (the resumed directory unless ``training.run_dir`` is given) without clearing it.
* **Overrides** apply on top, left to right, through the schema's validation; ``algo.name``, ``task.name`` and
  ``sim.backend`` are reserved (`RESERVED_KEYS`: they are the ``algo``/``task``/``sim`` arguments).
* **Checks.** A warning when reward-weight overrides let returns outgrow the critic's support; ``ValueError`` when
  ``sim.device`` names a CUDA device this machine lacks (`check_device_available`), and, for ``--gpus N``, when
  the run resumes another (`check_rank_count`: a resume runs in one process).
* **Run directory.** A new run's ``training.run_dir`` is the preset's or the override's (``None``: the runner
  names one under ``runs/``); a resume's is ``None`` (the resumed directory) unless overridden. Reading a run
  directory's config back (``eval``, ``play``, ``export``, the resume base) is ``trainrt.config.run_config``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence

from trainrt.config.overrides import apply_overrides, parse_override, parse_scalar
from trainrt.config.presets import cpu_demo_preset, preset, support_bound
from trainrt.config.schema import TrainConfig
from trainrt.tasks.registry import DEFAULT_ALGO, DEFAULT_TASK

RESERVED_KEYS: Mapping[str, str] = {
    "algo.name": "set it with --algo",
    "task.name": "set it with --task",
    "sim.backend": "use --sim",
}
"""Keys an override may not set, mapped to what sets them instead."""

_NO_RESUME = frozenset({"null", "none", "~", ""})


def warn_on_stderr(line: str) -> None:
    """A ``warning: ...`` line on stderr (the command line's warnings)."""
    print(f"warning: {line}", file=sys.stderr, flush=True)


def resolve_train_config(
    algo: str | None = None,
    task: str | None = None,
    sim: str | None = None,
    overrides: Sequence[str] = (),
    preset_choice: str = "auto",
    *,
    resume: str | None = None,
    cuda_available: bool | None = None,
    warn: Callable[[str], None] = warn_on_stderr,
) -> tuple[TrainConfig, dict[str, object]]:
    """The validated ``TrainConfig`` of a ``train`` command line, and how it was resolved (for the manifest).

    Args:
        algo, task, sim: ``--algo``, ``--task``, ``--sim`` (``None``: the resumed run's, or the default of a
            new run; see the module docstring).
        overrides: ``"a.b=value"`` strings, as on the command line.
        preset_choice: ``--preset``: ``"auto"``, ``"canonical"`` or ``"cpu-demo"``.
        resume: a run directory to continue, the same as a leading ``training.resume=<resume>`` override.
        cuda_available: whether CUDA is present (``None``: ask torch).
        warn: receives each warning line (default: ``warning: ...`` on stderr, as the command line prints).

    Returns ``(config, resolution)``; ``resolution`` is ``{"preset": "canonical" | "cpu-demo" | "resumed run
    config", "overrides": [...], "cuda_available": bool}``. Raises ``OverrideError``/``ValueError`` (naming the
    valid choices) or ``FileNotFoundError`` (a resumed run without a config).

    Example::

        cfg, how = resolve_train_config("flashsac", "g1_motion_tracking", None, ["algo.max_iterations=160"])
        cfg, how = resolve_train_config(resume="runs/my_run")   # the stored config of runs/my_run
    """
    import torch

    from trainrt.config.run_config import load_resolved_config
    from trainrt.tasks.registry import task_spec

    overrides = list(overrides)
    if resume is not None:
        overrides.insert(0, f"training.resume={resume}")
    if task is not None:
        task_spec(task)  # ValueError naming the registered tasks
    parsed = [parse_override(text) for text in overrides]
    resume = next((o.value_text for o in reversed(parsed) if o.key == "training.resume"), None)
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    if resume is not None and resume.lower() not in _NO_RESUME:
        clip = next(
            (parse_scalar(o.value_text) for o in reversed(parsed) if o.key == "task.motion_file"), None
        )
        # A clip given here replaces the stored one; the runner warns when its content is not the one the
        # checkpoint trained on (the same file moved elsewhere is not).
        base = load_resolved_config(resume, motion_file=None if clip is None else str(clip))
        if algo not in (None, base.algo.name) or task not in (None, base.task.name):
            said = " ".join(f"--{name} {value}" for name, value in (("algo", algo), ("task", task)) if value)
            raise ValueError(
                f"training.resume={resume} trained --algo {base.algo.name} --task {base.task.name}; "
                f"this command says {said}; leave --algo/--task out to resume the run as it was trained"
            )
        chosen = "resumed run config"
        # The resumed run writes where this command says: the resumed directory unless training.run_dir is
        # given (the saved config's run_dir may name the directory it was copied from), and never clears it.
        base = base.model_copy(
            update={
                "sim": base.sim.model_copy(update={"backend": sim or base.sim.backend}),
                "training": base.training.model_copy(update={"run_dir": None, "overwrite": False}),
            }
        )
    else:
        algo, task = algo or DEFAULT_ALGO, task or DEFAULT_TASK
        use_canonical = preset_choice == "canonical" or (preset_choice == "auto" and cuda_available)
        if use_canonical:
            base = preset(algo, task)
            base = base.model_copy(update={"sim": base.sim.model_copy(update={"backend": sim or "mjwarp"})})
            chosen = "canonical"
        else:
            # Without CUDA, CPU MuJoCo steps the G1 several times faster than MuJoCo Warp on Warp's CPU device.
            base = cpu_demo_preset(algo, task, sim or "mujoco")
            chosen = "cpu-demo"
    cfg = apply_overrides(base, parsed, reserved=RESERVED_KEYS, warn=warn)
    _warn_if_returns_outgrow_the_support(cfg, [o.key for o in parsed], warn)
    check_device_available(
        cfg,
        cuda_available=cuda_available,
        cuda_device_count=torch.cuda.device_count() if cuda_available else 0,
    )
    return cfg, {"preset": chosen, "overrides": list(overrides), "cuda_available": cuda_available}


def check_rank_count(cfg: TrainConfig, ranks: int) -> None:
    """``ValueError`` with the fix when ``cfg`` cannot run as ``ranks`` data-parallel processes (``--gpus``):
    a resumed run continues in one process so far."""
    if ranks > 1 and cfg.training.resume is not None:
        raise ValueError(f"training.resume is not supported with --gpus {ranks} yet: resume with one process")


def check_device_available(cfg: TrainConfig, *, cuda_available: bool, cuda_device_count: int) -> None:
    """``ValueError`` with the fix when ``sim.device`` names a CUDA device this machine does not have."""
    device = cfg.sim.device
    if device is None or not device.startswith("cuda"):
        return
    if not cuda_available:
        raise ValueError(
            f"sim.device={device} but no CUDA device is visible (torch.cuda.is_available() is False); "
            "use sim.device=cpu, or leave sim.device unset to pick CUDA when present"
        )
    index = int(device.partition(":")[2] or 0)
    if index >= cuda_device_count:
        raise ValueError(
            f"sim.device={device} but only {cuda_device_count} CUDA device(s) are visible "
            f"(cuda:0..cuda:{cuda_device_count - 1}); choose one of them"
        )


def _warn_if_returns_outgrow_the_support(
    cfg: TrainConfig, keys: list[str], warn: Callable[[str], None]
) -> None:
    """A warning when reward-weight overrides let returns outgrow the critic's C51 support, which the presets
    size to the task's own weights (``config.presets.return_support``) and overrides do not resize."""
    from trainrt.tasks import make_task_cfg

    params = cfg.algo.params
    if not any(k.startswith("task.rewards.") for k in keys) or getattr(params, "reward_scaling", False):
        return  # FlashSAC's reward scaling keeps returns on the support whatever the weights
    if any(k in ("algo.params.v_min", "algo.params.v_max") for k in keys):
        return
    bound = support_bound(make_task_cfg(cfg.task).rewards, params.gamma)
    if bound > params.v_max:
        warn(
            f"with these task.rewards weights returns reach about {bound:g}, beyond the critic's support "
            f"[{params.v_min:g}, {params.v_max:g}] sized for the preset's weights: add "
            f"algo.params.v_min={-bound:g} algo.params.v_max={bound:g}"
        )
