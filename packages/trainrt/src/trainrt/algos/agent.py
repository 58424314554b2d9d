"""The `Agent` base: what the runner codes against, plus the learner-graph lifecycle both algorithms share.

Each algorithm module (`sac`, `flashsac`) builds its actor and critic (under `_seeded_init`) and
implements `act` and `_update_step`; this base owns what surrounds the networks (`_init_learner`: the
target critic, the observation normalizers, the C51 support, the temperature, the optimizers), the
random generators, the loss tensors, the actor-update schedule, the learning-rate schedule, the acting
copy of the policy, checkpoint state, the exported policy (`ExportedPolicy`) and the CUDA graphs that
replay `sample + update`.

Learner graph lifecycle:
    agent.capture_update(lambda generator: buffer.sample(cfg.batch_size, generator),
                         updates_per_replay=cfg.updates_per_iteration, compile=True)
    agent.replay_updates(cfg.updates_per_iteration)   # one graph replay for all of them on CUDA

On CUDA, capture runs `warmup_updates` real eager updates on a side stream (they allocate the capturable
optimizer state and compile the fused parts when `compile` is set), then captures
one graph per single-update variant (with and without the delayed actor step) and, when the actor
period divides `updates_per_replay`, one graph holding all `updates_per_replay` updates with their
actor pattern. The host picks the graph from its update counter, so the schedule is deterministic
and needs no device branch. Every optimizer step drops its gradients before the next backward
(`zero_grad()` sets them to None), so a backward hands its gradients to the parameters without a fill
or an addition; inside a graph they live in the graph's memory pool and nothing outside an update
reads them. On CPU, when disabled, or when capture fails, updates run eagerly and
`update_fallback_reason` says why. Each compiled part falls back on its own: a part that cannot compile runs
its plain method while the others stay compiled, and `compile_fallback_reason` names it and says why; an
update that still fails during warm-up turns every part back to its plain method and says so there.

Acting copy: `act` reads `acting_actor` / `acting_obs_normalizer`, a copy of the learner's actor that
`publish_policy` refreshes. A collector can then act while the learner updates the live weights on
another stream (the runner's overlap schedule); `policy_version` is the number of updates the acting
copy has seen.
"""

import abc
import contextlib
import copy
import math
from collections.abc import Callable, Iterator
from typing import Any, ClassVar, Protocol

import torch
from pydantic import BaseModel, ConfigDict, model_validator
from torch import nn

from simcore import garbage_held_during_capture
from trainrt.algos.adamw_step import adamw_step, has_step_hooks, init_adamw_state
from trainrt.algos.distributional import categorical_support, check_support_range
from trainrt.algos.lr_schedule import LrSchedule, lr_schedule_from
from trainrt.algos.networks import check_log_std_range
from trainrt.algos.normalizer import RunningObsNormalizer
from trainrt.compiled import CompiledOnFirstCall, joined_reasons
from trainrt.hotpath import cold_path
from trainrt.replay import Batch

SampleFn = Callable[[torch.Generator], Batch]

# Offset between the acting generator's seed and the learner's: the two streams never overlap.
_UPDATE_SEED_OFFSET = 0x5EED


class LearnerConfig(Protocol):
    """The config fields the `Agent` base reads; `SacConfig` and `FlashSacConfig` both have them."""

    actor_update_period: int
    bf16_autocast: bool
    actor_obs_group: str
    critic_obs_group: str
    obs_normalization: bool
    v_min: float
    v_max: float
    num_atoms: int
    alpha_init: float
    actor_lr: float
    critic_lr: float
    alpha_lr: float
    adam_betas: tuple[float, float]
    weight_decay: float
    tau: float
    lr_schedule: str


LEARNER_FIELD_DESCRIPTIONS: dict[str, str] = {
    "num_atoms": "atoms of the categorical (C51) critic's return support",
    "v_min": "lowest return of the critic's support",
    "v_max": "highest return of the critic's support",
    "log_std_min": "lower bound of the actor's pre-tanh log std",
    "log_std_max": "upper bound of the actor's pre-tanh log std",
    "gamma": "discount factor per control step",
    "n_step": "steps per TD target (n-step returns)",
    "tau": "target critic's EMA rate per update (1: copy)",
    "actor_lr": "actor learning rate (AdamW)",
    "critic_lr": "critic learning rate (AdamW)",
    "alpha_lr": "temperature learning rate",
    "lr_schedule": "actor/critic learning-rate schedule: constant or warmup_cosine",
    "lr_warmup_updates": "updates of linear learning-rate warm-up (warmup_cosine)",
    "lr_final_ratio": "learning rate at the end of the cosine decay, as a fraction of the initial one",
    "lr_decay_updates": "updates over which the cosine decays (null: the run's total updates)",
    "weight_decay": "AdamW weight decay",
    "adam_betas": "AdamW (beta1, beta2)",
    "batch_size": "transitions sampled per update",
    "updates_per_iteration": "gradient updates per iteration (the learner's schedule)",
    "actor_update_period": "the actor and temperature step every this many critic updates",
    "buffer_size_per_env": "replay rows kept per env (capacity = this x num_envs)",
    "learning_starts": "vector env steps collected before the first update",
    "alpha_init": "initial entropy temperature",
    "bf16_autocast": "networks run under bf16 autocast on CUDA",
    "obs_normalization": "running mean/std normalization of observations",
    "actor_obs_group": "observation group the actor reads",
    "critic_obs_group": "observation group the critics read",
}
"""What the hyperparameters both agents have mean (``trainrt config show`` prints them): the one place their
descriptions are written. A field whose meaning is its algorithm's own is described by its ``Field(description=...)``
instead, and is not in this table (``test_config_single_home`` checks that no field has both)."""


