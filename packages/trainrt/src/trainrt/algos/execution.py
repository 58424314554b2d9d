"""How the learner runs its math: compiled parts, CUDA graphs of the update, eager fallbacks, the acting copy.

The algorithms (`sac`, `flashsac`) write their update as plain math (`sac_math`, `flashsac_math`, `update_math`)
and list the pieces torch.compile may fuse as an `UpdateParts` dataclass: one `Part` per field, each holding the
function it runs. `_update_step` calls them as attributes (``self.parts.critic_loss(...)``); this layer decides
how each runs, and nothing here knows what an update computes.

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
its plain function while the others stay compiled, and `compile_fallback_reason` names it and says why; an
update that still fails during warm-up turns every part back to its plain function and says so there.

Which parts compile and how is the learner config's (`ExecutionSettings`): ``uncompiled_parts`` stay plain,
``horizontal_fusion_parts`` compile with inductor's horizontal fusion, ``inductor_options`` reach every part.
A part's name is its field's with a leading underscore (``_critic_loss``), as `compile_fallback_reason` and
those fields spell it.

Acting copy: `act` reads `acting_actor` / `acting_obs_normalizer`, a copy of the learner's actor that
`publish_policy` refreshes. A collector can then act while the learner updates the live weights on
another stream (the runner's overlap schedule); `policy_version` is the number of updates the acting
copy has seen.
"""

import copy
import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import torch
from torch import nn

from simcore import garbage_held_during_capture
from trainrt.algos.adamw_step import has_step_hooks, init_adamw_state
from trainrt.compiled import CompiledOnFirstCall, joined_reasons
from trainrt.hotpath import cold_path
from trainrt.replay import Batch

SampleFn = Callable[[torch.Generator], Batch]

Part = CompiledOnFirstCall
"""One piece of the update: its plain function, run eagerly until `LearnerExecution` compiles it."""

HORIZONTAL_FUSION_OPTIONS: dict[str, Any] = {"combo_kernels": True, "combo_kernels_pointwise_only": False}
"""The inductor options of a config's ``horizontal_fusion_parts``: horizontal fusion, reductions included (parts that
touch every parameter of a network one tensor at a time share a few launches; docs/perf/tuning/0033)."""


class ExecutionSettings(Protocol):
    """The learner config fields this layer reads (`SacConfig` and `FlashSacConfig` both have them)."""

    uncompiled_parts: tuple[str, ...]
    horizontal_fusion_parts: tuple[str, ...]
    inductor_options: dict[str, Any]


@dataclasses.dataclass
class UpdateParts:
    """Base of an algorithm's parts (`SacParts`, `FlashSacParts`): a dataclass whose every field is a `Part`, in
    the order an update calls them. Each has ``advance_lr_schedule``, ``normalize`` and ``record_losses``
    (`Agent._shared_parts`) among its own."""

    optimizer_steps: ClassVar[tuple[str, ...]] = ()
    """Names of the parts that step an optimizer through `adamw_step`: compiling one needs the optimizers'
    state created first (`init_adamw_state`), and an optimizer with step hooks keeps them plain."""

    def named(self) -> dict[str, Part]:
        """Every part by its name (``_`` + field name), in field order."""
        return {f"_{field.name}": getattr(self, field.name) for field in dataclasses.fields(self)}


def check_part_names(parts: type[UpdateParts], settings: ExecutionSettings) -> None:
    """Raise ValueError naming the fix when ``settings`` name a part ``parts`` does not have."""
    known = [f"_{field.name}" for field in dataclasses.fields(parts)]
    for key in ("uncompiled_parts", "horizontal_fusion_parts"):
        unknown = [name for name in getattr(settings, key) if name not in known]
        if unknown:
            raise ValueError(
                f"{key} names unknown update parts {unknown}; this algorithm's parts are {known}"
            )


@cold_path
def raise_acting_only(what: str) -> None:
    """Refuse ``what`` on an agent built to act only (``learns=False``), naming the fix."""
    raise RuntimeError(
        f"cannot {what}: this agent was built to act only (learns=False: no optimizers); build it with "
        "learns=True to train or to save a resumable state"
    )


