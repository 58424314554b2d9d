"""The `Agent` base: what the runner codes against, plus the learner-graph lifecycle both algorithms share.

Each algorithm module (`sac`, `flashsac`) implements `act`, `_update_step` and checkpointing; this
base owns the random generators, the loss tensors, the actor-update schedule and the CUDA graph that
replays `sample + update` as one unit.

Learner graph lifecycle:
    agent.capture_update(lambda generator: buffer.sample(cfg.batch_size, generator))
    for _ in range(cfg.updates_per_iteration):
        agent.replay_update()     # one graph replay on CUDA; eager sample + update otherwise

On CUDA, capture runs `warmup_updates` real eager updates on a side stream (they allocate gradients
and the capturable optimizer state), then captures one graph per update variant: with and without the
delayed actor step when `actor_update_period` > 1. The host picks which graph to replay from its update
counter, so the schedule is deterministic and needs no device branch. On CPU, when disabled, or when
capture fails, `replay_update` runs eagerly and `update_fallback_reason` says why.
"""

import abc
import copy
from collections.abc import Callable
from typing import Any, ClassVar

import torch
from torch import nn

from trainrt.hotpath import cold_path
from trainrt.replay import Batch

SampleFn = Callable[[torch.Generator], Batch]

# Offset between the acting generator's seed and the learner's: the two streams never overlap.
_UPDATE_SEED_OFFSET = 0x5EED


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
    """

    algo: ClassVar[str]

    def __init__(self, device: torch.device | str, seed: int, actor_update_period: int, use_bf16: bool):
        self.device = torch.device(device)
        self.seed = seed
        self.rng = torch.Generator(device=self.device)
        self.rng.manual_seed(seed)
        self.update_rng = torch.Generator(device=self.device)
        self.update_rng.manual_seed(seed + _UPDATE_SEED_OFFSET)
        self.actor_update_period = actor_update_period
        # bf16 autocast only on CUDA: CPU runs (tests, CI) stay float32.
        self.autocast_enabled = use_bf16 and self.device.type == "cuda"
        self.num_updates = 0
        self.update_graph_enabled = False
        self.update_fallback_reason = "not captured"
        self.update_warmup_updates = 0
        self._sample_fn: SampleFn | None = None
        self._graphs: dict[bool, Any] = {}  # update_actor -> torch.cuda.CUDAGraph
        self._graph_replays = 0
        self._loss_values: dict[str, torch.Tensor] = {}

    # ----------------------------------------------------------------------------------------------
    # what each algorithm provides
    # ----------------------------------------------------------------------------------------------
    @abc.abstractmethod
    def act(self, obs: dict[str, torch.Tensor], deterministic: bool = False) -> torch.Tensor:
        """Actions (N, A) in [-1, 1] for observation groups {name: (N, D)}; graph-capturable."""

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

    def _normalized_groups(
        self, batch: Batch
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Update the running statistics with this batch, then normalize actor/critic obs and next obs."""
        cfg = self.cfg
        self.actor_obs_normalizer.update(batch.obs[cfg.actor_obs_group])
        if not self.shared_obs_group:
            self.critic_obs_normalizer.update(batch.obs[cfg.critic_obs_group])
        return (
            self.actor_obs_normalizer(batch.obs[cfg.actor_obs_group]),
            self.actor_obs_normalizer(batch.next_obs[cfg.actor_obs_group]),
            self.critic_obs_normalizer(batch.obs[cfg.critic_obs_group]),
            self.critic_obs_normalizer(batch.next_obs[cfg.critic_obs_group]),
        )

    @abc.abstractmethod
    def actor_for_export(self) -> nn.Module:
        """A standalone module mapping raw policy observations (N, Dp) to deterministic actions (N, A)."""

    # ----------------------------------------------------------------------------------------------
    # updates
    # ----------------------------------------------------------------------------------------------
    @property
    def update_graph_capturable(self) -> bool:
        """Whether `capture_update` can put the update in a CUDA graph on this device."""
        return self.device.type == "cuda"

    def update(self, batch: Batch) -> None:
        """One eager gradient update from `batch`; losses stay on the device (see `losses`)."""
        self._update_step(batch, self._actor_due())
        self.num_updates += 1

    @cold_path
    def capture_update(self, sample_fn: SampleFn, *, enabled: bool = True, warmup_updates: int = 2) -> None:
        """Prepare `replay_update`: capture `sample_fn(update_rng)` + one update into CUDA graphs.

        Args:
            sample_fn: draws a fixed-shape `Batch` from persistent storage using the given generator,
                e.g. `lambda g: buffer.sample(batch_size, g)`; it must not synchronize.
            enabled: False forces the eager path (A/B runs); the reason is recorded.
            warmup_updates: real eager updates run before capture (at least one; they count as updates).
        """
        self._sample_fn = sample_fn
        self._graphs = {}
        self.update_graph_enabled = False
        if self.device.type != "cuda":
            self.update_fallback_reason = "cpu device"
            return
        if not enabled:
            self.update_fallback_reason = "disabled by configuration"
            return
        try:
            current = torch.cuda.current_stream(self.device)
            side = torch.cuda.Stream(self.device)
            side.wait_stream(current)
            with torch.cuda.stream(side):
                # Full updates first: they create every gradient and optimizer-state tensor the graphs use.
                for _ in range(max(1, warmup_updates)):
                    self._update_step(sample_fn(self.update_rng), update_actor=True)
                    self.num_updates += 1
            current.wait_stream(side)
            self.update_warmup_updates = max(1, warmup_updates)
            variants = [True] if self.actor_update_period == 1 else [True, False]
            pool = None
            for update_actor in variants:
                graph = torch.cuda.CUDAGraph()
                graph.register_generator_state(self.update_rng)
                with torch.cuda.graph(graph, pool=pool):
                    self._update_step(sample_fn(self.update_rng), update_actor=update_actor)
                pool = graph.pool()
                self._graphs[update_actor] = graph
        except Exception as exc:  # capture is best effort: record why and run eagerly
            self._graphs = {}
            self.update_fallback_reason = f"capture failed: {type(exc).__name__}: {exc}"[:500]
            return
        self.update_graph_enabled = True
        self.update_fallback_reason = ""

    def replay_update(self) -> None:
        """One update: replay the captured graph, or eagerly sample and update when there is none."""
        if self._sample_fn is None:
            raise RuntimeError("replay_update() needs capture_update(sample_fn) first")
        update_actor = self._actor_due()
        if self.update_graph_enabled:
            self._graphs[update_actor].replay()
            self._graph_replays += 1
        else:
            self._update_step(self._sample_fn(self.update_rng), update_actor)
        self.num_updates += 1

    def _actor_due(self) -> bool:
        """Whether the next update includes the (delayed) actor and temperature step."""
        return self.num_updates % self.actor_update_period == 0

    # ----------------------------------------------------------------------------------------------
    # losses and diagnostics
    # ----------------------------------------------------------------------------------------------
    def losses(self) -> dict[str, torch.Tensor]:
        """Latest loss and statistic values as device scalars (overwritten by the next update)."""
        return dict(self._loss_values)

    def _declare_losses(self, *names: str) -> None:
        """Allocate the persistent scalars that updates write their losses into."""
        for name in names:
            self._loss_values[name] = torch.zeros((), device=self.device)

    def _record_losses(self, values: dict[str, torch.Tensor]) -> None:
        """Copy loss values into the persistent scalars (graph-safe: fixed addresses)."""
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
            "num_updates": self.num_updates,
        }

    # ----------------------------------------------------------------------------------------------
    # helpers for subclasses
    # ----------------------------------------------------------------------------------------------
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
        self.rng.set_state(state["rng"])
        self.update_rng.set_state(state["update_rng"])


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
        optimizer.load_state_dict(state)
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