class CheckedLearnerConfig(BaseModel):
    """The pydantic base of `SacConfig` and `FlashSacConfig`: unknown keys refused, floats finite, ranges checked.

    It declares no fields, so each algorithm's config keeps its own field order (and so its serialized
    key order); a subclass must declare ``v_min``, ``v_max``, ``log_std_min`` and ``log_std_max``. As in
    ``trainrt.config.schema``, a field whose meaning needs inf or nan says so and sets ``allow_inf_nan=True``.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Give each field without a description of its own the shared one."""
        super().__pydantic_init_subclass__(**kwargs)
        for name, field in cls.model_fields.items():
            if field.description is None and name in LEARNER_FIELD_DESCRIPTIONS:
                field.description = LEARNER_FIELD_DESCRIPTIONS[name]

    @model_validator(mode="after")
    def _check_ranges(self) -> "CheckedLearnerConfig":
        check_support_range(self.v_min, self.v_max)  # type: ignore[attr-defined]
        check_log_std_range(self.log_std_min, self.log_std_max)  # type: ignore[attr-defined]
        return self


class Agent(abc.ABC):
    """An off-policy agent on one device: acting, one gradient update, checkpoint state, export.

    Attributes:
        device: where parameters, buffers and generators live.
        rng: generator for exploration noise in `act` (register it with any graph that captures `act`).
        update_rng: generator for replay sampling and policy noise inside updates (the agent registers
            it with its own learner graph).
        update_graph_enabled: True once `capture_update` captured the learner graph.
        update_fallback_reason: why updates run eagerly ("" when the graph is enabled).
        num_updates: gradient updates done so far (host counter; drives the actor schedule).
        cfg: the algorithm's config (`SacConfig` or `FlashSacConfig`).
        num_actions: A, the action dimension.
        actor: the live policy network; its forward maps normalized policy obs (B, Dp) to the pre-tanh
            mean and the log-std, each (B, A).
        critic: the live twin critic; (critic obs (B, Dc), action (B, A)) -> logits (2, B, num_atoms).
        critic_target: the slowly tracking copy of `critic` the Bellman target reads (no gradients).
        actor_obs_normalizer: running statistics of the actor's observation group (Dp,).
        critic_obs_normalizer: running statistics of the critics' group (Dc,); the same object as
            `actor_obs_normalizer` when both read one group.
        shared_obs_group: True when actor and critics read the same observation group.
        support: C51 atom locations (num_atoms,) float32 from `cfg.v_min` to `cfg.v_max`.
        log_alpha: log of the entropy temperature, a device scalar with gradients.
        target_entropy: the policy entropy the temperature step steers toward (nats, summed over A).
        actor_optimizer: AdamW over the actor's parameters (scheduled learning rate).
        critic_optimizer: AdamW over the critic's parameters (scheduled learning rate).
        alpha_optimizer: AdamW over `log_alpha` alone (no weight decay, constant learning rate).
    """

    algo: ClassVar[str]

    cfg: LearnerConfig
    num_actions: int
    actor: nn.Module
    critic: nn.Module
    critic_target: nn.Module
    actor_obs_normalizer: RunningObsNormalizer
    critic_obs_normalizer: RunningObsNormalizer
    shared_obs_group: bool
    support: torch.Tensor
    log_alpha: torch.Tensor
    target_entropy: float
    actor_optimizer: torch.optim.Optimizer
    critic_optimizer: torch.optim.Optimizer
    alpha_optimizer: torch.optim.Optimizer

    def __init__(self, cfg: LearnerConfig, num_actions: int, device: torch.device | str, seed: int):
        self.cfg = cfg
        self.num_actions = num_actions
        self.device = torch.device(device)
        self.seed = seed
        self.rng = torch.Generator(device=self.device)
        self.rng.manual_seed(seed)
        self.update_rng = torch.Generator(device=self.device)
        self.update_rng.manual_seed(seed + _UPDATE_SEED_OFFSET)
        self.actor_update_period = cfg.actor_update_period
        # bf16 autocast only on CUDA: CPU runs (tests, CI) stay float32.
        self.autocast_enabled = cfg.bf16_autocast and self.device.type == "cuda"
        self.num_updates = 0
        self.update_graph_enabled = False
        self.update_fallback_reason = "not captured"
        self.update_warmup_updates = 0
        self._sample_fn: SampleFn | None = None
        self._graphs: dict[bool, Any] = {}  # update_actor -> torch.cuda.CUDAGraph
        self._graph_replays = 0
        self._loss_values: dict[str, torch.Tensor] = {}
        self._multi_graph: Any = None  # torch.cuda.CUDAGraph of `updates_per_replay` updates
        self._multi_graph_updates = 0
        self._multi_graph_offset = 0
        self._multi_graph_replays = 0
        # Parts of the update that `capture_update(compile=True)` compiles (name -> callable), and why none
        # are compiled ("" once they are; each part then records its own fallback).
        self._parts: dict[str, Callable[..., Any]] = {}
        self._compile_refusal = "not requested"
        # Learning-rate schedule: a device update counter and per-optimizer tensor learning rates.
        self._lr_schedule: LrSchedule | None = None
        self._lr_targets: list[tuple[dict[str, Any], float]] = []
        self._schedule_step = torch.zeros((), device=self.device, dtype=torch.float32)
        self.policy_version = 0
        self.acting_actor: nn.Module | None = None
        self.acting_obs_normalizer: nn.Module | None = None
        # The stochastic action's math (after the eager draws from `rng`); eager until `compile_act`.
        self._sample_action = CompiledOnFirstCall(self._stochastic_action)

    # ----------------------------------------------------------------------------------------------
    # construction shared by both algorithms
    # ----------------------------------------------------------------------------------------------
    def _obs_group_dims(self, obs_dims: dict[str, int]) -> tuple[int, int]:
        """Dp and Dc: the widths of the actor's and the critics' observation groups in ``obs_dims``."""
        return obs_dims[self.cfg.actor_obs_group], obs_dims[self.cfg.critic_obs_group]

    @contextlib.contextmanager
    def _seeded_init(self) -> Iterator[None]:
        """Build networks inside this block: parameter init depends on the seed alone, not on the device.

        The global CPU generator is seeded with `seed` and restored afterwards, so the caller's random
        state is untouched and the networks' draws happen in the order they are constructed.
        """
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(self.seed)
            yield

    @cold_path
    def _init_learner(self, actor: nn.Module, critic: nn.Module, actor_dim: int, critic_dim: int) -> None:
        """Everything around the two networks: target, normalizers, support, temperature, optimizers.

        Moves ``actor`` and ``critic`` to the device, copies the critic into `critic_target`, creates the
        observation normalizers (one shared object when both read one group), the C51 `support`,
        `log_alpha`, the three AdamW optimizers, the learning-rate schedule over the actor and critic
        optimizers, and the acting copy. Draws no random numbers.

        Args:
            actor: the policy network, initialized (under `_seeded_init`).
            critic: the twin critic, initialized (under `_seeded_init`).
            actor_dim: Dp, width of the actor's observation group.
            critic_dim: Dc, width of the critics' observation group.
        """
        cfg = self.cfg
        self.actor = actor.to(self.device)
        self.critic = critic.to(self.device)
        self.critic_target = copy.deepcopy(self.critic).requires_grad_(False)
        self.actor_obs_normalizer = RunningObsNormalizer(actor_dim, enabled=cfg.obs_normalization).to(
            self.device
        )
        self.shared_obs_group = cfg.actor_obs_group == cfg.critic_obs_group
        self.critic_obs_normalizer = (
            self.actor_obs_normalizer
            if self.shared_obs_group
            else RunningObsNormalizer(critic_dim, enabled=cfg.obs_normalization).to(self.device)
        )
        self.support = categorical_support(cfg.v_min, cfg.v_max, cfg.num_atoms, self.device)
        self.log_alpha = torch.tensor(math.log(cfg.alpha_init), device=self.device, requires_grad=True)

        self._actor_params = list(self.actor.parameters())
        self._critic_params = list(self.critic.parameters())
        self._target_params = list(self.critic_target.parameters())
        self.actor_optimizer = self._adamw(self._actor_params, cfg.actor_lr, cfg.adam_betas, cfg.weight_decay)
        self.critic_optimizer = self._adamw(
            self._critic_params, cfg.critic_lr, cfg.adam_betas, cfg.weight_decay
        )
        # No weight decay on the temperature: it would pull alpha toward 1.
        self.alpha_optimizer = self._adamw([self.log_alpha], cfg.alpha_lr, cfg.adam_betas, 0.0)
        self._init_lr_schedule(
            lr_schedule_from(cfg, self.device), [self.actor_optimizer, self.critic_optimizer]
        )
        self._init_acting_policy()

    # ----------------------------------------------------------------------------------------------
    # what each algorithm provides
    # ----------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False) -> torch.Tensor:
        """Actions (N, A) in [-1, 1] for observation groups {name: (N, D)}; graph-capturable."""

    @abc.abstractmethod
    def _stochastic_action(self, x: torch.Tensor, *draws: torch.Tensor) -> torch.Tensor:
        """The stochastic action (N, A) from the actor's observation group ``x`` and the random tensors
        `act` drew from `rng` beforehand; no draws of its own, so `compile_act` can fuse it."""

    @cold_path
    def compile_act(self) -> bool:
        """Fuse the stochastic action's math (normalizer, acting actor, noise, tanh) with torch.compile.

        The random numbers are still drawn eagerly from `rng`, in the same order, before the compiled part.
        It compiles at its first call (make that an eager warm-up step, before any CUDA graph capture); if
        it cannot, it runs eagerly and `act_compile_fallback_reason` says why. Returns whether
        torch.compile accepted it."""
        return self._sample_action.compile()

    @cold_path
    def uncompile_act(self, reason: str) -> None:
        """Run the stochastic action's math eagerly again, recording ``reason``."""
        self._sample_action.uncompile(reason)

    @property
    def act_compiled(self) -> bool:
        """Whether the stochastic action's math runs compiled."""
        return self._sample_action.compiled

    @property
    def act_compile_fallback_reason(self) -> str:
        """Why the stochastic action's math runs eagerly ("" when compiled)."""
        return self._sample_action.fallback_reason

    def end_episodes(self, done: torch.Tensor) -> None:
        """Forget per-env exploration state of rows whose episode ended, ``done`` (num_envs,) bool; sync-free.

        The default agent keeps no such state.
        """
        return

    @abc.abstractmethod
    def _update_step(self, batch: Batch, update_actor: bool) -> None:
        """One gradient step (critic, then optionally actor and temperature, then target); sync-free."""

    @cold_path
    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume: networks, target, normalizers, temperature, optimizers, RNGs, updates."""
        return clone_state(
            {
                "algo": self.algo,
                "actor": self.actor.state_dict(),
                "critic": self.critic.state_dict(),
                "critic_target": self.critic_target.state_dict(),
                "actor_obs_normalizer": self.actor_obs_normalizer.state_dict(),
                "critic_obs_normalizer": self.critic_obs_normalizer.state_dict(),
                "log_alpha": self.log_alpha,
                "actor_optimizer": self.actor_optimizer.state_dict(),
                "critic_optimizer": self.critic_optimizer.state_dict(),
                "alpha_optimizer": self.alpha_optimizer.state_dict(),
                "rng_state": self._rng_state(),
                "num_updates": self.num_updates,
                "schedule_step": self._schedule_step,
            }
        )

    @cold_path
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` output in place (captured graphs stay valid)."""
        if state.get("algo") != self.algo:
            raise ValueError(f"checkpoint is for algo {state.get('algo')!r}, this agent is {self.algo!r}")
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.actor_obs_normalizer.load_state_dict(state["actor_obs_normalizer"])
        self.critic_obs_normalizer.load_state_dict(state["critic_obs_normalizer"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        load_optimizer_state_inplace(self.actor_optimizer, state["actor_optimizer"])
        load_optimizer_state_inplace(self.critic_optimizer, state["critic_optimizer"])
        load_optimizer_state_inplace(self.alpha_optimizer, state["alpha_optimizer"])
        self._load_rng_state(state["rng_state"])
        self.num_updates = int(state["num_updates"])
        if "schedule_step" in state:
            self._schedule_step.copy_(state["schedule_step"])
        self._weights_loaded()
        self.publish_policy()

    def _weights_loaded(self) -> None:
        """Called after `load_state_dict` wrote the networks, before the acting copy is refreshed: for state
        derived from the weights (FlashSAC's bf16 weight copies). Nothing by default."""
        return

    def _normalized_groups(
        self, batch: Batch
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Update the running statistics with this batch, then normalize actor/critic obs and next obs."""
        cfg = self.cfg
        return self._part("_normalize")(
            batch.obs[cfg.actor_obs_group],
            batch.next_obs[cfg.actor_obs_group],
            batch.obs[cfg.critic_obs_group],
            batch.next_obs[cfg.critic_obs_group],
        )

    def _normalize(
        self,
        actor_obs: torch.Tensor,
        next_actor_obs: torch.Tensor,
        critic_obs: torch.Tensor,
        next_critic_obs: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The statistics update and the four normalizations of `_normalized_groups` (a compilable part)."""
        self.actor_obs_normalizer.update(actor_obs)
        if not self.shared_obs_group:
            self.critic_obs_normalizer.update(critic_obs)
        return (
            self.actor_obs_normalizer(actor_obs),
            self.actor_obs_normalizer(next_actor_obs),
            self.critic_obs_normalizer(critic_obs),
            self.critic_obs_normalizer(next_critic_obs),
        )

    actor_eval_kwargs: ClassVar[dict[str, Any]] = {}
    """Keyword arguments that put the actor's forward in evaluation mode (FlashSAC: ``training=False``)."""

    @cold_path
    def actor_for_export(self) -> nn.Module:
        """Copy of normalizer + actor, fp32 eval mode: raw policy observations (N, Dp) -> actions (N, A)."""
        policy = ExportedPolicy(
            copy.deepcopy(self.actor_obs_normalizer), copy.deepcopy(self.actor), **self.actor_eval_kwargs
        )
        return policy.eval().requires_grad_(False)

    # ----------------------------------------------------------------------------------------------
    # updates
    # ----------------------------------------------------------------------------------------------
    @property
    def update_graph_capturable(self) -> bool:
        """Whether `capture_update` can put the update in a CUDA graph on this device."""
        return self.device.type == "cuda"

    def update(self, batch: Batch) -> None:
        """One eager gradient update from `batch`, then publish the policy; losses stay on the device."""
        self._update_step(batch, self._actor_due())
        self.num_updates += 1
        self.publish_policy()

    @cold_path
    def capture_update(
        self,
        sample_fn: SampleFn,
        *,
        enabled: bool = True,
        warmup_updates: int = 2,
        updates_per_replay: int = 1,
        compile: bool = False,
    ) -> None:
        """Prepare `replay_updates`: capture `sample_fn(update_rng)` + updates into CUDA graphs.

        Args:
            sample_fn: draws a fixed-shape `Batch` from persistent storage using the given generator,
                e.g. `lambda g: buffer.sample(batch_size, g)`; it must not synchronize.
            enabled: False forces the eager path (A/B runs); the reason is recorded.
            warmup_updates: real eager updates run before capture (at least one; they count as updates).
            updates_per_replay: M, updates the runner asks for at once; when the actor period divides M,
                one graph replays all M (one launch per iteration).
            compile: compile the update's network parts with torch.compile (CUDA only) before capture.
        """
        if updates_per_replay < 1:
            raise ValueError(f"updates_per_replay must be >= 1, got {updates_per_replay}")
        self._sample_fn = sample_fn
        self._graphs = {}
        self._multi_graph = None
        self.update_graph_enabled = False
        if self.device.type != "cuda":
            self.update_fallback_reason = "cpu device"
            self._compile_refusal = "cpu device" if compile else "not requested"
            return
        if not enabled:
            self.update_fallback_reason = "disabled by configuration"
            return
        if compile:
            self._compile_parts()
        try:
            self._warm_up_updates(sample_fn, max(1, warmup_updates))
        except Exception as exc:
            if not self.compile_enabled:
                raise
            # A compiled part that fails at its first call: record why, warm up uncompiled instead.
            self._uncompile_parts(f"compiled update failed: {type(exc).__name__}: {exc}"[:500])
            self._warm_up_updates(sample_fn, max(1, warmup_updates))
        try:
            with garbage_held_during_capture():
                self._capture_update_graphs(sample_fn, updates_per_replay)
        except Exception as exc:  # capture is best effort: record why and run eagerly
            self._graphs = {}
            self._multi_graph = None
            self.update_fallback_reason = f"capture failed: {type(exc).__name__}: {exc}"[:500]
            return
        self.update_graph_enabled = True
        self.update_fallback_reason = ""

    @cold_path
    def _capture_update_graphs(self, sample_fn: SampleFn, updates_per_replay: int) -> None:
        """Capture the single-update graphs (with and without the actor) and, if asked, the multi-update one."""
        variants = [True] if self.actor_update_period == 1 else [True, False]
        pool = None
        for update_actor in variants:
            graph = torch.cuda.CUDAGraph()
            graph.register_generator_state(self.update_rng)
            with torch.cuda.graph(graph, pool=pool):
                self._update_step(sample_fn(self.update_rng), update_actor=update_actor)
            pool = graph.pool()
            self._graphs[update_actor] = graph
        if updates_per_replay > 1 and updates_per_replay % self.actor_update_period == 0:
            offset = self.num_updates % self.actor_update_period
            graph = torch.cuda.CUDAGraph()
            graph.register_generator_state(self.update_rng)
            with torch.cuda.graph(graph, pool=pool):
                for index in range(updates_per_replay):
                    due = (offset + index) % self.actor_update_period == 0
                    self._update_step(sample_fn(self.update_rng), update_actor=due)
            self._multi_graph = graph
            self._multi_graph_updates = updates_per_replay
            self._multi_graph_offset = offset

    @cold_path
    def _warm_up_updates(self, sample_fn: SampleFn, count: int) -> None:
        """Real eager full updates on a side stream: they create every optimizer state (and compile the parts)."""
        current = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(current)
        with torch.cuda.stream(side):
            for _ in range(count):
                self._update_step(sample_fn(self.update_rng), update_actor=True)
                self.num_updates += 1
        current.wait_stream(side)
        self.update_warmup_updates += count

    @cold_path
    def _compile_parts(self) -> None:
        """Replace the update's declared parts by torch.compile'd versions (fused kernels, same math).

        Each part compiles at its first call (a warm-up update); one that cannot runs its plain method from
        then on and keeps its reason (`compile_fallback_reason`), while the others stay compiled. The
        optimizer-step parts stay plain while an optimizer has step hooks (data-parallel training averages
        gradients in one), since only ``Optimizer.step()`` runs them.
        """
        optimizers = (self.actor_optimizer, self.critic_optimizer, self.alpha_optimizer)
        hooked = [name for name, opt in zip(("actor", "critic", "alpha"), optimizers) if has_step_hooks(opt)]
        plain_steps = set(self.optimizer_step_parts) if hooked else set()
        if (set(self.optimizer_step_parts) - plain_steps) & set(self.compiled_parts):
            for optimizer in optimizers:
                init_adamw_state(optimizer)  # a compiled `adamw_step` traces the state it steps
        parts = {name: CompiledOnFirstCall(getattr(self, name)) for name in self.compiled_parts}
        for name, part in parts.items():
            if name in plain_steps:
                which = f"the {', '.join(hooked)} optimizer" + (" has" if len(hooked) == 1 else "s have")
                part.uncompile(
                    f"{which} step hooks (data-parallel gradient averaging), which only an eager "
                    "Optimizer.step() runs"
                )
            else:  # compiles at its first call; refused at once (say, an unknown option), it runs plain
                part.compile(self.part_compile_options.get(name))
        self._parts = dict(parts)
        self._compile_refusal = ""

    @cold_path
    def _uncompile_parts(self, reason: str) -> None:
        """Back to the plain parts, recording why."""
        self._parts = {}
        self._compile_refusal = reason[:500]

    @property
    def compile_enabled(self) -> bool:
        """Whether any part of the update runs compiled."""
        return any(getattr(part, "compiled", True) for part in self._parts.values())

    @property
    def compile_fallback_reason(self) -> str:
        """Why the update's parts run eagerly: "" when every part compiled, the one reason when none did for
        the same reason, else ``"part: reason; ..."`` for the parts that fell back."""
        if self._compile_refusal or not self._parts:
            return self._compile_refusal or "not requested"
        eager = {
            name: part.fallback_reason
            for name, part in self._parts.items()
            if not getattr(part, "compiled", True)
        }
        return joined_reasons(eager, parts=len(self._parts))

    compiled_parts: ClassVar[tuple[str, ...]] = ()
    """Names of the methods `_update_step` calls through `_part` (the compilable network math)."""

    part_compile_options: ClassVar[dict[str, dict[str, Any]]] = {}
    """Inductor options for single parts, by name (none here; FlashSAC fuses its projections and optimizer steps
    horizontally, docs/perf/tuning/0033; `benchmarks/learner_variants.py` sets some to measure them)."""

    optimizer_step_parts: ClassVar[tuple[str, ...]] = ("_critic_step", "_actor_step")
    """The parts `_update_step` calls that step an optimizer through `adamw_step`; compiling any of them needs
    the optimizers' state created first (`init_adamw_state`)."""

    def _critic_step(self) -> None:
        """The critic's AdamW step, then the target critic's EMA toward it (a compilable part: inductor fuses
        the two over all the critic's tensors). SAC calls it and `_actor_step`; FlashSAC projects its weights
        between the step and the EMA, so it calls `_actor_step` and its own critic step (docs/perf/tuning/0025)."""
        adamw_step(self.critic_optimizer)
        with torch.no_grad():
            torch._foreach_lerp_(self._target_params, self._critic_params, self.cfg.tau)

    def _actor_step(self) -> None:
        """The actor's AdamW step (a compilable part)."""
        adamw_step(self.actor_optimizer)

    def _part(self, name: str) -> Callable[..., Any]:
        """The compiled version of update part `name` when compiled, the method itself otherwise."""
        return self._parts.get(name) or getattr(self, name)

    def replay_update(self) -> None:
        """One update: replay the captured graph, or eagerly sample and update when there is none."""
        self.replay_updates(1)

    def replay_updates(self, count: int, *, publish: bool = True) -> None:
        """`count` updates: one replay of the all-updates graph when it fits, else one per update.

        Args:
            count: updates to run.
            publish: refresh the acting copy afterwards (`publish_policy`). The runner's overlap
                schedule passes False and publishes at iteration boundaries, while no collector acts.
        """
        if self._sample_fn is None:
            raise RuntimeError("replay_update() needs capture_update(sample_fn) first")
        fits = (
            self.update_graph_enabled
            and self._multi_graph is not None
            and count == self._multi_graph_updates
            and self.num_updates % self.actor_update_period == self._multi_graph_offset
        )
        if fits:
            self._multi_graph.replay()
            self._multi_graph_replays += 1
            self.num_updates += count
        else:
            for _ in range(count):
                update_actor = self._actor_due()
                if self.update_graph_enabled:
                    self._graphs[update_actor].replay()
                    self._graph_replays += 1
                else:
                    self._update_step(self._sample_fn(self.update_rng), update_actor)
                self.num_updates += 1
        if publish:
            self.publish_policy()

    def _actor_due(self) -> bool:
        """Whether the next update includes the (delayed) actor and temperature step."""
        return self.num_updates % self.actor_update_period == 0

    # ----------------------------------------------------------------------------------------------
    # the acting copy
    # ----------------------------------------------------------------------------------------------
    @cold_path
    def _init_acting_policy(self) -> None:
        """Create the acting copy of actor and normalizer (`_init_learner` calls this once, last)."""
        self.acting_actor = copy.deepcopy(self.actor).requires_grad_(False)
        self.acting_obs_normalizer = copy.deepcopy(self.actor_obs_normalizer)
        self._pair_acting_tensors()
        self.policy_version = self.num_updates

    @cold_path
    def _pair_acting_tensors(self) -> None:
        """List the (acting, live) tensor pairs `publish_policy` copies: every parameter and buffer of the
        actor and the normalizer. Call again when a module gains a buffer."""
        self._acting_pairs = [
            (dst, src)
            for live, acting in (
                (self.actor, self.acting_actor),
                (self.actor_obs_normalizer, self.acting_obs_normalizer),
            )
            for dst, src in zip(
                [*acting.parameters(), *acting.buffers()], [*live.parameters(), *live.buffers()], strict=True
            )
        ]

    def publish_policy(self) -> None:
        """Copy the learner's actor and normalizer into the acting copy (sync-free, fixed addresses)."""
        if self.acting_actor is None:
            return
        with torch.no_grad():
            torch._foreach_copy_([d for d, _ in self._acting_pairs], [s for _, s in self._acting_pairs])
        self.policy_version = self.num_updates

    # ----------------------------------------------------------------------------------------------
    # learning-rate schedule
    # ----------------------------------------------------------------------------------------------
    @cold_path
    def _init_lr_schedule(self, schedule: LrSchedule | None, optimizers: list[torch.optim.Optimizer]) -> None:
        """Give ``optimizers`` tensor learning rates that `_advance_lr_schedule` sets inside the graph."""
        self._lr_schedule = schedule
        self._lr_targets = []
        if schedule is None:
            return
        for optimizer in optimizers:
            for group in optimizer.param_groups:
                base = float(group["lr"])
                group["lr"] = torch.tensor(base * schedule.factor(0), device=self.device)
                self._lr_targets.append((group, base))

    @cold_path
    def set_lr_horizon(self, total_updates: int) -> None:
        """Updates over which the schedule decays, when its config leaves the horizon to the run
        (``lr_decay_updates`` None); a configured ``lr_decay_updates`` stays."""
        if self._lr_schedule is not None and getattr(self.cfg, "lr_decay_updates", None) is None:
            self._lr_schedule.set_horizon(total_updates)

    def _advance_lr_schedule(self) -> None:
        """Set each scheduled learning rate for this update from the device update counter; sync-free."""
        if self._lr_schedule is None:
            return
        factor = self._lr_schedule.factor_tensor(self._schedule_step)
        for group, base in self._lr_targets:
            group["lr"].copy_(factor * base)
        self._schedule_step.add_(1.0)

    def learning_rates(self) -> dict[str, torch.Tensor]:
        """Current learning rate of each scheduled optimizer group (device scalars; empty if constant)."""
        return {f"lr_{index}": group["lr"] for index, (group, _) in enumerate(self._lr_targets)}

    # ----------------------------------------------------------------------------------------------
    # losses and diagnostics
    # ----------------------------------------------------------------------------------------------
    @cold_path
    def learning_warnings(self, return_statistics: dict[str, float]) -> dict[str, str]:
        """Set-up problems that keep this agent from learning, seen from the replay's return statistics
        (`DeviceReplayBuffer.view_return_statistics`): kind -> message naming the fix. None by default."""
        return {}

    def losses(self) -> dict[str, torch.Tensor]:
        """Latest loss and statistic values as device scalars (overwritten by the next update)."""
        return dict(self._loss_values)

    def _declare_losses(self, *names: str) -> None:
        """Allocate the persistent scalars that updates write their losses into (views of one vector)."""
        self._loss_vector = torch.zeros(len(names), device=self.device)
        self._loss_names = names
        for index, name in enumerate(names):
            self._loss_values[name] = self._loss_vector[index]

    def _record_losses(self, values: dict[str, torch.Tensor]) -> None:
        """Copy loss values into the persistent scalars (graph-safe: fixed addresses).

        Names that are always recorded come first in the declaration, so the values of one update are
        a leading run of the vector and land with one stack and one copy.
        """
        present = [name for name in self._loss_names if name in values]
        if present == list(self._loss_names[: len(present)]) and len(present) == len(values):
            stacked = torch.stack([values[name].detach().float().reshape(()) for name in present])
            self._loss_vector[: len(present)].copy_(stacked)
            return
        for name, value in values.items():
            self._loss_values[name].copy_(value.detach().float())

    @cold_path
    def update_diagnostics(self) -> dict[str, Any]:
        """Learner graph facts for run_summary.json."""
        return {
            "algo": self.algo,
            "update_graph_capturable": self.update_graph_capturable,
            "update_graph_enabled": self.update_graph_enabled,
            "update_fallback_reason": self.update_fallback_reason,
            "update_graph_variants": len(self._graphs),
            "update_graph_replays": self._graph_replays,
            "update_warmup_updates": self.update_warmup_updates,
            "updates_per_graph_replay": self._multi_graph_updates if self._multi_graph is not None else 1,
            "update_multi_graph_replays": self._multi_graph_replays,
            "compile_enabled": self.compile_enabled,
            "compile_fallback_reason": self.compile_fallback_reason,
            "policy_version": self.policy_version,
            "num_updates": self.num_updates,
        }

    # ----------------------------------------------------------------------------------------------
    # helpers for subclasses
    # ----------------------------------------------------------------------------------------------
    def _policy_noise(self, batch_size: int) -> torch.Tensor:
        """Standard normal policy noise (B, A) from `update_rng` (drawn outside the compiled parts)."""
        return torch.randn(batch_size, self.num_actions, device=self.device, generator=self.update_rng)

    def _autocast(self) -> torch.autocast:
        """bf16 autocast on CUDA when configured, a no-op otherwise (weight cache off for graph capture)."""
        return torch.autocast(
            device_type=self.device.type,
            dtype=torch.bfloat16,
            enabled=self.autocast_enabled,
            cache_enabled=False,
        )

    def _adamw(
        self, params: list[torch.Tensor], lr: float, betas: tuple[float, float], weight_decay: float
    ) -> torch.optim.AdamW:
        """AdamW whose step runs inside a CUDA graph on CUDA (`capturable`, fused: one kernel per step)."""
        on_cuda = self.device.type == "cuda"
        return torch.optim.AdamW(
            params, lr=lr, betas=betas, weight_decay=weight_decay, capturable=on_cuda, fused=on_cuda or None
        )

    def _rng_state(self) -> dict[str, torch.Tensor]:
        """Both generators' states (host tensors)."""
        return {"rng": self.rng.get_state(), "update_rng": self.update_rng.get_state()}

    def _load_rng_state(self, state: dict[str, torch.Tensor]) -> None:
        """Restore both generators."""
        self.rng.set_state(state["rng"].cpu())
        self.update_rng.set_state(state["update_rng"].cpu())


class ExportedPolicy(nn.Module):
    """Raw policy observations (N, Dp) -> deterministic actions tanh(mean) (N, A), normalizer inside.

    The actor is any module returning (pre-tanh mean, log-std), each (N, A); ``actor_kwargs`` are passed
    to every call (FlashSAC's ``training=False`` keeps its BatchNorm on running statistics).
    """

    def __init__(self, normalizer: nn.Module, actor: nn.Module, **actor_kwargs: Any):
        super().__init__()
        self.normalizer = normalizer
        self.actor = actor
        self.actor_kwargs = actor_kwargs

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic actions in [-1, 1]."""
        mean, _ = self.actor(self.normalizer(obs), **self.actor_kwargs)
        return torch.tanh(mean)


@contextlib.contextmanager
def frozen(module: nn.Module) -> Iterator[None]:
    """Treat ``module``'s parameters as constants inside the block (no gradients computed for them).

    A host-side flag flip: it launches nothing, so it is safe inside graph capture, and a compiled
    loss sees the module's weights as constants.
    """
    params = [p for p in module.parameters() if p.requires_grad]
    for param in params:
        param.requires_grad_(False)
    try:
        yield
    finally:
        for param in params:
            param.requires_grad_(True)


def clone_state(tree: Any) -> Any:
    """Deep copy of a state tree with tensors detached and cloned (a snapshot later updates cannot touch)."""
    if isinstance(tree, torch.Tensor):
        return tree.detach().clone()
    if isinstance(tree, dict):
        return {key: clone_state(value) for key, value in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(clone_state(value) for value in tree)
    return copy.deepcopy(tree)


def load_optimizer_state_inplace(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> None:
    """Load an optimizer `state_dict` by copying into the existing state tensors.

    `Optimizer.load_state_dict` replaces the state tensors, which would leave a captured graph
    stepping the old ones. Hyperparameters (learning rates) stay as configured.
    """
    if not optimizer.state:
        # Keep the configured learning rates (tensor ones stay the objects a captured graph reads).
        learning_rates = [group["lr"] for group in optimizer.param_groups]
        # A copy: torch adopts the given tensors as its state (on the same device), so later steps would
        # write into the caller's state dict.
        optimizer.load_state_dict(clone_state(state))
        for group, lr in zip(optimizer.param_groups, learning_rates):
            group["lr"] = lr
        return
    params = [p for group in optimizer.param_groups for p in group["params"]]
    saved = state["state"]
    if len(saved) > len(params):
        raise ValueError(f"optimizer state has {len(saved)} entries for {len(params)} parameters")
    for index, param in enumerate(params):
        if index not in saved:
            continue
        current = optimizer.state[param]
        for key, value in saved[index].items():
            if key in current and isinstance(current[key], torch.Tensor):
                current[key].copy_(value)
            else:
                current[key] = value.to(param.device) if isinstance(value, torch.Tensor) else value