class LearnerExecution:
    """The execution half of `trainrt.algos.agent.Agent`: compiling its parts, capturing and replaying its
    update graphs, falling back to eager with a reason, and the acting copy of the policy. It calls the
    agent's `_update_step` and reads its `parts`, optimizers and networks; it computes nothing of its own."""

    parts: UpdateParts
    cfg: Any
    device: torch.device
    update_rng: torch.Generator
    actor_update_period: int
    num_updates: int
    actor: nn.Module
    actor_obs_normalizer: nn.Module
    actor_optimizer: torch.optim.Optimizer
    critic_optimizer: torch.optim.Optimizer
    alpha_optimizer: torch.optim.Optimizer
    learns: bool
    algo: ClassVar[str]

    def _update_step(self, batch: Batch, update_actor: bool) -> None:
        raise NotImplementedError

    def _stochastic_action(self, x: torch.Tensor, *draws: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @cold_path
    def _init_execution(self) -> None:
        """The execution state before any capture: no graphs, parts eager, no acting copy yet."""
        self.update_graph_enabled = False
        self.update_fallback_reason = "not captured"
        self.update_warmup_updates = 0
        self._sample_fn: SampleFn | None = None
        self._graphs: dict[bool, Any] = {}  # update_actor -> torch.cuda.CUDAGraph
        self._graph_replays = 0
        self._multi_graph: Any = None  # torch.cuda.CUDAGraph of `updates_per_replay` updates
        self._multi_graph_updates = 0
        self._multi_graph_offset = 0
        self._multi_graph_replays = 0
        # The parts `capture_update(compile=True)` asked to compile (name -> part), and why none are compiled
        # ("" once they are; each part then records its own fallback).
        self._compiling: dict[str, Part] = {}
        self._compile_refusal = "not requested"
        self.policy_version = 0
        self.acting_actor: nn.Module | None = None
        self.acting_obs_normalizer: nn.Module | None = None
        # The stochastic action's math (after the eager draws from `rng`); eager until `compile_act`.
        self._sample_action = CompiledOnFirstCall(self._stochastic_action)

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

    # ----------------------------------------------------------------------------------------------
    # updates
    # ----------------------------------------------------------------------------------------------
    @property
    def update_graph_capturable(self) -> bool:
        """Whether `capture_update` can put the update in a CUDA graph on this device."""
        return self.device.type == "cuda"

    def update(self, batch: Batch) -> None:
        """One eager gradient update from `batch`, then publish the policy; losses stay on the device."""
        if not self.learns:
            raise_acting_only("update")
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
        capture_stream: torch.cuda.Stream | None = None,
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
            capture_stream: the stream to capture on (None: torch's own capture stream); the graphs keep its
                multiprocessors wherever they are replayed (a green context's stream: ``LearnerPartition``).
        """
        if not self.learns:
            raise_acting_only("capture updates")
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
                self._capture_update_graphs(sample_fn, updates_per_replay, capture_stream)
        except Exception as exc:  # capture is best effort: record why and run eagerly
            self._graphs = {}
            self._multi_graph = None
            self.update_fallback_reason = f"capture failed: {type(exc).__name__}: {exc}"[:500]
            return
        self.update_graph_enabled = True
        self.update_fallback_reason = ""

    @cold_path
    def _capture_update_graphs(
        self, sample_fn: SampleFn, updates_per_replay: int, stream: torch.cuda.Stream | None
    ) -> None:
        """Capture the single-update graphs (with and without the actor) and, if asked, the multi-update one,
        on ``stream`` (None: torch's capture stream)."""
        variants = [True] if self.actor_update_period == 1 else [True, False]
        pool = None
        for update_actor in variants:
            graph = torch.cuda.CUDAGraph()
            graph.register_generator_state(self.update_rng)
            with torch.cuda.graph(graph, pool=pool, stream=stream):
                self._update_step(sample_fn(self.update_rng), update_actor=update_actor)
            pool = graph.pool()
            self._graphs[update_actor] = graph
        if updates_per_replay > 1 and updates_per_replay % self.actor_update_period == 0:
            offset = self.num_updates % self.actor_update_period
            graph = torch.cuda.CUDAGraph()
            graph.register_generator_state(self.update_rng)
            with torch.cuda.graph(graph, pool=pool, stream=stream):
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
        """Switch the update's parts to their torch.compile'd form (fused kernels, same math).

        Each part compiles at its first call (a warm-up update); one that cannot runs its plain function from
        then on and keeps its reason (`compile_fallback_reason`), while the others stay compiled. The config's
        ``uncompiled_parts`` stay plain and out of the reasons. The optimizer-step parts stay plain while an
        optimizer has step hooks (data-parallel training averages gradients in one), since only
        ``Optimizer.step()`` runs them.
        """
        cfg = self.cfg
        optimizers = (self.actor_optimizer, self.critic_optimizer, self.alpha_optimizer)
        hooked = [name for name, opt in zip(("actor", "critic", "alpha"), optimizers) if has_step_hooks(opt)]
        steps = set(self.parts.optimizer_steps)
        plain_steps = steps if hooked else set()
        wanted = {name: part for name, part in self.parts.named().items() if name not in cfg.uncompiled_parts}
        if (steps - plain_steps) & set(wanted):
            for optimizer in optimizers:
                init_adamw_state(optimizer)  # a compiled `adamw_step` traces the state it steps
        for name, part in wanted.items():
            if name in plain_steps:
                which = f"the {', '.join(hooked)} optimizer" + (" has" if len(hooked) == 1 else "s have")
                part.uncompile(
                    f"{which} step hooks (data-parallel gradient averaging), which only an eager "
                    "Optimizer.step() runs"
                )
            else:  # compiles at its first call; refused at once (say, an unknown option), it runs plain
                part.compile(self._part_options(name))
        self._compiling = wanted
        self._compile_refusal = ""

    def _part_options(self, name: str) -> dict[str, Any]:
        """The inductor options part ``name`` compiles with: the config's own, plus horizontal fusion for the
        config's ``horizontal_fusion_parts``."""
        fusion = HORIZONTAL_FUSION_OPTIONS if name in self.cfg.horizontal_fusion_parts else {}
        return {**self.cfg.inductor_options, **fusion}

    @cold_path
    def _uncompile_parts(self, reason: str) -> None:
        """Back to the plain parts, recording why."""
        for part in self._compiling.values():
            part.uncompile(reason)
        self._compiling = {}
        self._compile_refusal = reason[:500]

    @property
    def compile_enabled(self) -> bool:
        """Whether any part of the update runs compiled."""
        return any(part.compiled for part in self._compiling.values())

    @property
    def compile_fallback_reason(self) -> str:
        """Why the update's parts run eagerly: "" when every part compiled, the one reason when none did for
        the same reason, else ``"part: reason; ..."`` for the parts that fell back."""
        if self._compile_refusal or not self._compiling:
            return self._compile_refusal or "not requested"
        eager = {name: part.fallback_reason for name, part in self._compiling.items() if not part.compiled}
        return joined_reasons(eager, parts=len(self._compiling))

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
