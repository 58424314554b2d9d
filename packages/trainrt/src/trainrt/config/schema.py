"""The training config: pydantic v2 models with ``extra="forbid"``, one section per concern.

``TrainConfig`` = ``algo`` (which learner, how many envs and iterations, the learner's hyperparameters in
``algo.params``) + ``task`` + ``sim`` (backend and contact buffers) + ``training`` (seed, run directory,
graphs, checkpoints, logging, measurement window). The defaults here are the one home of the run and
simulation settings, as the learner config classes' are of the learner's (``trainrt.algos``); presets
(``trainrt.config.presets``) name only what differs from them; command-line overrides
(``trainrt.config.overrides``) change single fields and go through the same validation. The resolved config is
written to ``<run_dir>/config.json``.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from trainrt.algos import FlashSacConfig, SacConfig
from trainrt.config.renames import STORED_CONFIG_KEY, RenamedField, translate_renamed_fields, warn_deprecated

AlgoName = Literal["sac", "flashsac"]
SimBackendName = Literal["mujoco", "mjwarp"]
_DEVICE_PATTERN = re.compile(r"cpu|cuda(:\d+)?")
ALGO_NAMES: tuple[str, ...] = get_args(AlgoName)
SIM_BACKEND_NAMES: tuple[str, ...] = get_args(SimBackendName)

_STRICT = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
"""Every config model: unknown keys refused, assignments validated, and every float finite (a field whose
meaning needs inf or nan says so in its description and sets ``Field(allow_inf_nan=True)``)."""

MAX_DURATION_S = 1e9
"""Longest duration setting, in seconds (about 32 years: ``eval`` sets 1e9 s for "never"). A duration becomes
control steps or a timeout; at this bound those stay far inside int64 (1e13 steps at a 0.1 ms step) and
``datetime.timedelta``'s range, where inf or 1e300 overflowed."""

NEVER_S = MAX_DURATION_S
"""A time that never passes in a run: a resampling interval or an episode limit set to it never elapses (the
gait phase drawn at reset only, an evaluation without resampling or episode limit)."""


class _AlgoSectionBase(BaseModel):
    """Fields every algorithm section has: how big the run is and how an iteration is cut."""

    model_config = _STRICT

    name: str = Field(description="the algorithm: sac or flashsac (selects the params model)")
    num_envs: int = Field(ge=1, description="parallel envs (worlds)")
    max_iterations: int = Field(ge=1, description="training iterations (a resumed run continues up to this)")
    steps_per_iteration: int = Field(
        ge=1,
        description="vector env steps per iteration (each is num_envs env steps); updates per iteration "
        "are algo.params.updates_per_iteration",
    )


class SacAlgoSection(_AlgoSectionBase):
    """``algo`` for FastSAC-style SAC; ``params`` are ``trainrt.algos.SacConfig``."""

    name: Literal["sac"] = Field("sac", description="the algorithm (set it with --algo)")
    params: SacConfig = Field(default_factory=SacConfig)


class FlashSacAlgoSection(_AlgoSectionBase):
    """``algo`` for FlashSAC; ``params`` are ``trainrt.algos.FlashSacConfig``."""

    name: Literal["flashsac"] = Field("flashsac", description="the algorithm (set it with --algo)")
    params: FlashSacConfig = Field(default_factory=FlashSacConfig)


AlgoSection = Annotated[SacAlgoSection | FlashSacAlgoSection, Field(discriminator="name")]
"""The ``algo`` section; ``name`` selects which hyperparameter model ``params`` is."""


TermOverrides = dict[str, dict[str, Any]]
"""Per-term overrides of one manager: term name -> changes (see ``trainrt.tasks.term_overrides``)."""


