"""The `Agent` base: what the runner codes against, around the math of each algorithm.

Each algorithm module (`sac`, `flashsac`) builds its actor and critic (under `_seeded_init`), lists its update's
parts (`trainrt.algos.execution.UpdateParts`: its math from `sac_math` / `flashsac_math` / `update_math`, bound to
its modules) and implements `act` and `_update_step`; this base owns what surrounds the networks
(`_init_learner`: the target critic, the observation normalizers, the C51 support, the temperature, the
optimizers), the random generators, the loss tensors, the learning-rate schedule, checkpoint state and the
exported policy (`ExportedPolicy`). How the update runs (compiled parts, the CUDA graphs that replay
`sample + update`, eager fallbacks and their reasons, the acting copy of the policy) is
`trainrt.algos.execution.LearnerExecution`'s.
"""

import abc
import contextlib
import copy
import math
from collections.abc import Iterator
from typing import Any, ClassVar, Protocol

import torch
from pydantic import BaseModel, ConfigDict, model_validator
from torch import nn

from trainrt.algos import update_math
from trainrt.algos.distributional import categorical_support, check_support_range
from trainrt.algos.execution import LearnerExecution, Part, UpdateParts, raise_acting_only
from trainrt.algos.lr_schedule import LrSchedule, lr_schedule_from
from trainrt.algos.networks import check_log_std_range
from trainrt.algos.normalizer import RunningObsNormalizer
from trainrt.hotpath import cold_path
from trainrt.replay import Batch

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
    uncompiled_parts: tuple[str, ...]
    horizontal_fusion_parts: tuple[str, ...]
    inductor_options: dict[str, Any]


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
    "gemm_alignment": "member-stacked CUDA products pad their widths to a multiple of this (1: unpadded)",
    "uncompiled_parts": "update parts that stay eager when the update compiles (names as compile_fallback_reason)",
    "horizontal_fusion_parts": "update parts compiled with inductor's horizontal fusion (docs/perf/tuning/0033)",
    "inductor_options": "inductor options every compiled update part gets (benchmarks' variants)",
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


class Agent(LearnerExecution, abc.ABC):
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
        learns: False for an agent built to act only (evaluation, play, export): it has no optimizers and
            no update parts, loads a checkpoint's networks, normalizers, temperature and generators, and
            refuses to update or to save a resumable state.
        parts: the update's pieces (`UpdateParts`), each run plain or compiled as `LearnerExecution` decides.
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
    parts: UpdateParts

    def __init__(
        self, cfg: LearnerConfig, num_actions: int, device: torch.device | str, seed: int, learns: bool = True
    ):
        self.cfg = cfg
        self.learns = learns
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
        self._loss_values: dict[str, torch.Tensor] = {}
        # Learning-rate schedule: a device update counter and per-optimizer tensor learning rates.
        self._lr_schedule: LrSchedule | None = None
        self._lr_targets: list[tuple[dict[str, Any], float]] = []
        self._schedule_step = torch.zeros((), device=self.device, dtype=torch.float32)
        self._init_execution()

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
        `log_alpha`, the three AdamW optimizers and the learning-rate schedule over the actor and critic
        optimizers (a learning agent only: building an optimizer imports torch's compiler, seconds that an
        acting-only process need not spend), and the acting copy. Draws no random numbers.

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
        if self.learns:
            self.actor_optimizer = self._adamw(
                self._actor_params, cfg.actor_lr, cfg.adam_betas, cfg.weight_decay
            )
            self.critic_optimizer = self._adamw(
                self._critic_params, cfg.critic_lr, cfg.adam_betas, cfg.weight_decay
            )
            # No weight decay on the temperature: it would pull alpha toward 1.
            self.alpha_optimizer = self._adamw([self.log_alpha], cfg.alpha_lr, cfg.adam_betas, 0.0)
            self._init_lr_schedule(
                lr_schedule_from(cfg, self.device), [self.actor_optimizer, self.critic_optimizer]
            )
        self._init_acting_policy()

    @cold_path
    def _shared_parts(self) -> dict[str, Part]:
        """The parts every update has (`UpdateParts`' own fields): the learning-rate step, the observation
        normalization and the loss recording; call after `_init_learner`."""
        actor_normalizer, critic_normalizer = self.actor_obs_normalizer, self.critic_obs_normalizer
        shared = self.shared_obs_group
        return {
            "advance_lr_schedule": Part(self._advance_lr_schedule),
            "normalize": Part(
                lambda *obs: update_math.normalize(actor_normalizer, critic_normalizer, shared, *obs)
            ),
            "record_losses": Part(self._record_losses),
        }

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
        if not self.learns:
            raise_acting_only("save a resumable state")
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
                "rng_state": self.rng_state(),
                "num_updates": self.num_updates,
                "schedule_step": self._schedule_step,
            }
        )

    @cold_path
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore `state_dict()` output in place (captured graphs stay valid); an acting-only agent skips the
        optimizers' state."""
        if state.get("algo") != self.algo:
            raise ValueError(f"checkpoint is for algo {state.get('algo')!r}, this agent is {self.algo!r}")
        self.actor.load_state_dict(state["actor"])
        self.critic.load_state_dict(state["critic"])
        self.critic_target.load_state_dict(state["critic_target"])
        self.actor_obs_normalizer.load_state_dict(state["actor_obs_normalizer"])
        self.critic_obs_normalizer.load_state_dict(state["critic_obs_normalizer"])
        with torch.no_grad():
            self.log_alpha.copy_(state["log_alpha"])
        if self.learns:
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
        return self.parts.normalize(
            batch.obs[cfg.actor_obs_group],
            batch.next_obs[cfg.actor_obs_group],
            batch.obs[cfg.critic_obs_group],
            batch.next_obs[cfg.critic_obs_group],
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

    def rng_state(self) -> dict[str, torch.Tensor]:
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