class TaskSection(BaseModel):
    """``task``: which task config factory builds the env, and what to change in it.

    ``trainrt.tasks.make_task_cfg(section)`` builds the factory's config and applies the changes; they are
    checked against that config when the section is validated (unknown terms, keys and params name the valid
    ones), e.g. ``task.rewards.action_rate_l2.weight=-0.05``, ``task.events.push_robot.enabled=false``,
    ``task.commands.twist.params.lin_vel_x=[0.5,0.5]``, ``task.observations.policy.joint_vel.noise.n_max=1.0``,
    ``task.motion_file=<clip name or npz path>``.
    """

    model_config = _STRICT

    name: str = Field(description="the task (set it with --task): a name in the task registry")
    motion_file: str | None = Field(
        None,
        description="motion clip of a tracking task: a holosoma or BeyondMimic/mjlab npz path, or the name of a "
        "clip among the assets of the task's robot (None: the task's default clip)",
    )
    episode_length_s: float | None = Field(
        None, gt=0.0, le=MAX_DURATION_S, description="episode length in seconds (None: the task's)"
    )
    actions: TermOverrides = Field(default_factory=dict, description="action terms: {name: {params}}")
    rewards: TermOverrides = Field(
        default_factory=dict, description="reward terms: {name: {weight, params, enabled}}"
    )
    terminations: TermOverrides = Field(
        default_factory=dict, description="termination terms: {name: {params, time_out, enabled}}"
    )
    events: TermOverrides = Field(
        default_factory=dict,
        description="events (domain randomization, pushes): {name: {params, interval_range_s, enabled}}",
    )
    commands: TermOverrides = Field(
        default_factory=dict, description="command terms (ranges): {name: {params, resampling_time_range_s}}"
    )
    observations: dict[str, TermOverrides] = Field(
        default_factory=dict,
        description="observation terms, by group: {group: {name: {params, scale, clip, noise, history_length, "
        "enabled}}}; noise takes the fields of the term's own noise, e.g. {n_min, n_max}",
    )
    terrain: dict[str, Any] = Field(
        default_factory=dict,
        description="changes to the task's terrain grid (a task with one): TerrainGridCfg fields, e.g. num_rows, "
        "max_init_level, difficulty_range, and each type's under types, e.g. types.stairs_up.proportion",
    )

    @field_validator("name")
    @classmethod
    def _task_is_registered(cls, value: str) -> str:
        from trainrt.tasks.registry import task_spec

        task_spec(value)  # ValueError naming the registered tasks
        return value

    @field_validator("motion_file")
    @classmethod
    def _motion_file_exists(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or "name" not in info.data:
            return value
        from trainrt.tasks import check_motion_file

        return check_motion_file(info.data["name"], value)

    @field_validator("terrain")
    @classmethod
    def _terrain_fits_the_task(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        _refuse_non_finite_numbers(value, "task.terrain")
        if not value or "name" not in info.data:
            return value
        from trainrt.tasks import check_terrain_changes

        check_terrain_changes(info.data["name"], value)
        return value

    @field_validator("actions", "rewards", "terminations", "events", "commands", "observations")
    @classmethod
    def _terms_fit_the_task(cls, value: TermOverrides, info: ValidationInfo) -> TermOverrides:
        _refuse_non_finite_numbers(value, f"task.{info.field_name}")
        if not value or "name" not in info.data:
            return value
        from trainrt.tasks import check_term_overrides

        check_term_overrides(info.data["name"], info.field_name, value)
        return value


def _refuse_non_finite_numbers(value: Any, key: str) -> None:
    """``ValueError`` naming the dotted key of the first inf or nan in ``value`` (a number, or text that reads as
    one, inside nested dicts and lists): a term override's numbers must be finite too."""
    if isinstance(value, dict):
        for name, item in value.items():
            _refuse_non_finite_numbers(item, f"{key}.{name}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _refuse_non_finite_numbers(item, f"{key}[{index}]")
    elif isinstance(value, (float, str)):
        try:
            number = float(value)
        except ValueError:
            return
        if not math.isfinite(number):
            raise ValueError(f"{key} must be a finite number, got {value!r}")


class SimSection(BaseModel):
    """``sim``: the simcore backend, its device, contact-buffer sizes and solver iteration limits."""

    model_config = _STRICT

    backend: SimBackendName = Field(description="mjwarp (MuJoCo Warp; CUDA when present) or mujoco (CPU)")
    device: str | None = Field(None, description="torch device; None: cuda for mjwarp when present, else cpu")
    nconmax: int | None = Field(None, ge=1, description="contacts per world buffer (None: the task's value)")
    njmax: int | None = Field(None, ge=1, description="constraint rows per world (None: the task's value)")
    solver_iterations: int | None = Field(
        None,
        ge=1,
        description="the constraint solver's iteration limit, opt.iterations (None: the task model's, 10 for "
        "the G1 tasks); fewer make a contact-rich step cheaper and change the physics",
    )
    ls_iterations: int | None = Field(
        None,
        ge=1,
        description="the solver's line-search iteration limit, opt.ls_iterations (None: the task model's, 20 "
        "for the G1 tasks)",
    )

    @field_validator("device")
    @classmethod
    def _device_is_cpu_or_cuda(cls, value: str | None) -> str | None:
        if value is not None and not _DEVICE_PATTERN.fullmatch(value):
            raise ValueError(f"device must be 'cpu', 'cuda' or 'cuda:<index>', got {value!r}")
        return value


class DistributedSection(BaseModel):
    """``training.distributed``: how the ranks of a multi-process run talk (the launcher sets how many).

    The number of ranks is a launch fact, not a config value: ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` from
    ``torchrun`` or ``trainrt train --gpus N``. Without them the run is one process and this section is unused.
    """

    model_config = _STRICT

    backend: Literal["auto", "nccl", "gloo"] = Field(
        "auto", description="torch.distributed backend: auto = nccl on CUDA, gloo on CPU"
    )
    timeout_sec: float = Field(
        300.0,
        gt=0.0,
        le=MAX_DURATION_S,
        description="a collective waiting longer than this fails the rank (no hung process)",
    )
    check_every: int = Field(
        10, ge=0, description="iterations between cross-rank weight checksums (0: only at the end)"
    )


class WandbSection(BaseModel):
    """``training.wandb``: the optional Weights & Biases logger (``pip install 'trainrt[wandb]'``).

    When enabled, rank 0 logs the same scalars as TensorBoard at the same steps (the iteration) to one W&B run
    whose id is the run's id (a resumed run continues it) and whose config is the resolved config. W&B keeps
    its local files where it does by default (``WANDB_DIR``, else ``./wandb``), not in the run directory.
    """

    model_config = _STRICT

    enabled: bool = Field(
        False, description="log the run's scalars to Weights & Biases (needs trainrt[wandb])"
    )
    project: str = Field("trainrt", min_length=1, description="W&B project of the run")
    entity: str | None = Field(None, description="W&B entity (team or user; None: your default entity)")
    run_name: str | None = Field(None, description="W&B run name (None: the run directory's name)")
    group: str | None = Field(None, description="W&B group of the run (None: none)")
    tags: tuple[str, ...] = Field((), description="W&B tags of the run")
    mode: Literal["online", "offline", "disabled"] = Field(
        "online", description="W&B mode: online, offline (sync later with `wandb sync`), or disabled"
    )


class TrainingSection(BaseModel):
    """``training``: everything about running, measuring and saving that is not the learner's math."""

    model_config = _STRICT

    seed: int = Field(0, ge=0, description="seeds the env generator, the agent and torch")
    run_dir: str | None = Field(None, description="run directory (None: runs/<algo>_<task>_<sim>_<time>)")
    final_eval: bool = Field(
        True,
        description="run the deterministic evaluation rollout at the end of training (results in "
        "run_summary.json's final_eval)",
    )
    play_steps: int = Field(
        250, ge=1, description="control steps of the final evaluation rollout (and trainrt play's default)"
    )
    export_onnx: bool = Field(
        True, description="export the actor (with its normalizer) to <run_dir>/policy.onnx"
    )
    cuda_graph: bool = Field(
        True, description="replay collector and learner as CUDA graphs (false: eager A/B)"
    )
    collector_steps_per_replay: int = Field(
        1, ge=1, description="K: control steps per collector graph replay; divides algo.steps_per_iteration"
    )
    checkpoint_every: int = Field(50, ge=0, description="iterations between checkpoints (0: only at the end)")
    time_limit_sec: float | None = Field(
        None,
        gt=0.0,
        description="end the run after the first iteration that finishes this many seconds after its set-up "
        "began (warm-up included), as if algo.max_iterations were reached there: a checkpoint, the final "
        "eval, a completed summary with time_limit_reached=true (None: no limit)",
    )
    resume: str | None = Field(None, description="run directory whose last checkpoint to continue from")
    tail_window: int = Field(100, ge=1, description="W: iterations in the tail_env_steps_per_sec window")
    log_every: int = Field(
        1,
        ge=1,
        description="iterations between console blocks and scalars (TensorBoard, W&B); the progress line shows "
        "every iteration",
    )
    tensorboard: bool = Field(True, description="write TensorBoard scalars to <run_dir>/tensorboard")
    wandb: WandbSection = Field(
        default_factory=WandbSection, description="the optional Weights & Biases logger (off by default)"
    )
    video_every: int = Field(
        0,
        ge=0,
        description="iterations between policy videos in <run_dir>/videos and TensorBoard (0: none); "
        "recorded between iterations, outside the throughput window",
    )
    video_seconds: float = Field(
        2.0, gt=0.0, le=MAX_DURATION_S, description="simulated seconds of each training.video_every video"
    )
    video_renderer: Literal["auto", "egl", "osmesa", "software"] = Field(
        "auto", description="renderer of the training videos (auto: EGL with a CUDA GPU, else software)"
    )
    overlap: bool = Field(
        False,
        description="run the collector and the learner of an iteration concurrently on two CUDA streams "
        "(the learner trains on the replay as of the iteration's start; see adr/0011); false: one after "
        "the other",
    )
    learner_sms: int | None = Field(
        None,
        ge=1,
        description="overlapped on CUDA: hold the learner's graphs to this many multiprocessors (a CUDA green "
        "context), so that the collector's kernels keep the rest; None: both share the whole GPU (adr/0026). "
        "For a collector-bound task, whose learner takes well under its collector's time",
    )
    compile_learner: bool = Field(
        True, description="fuse the learner update's network math with torch.compile (CUDA only)"
    )
    compile_collector: bool = Field(
        True,
        description="fuse the collector's per-step math with torch.compile: the env's terminations, rewards, "
        "metrics and observations, the policy's stochastic action and the replay write (CUDA only)",
    )
    distributed: DistributedSection = Field(
        default_factory=DistributedSection, description="multi-process (one rank per GPU) settings"
    )
    overwrite: bool = Field(
        False, description="clear a non-empty training.run_dir before a new run (else it is refused)"
    )
    fail_on_overflow: bool = Field(
        False, description="a contact or constraint buffer overflow fails the run (else a warning)"
    )
    save_replay: bool = Field(
        False, description="save the replay buffer's rings in every checkpoint (resume without refilling)"
    )

    renamed_fields: ClassVar[tuple[RenamedField, ...]] = (
        RenamedField("training.no_play", "training.final_eval", inverted=True),
    )
    """Old keys still read (``trainrt.config.renames``): ``training.no_play=true`` is ``final_eval=false``."""

    @model_validator(mode="before")
    @classmethod
    def _read_renamed_fields(cls, data: Any, info: ValidationInfo) -> Any:
        """Read a deprecated key as its new one (quietly for a run directory's stored ``config.json``)."""
        stored = bool((info.context or {}).get(STORED_CONFIG_KEY))
        return translate_renamed_fields(cls, data, warn=None if stored else warn_deprecated)

    @field_validator("run_dir", "resume")
    @classmethod
    def _path_is_not_empty(cls, value: str | None, info) -> str | None:
        if value is not None and not value.strip():
            example = "runs/<run>" if info.field_name == "resume" else "runs/my_run"
            raise ValueError(
                f"training.{info.field_name} is empty: give a run directory (training.{info.field_name}="
                f"{example}) or leave it out"
            )
        return value


class TrainConfig(BaseModel):
    """The whole resolved config of a training run."""

    model_config = _STRICT

    algo: AlgoSection
    task: TaskSection
    sim: SimSection
    training: TrainingSection = Field(default_factory=TrainingSection)

    @model_validator(mode="after")
    def _iteration_is_whole_replays(self) -> TrainConfig:
        """An iteration must be a whole number of collector replays."""
        k = self.training.collector_steps_per_replay
        if self.algo.steps_per_iteration % k:
            raise ValueError(
                f"algo.steps_per_iteration={self.algo.steps_per_iteration} is not a multiple of "
                f"training.collector_steps_per_replay={k}"
            )
        return self

    @model_validator(mode="after")
    def _warm_up_fits_the_replay(self) -> TrainConfig:
        """The warm-up must fit the replay: each of its vector steps writes one row per env, so more steps than
        ``buffer_size_per_env`` rows overwrite the warm-up's own first rows before the first update samples."""
        params = self.algo.params
        if params.learning_starts >= params.buffer_size_per_env:
            raise ValueError(
                f"algo.params.learning_starts={params.learning_starts} warm-up steps do not fit the replay's "
                f"algo.params.buffer_size_per_env={params.buffer_size_per_env} rows per env (each warm-up step "
                "writes one row per env, and the first update samples them): lower algo.params.learning_starts "
                f"below {params.buffer_size_per_env} or raise algo.params.buffer_size_per_env above "
                f"{params.learning_starts}"
            )
        return self


def load_stored_config(text: str) -> TrainConfig:
    """Validate the JSON text of a run directory's ``config.json``, written by this or an earlier version.

    Keys renamed since (``TrainingSection.renamed_fields``) are read as their new names without a warning: the
    file is a record, not a use of the old key.
    """
    return TrainConfig.model_validate_json(text, context={STORED_CONFIG_KEY: True})
