"""The collector: policy action -> env step -> replay write, replayed K control steps per CUDA graph.

One collector step is ``agent.act(obs)`` then ``env.step(action)`` then ``replay.add(...)`` then a copy of
the post-reset observation into the collector's own observation buffers (the env overwrites its buffers on
the next step, and the replay needs the observation the action was taken from). Everything it touches is
allocated before capture, and both random generators it draws from (``env.rng`` for resets and events,
``agent.rng`` for exploration) are registered with the graph, so ``simcore.CapturedWork`` can record K of
these steps into one torch CUDA graph (MuJoCo Warp physics included) and replay them with one launch.

On CPU, with ``training.cuda_graph=false``, or when capture fails, the same step runs eagerly and the
reason is recorded in :meth:`Collector.diagnostics`.

The collector also keeps device-side episode accumulators (return and length of every finished episode)
that :meth:`Collector.episode_summary` publishes and zeroes on the cold path.
"""

from __future__ import annotations

from typing import Any

import torch

import simcore
from trainrt.compiled import CompiledOnFirstCall, compile_refusal, joined_reasons
from trainrt.hotpath import cold_path

_EPISODE_ACCUMULATORS = (
    "_episode_return",
    "_episode_length",
    "_finished_return_sum",
    "_finished_length_sum",
    "_finished_count",
)


class Collector:
    """Steps the env with the agent's policy and writes every transition into the replay buffer.

    Args:
        env: a ``ManagerBasedRlEnv`` (or anything with its ``step``/``backend``/``rng`` surface).
        agent: the acting agent (``act(obs) -> (num_envs, num_actions)`` in [-1, 1], ``rng``).
        replay: a ``DeviceReplayBuffer`` on the env device.
        initial_obs: observation groups to act on first, ``{group: (num_envs, D)}`` (e.g. ``env.reset()``).
        steps_per_replay: K, control steps per graph replay (fixed at capture).
        use_graph: False forces the eager path (``training.cuda_graph=false``).
        compile_math: on CUDA, fuse the policy's stochastic action and the transition's record (replay write,
            observation copy, episode bookkeeping) with torch.compile (``training.compile_collector``; the
            env's own term math is compiled where the env is built).
    """

    @cold_path
    def __init__(
        self,
        env: Any,
        agent: Any,
        replay: Any,
        initial_obs: dict[str, torch.Tensor],
        *,
        steps_per_replay: int = 1,
        use_graph: bool = True,
        compile_math: bool = False,
    ) -> None:
        if steps_per_replay < 1:
            raise ValueError(f"steps_per_replay must be >= 1, got {steps_per_replay}")
        self.env = env
        self.agent = agent
        self.replay = replay
        self.steps_per_replay = int(steps_per_replay)
        self.use_graph = bool(use_graph)
        self.num_envs = env.num_envs
        self.device = torch.device(env.device)
        not_tensors = sorted(
            group for group, value in initial_obs.items() if not isinstance(value, torch.Tensor)
        )
        if not_tensors:
            raise ValueError(
                f"observation groups {not_tensors} are not concatenated tensors; the replay stores (N, D)"
            )
        self.obs = {group: tensor.detach().clone() for group, tensor in initial_obs.items()}
        """The observation the next action is taken from, ``{group: (num_envs, D)}`` (persistent)."""
        self.random_action = torch.zeros(self.num_envs, env.num_actions, device=self.device)
        """Persistent buffer of uniform random actions used while prefilling the replay (num_envs, A)."""
        # Episode accumulators: running per-env return/length, and sums over finished episodes.
        self._episode_return = torch.zeros(self.num_envs, device=self.device, dtype=torch.float32)
        self._episode_length = torch.zeros(self.num_envs, device=self.device, dtype=torch.float32)
        self._finished_return_sum = torch.zeros((), device=self.device, dtype=torch.float64)
        self._finished_length_sum = torch.zeros((), device=self.device, dtype=torch.float64)
        self._finished_count = torch.zeros((), device=self.device, dtype=torch.float64)
        self.steps_collected = 0
        """Vector env steps taken so far through ``collect`` and ``prefill`` (host counter)."""
        # The transition's record after the env step; eager until `compile_math`.
        self._record = CompiledOnFirstCall(self._record_transition)
        refusal = compile_refusal(compile_math, self.device)
        if refusal is None:
            self.compile_math()
        else:
            self.uncompile_math(refusal)
        generators = _unique_generators([env.rng, agent.rng])
        self.work = simcore.CapturedWork(
            self.step,
            backend=env.backend,
            name="collector",
            steps_per_replay=self.steps_per_replay,
            generators=generators,
            enabled=self.use_graph,
        )

    # --- hot path ------------------------------------------------------------------------------------------

    def step(self) -> None:
        """One control step for all envs with the policy's (stochastic) action; sync-free."""
        self._transition(self.agent.act(self.obs))

    def random_step(self) -> None:
        """One control step with uniform random actions in [-1, 1] (replay prefill); sync-free."""
        self.random_action.uniform_(-1.0, 1.0, generator=self.agent.rng)
        self._transition(self.random_action)

    def _transition(self, action: torch.Tensor) -> None:
        """Step the env with ``action`` (num_envs, A), store the transition, advance the observation."""
        self._record(action, self.env.step(action))

    def _record_transition(self, action: torch.Tensor, result: Any) -> None:
        """Store the transition of ``action`` and the env's ``StepResult``, advance the observation, count
        finished episodes. No random draws, so `compile_math` can fuse it."""
        self.replay.add(
            self.obs,
            action,
            result.reward,
            result.final_obs,
            result.terminated,
            result.truncated,
            result.valid,
        )
        for group, buffer in self.obs.items():
            buffer.copy_(result.obs[group])
        # Episode bookkeeping; rows whose physics went non-finite are not a finished episode.
        done = result.terminated | result.truncated
        finished = done & result.valid
        self._episode_return.add_(result.reward)
        self._episode_length.add_(1.0)
        self._finished_return_sum.add_(torch.where(finished, self._episode_return, 0.0).sum())
        self._finished_length_sum.add_(torch.where(finished, self._episode_length, 0.0).sum())
        self._finished_count.add_(finished.sum())
        self._episode_return.masked_fill_(done, 0.0)
        self._episode_length.masked_fill_(done, 0.0)
        self.agent.end_episodes(done)

    def collect(self, num_steps: int) -> None:
        """Advance ``num_steps`` control steps (a multiple of K) by replaying the collector work."""
        if num_steps % self.steps_per_replay:
            raise ValueError(
                f"num_steps={num_steps} is not a multiple of steps_per_replay={self.steps_per_replay}"
            )
        for _ in range(num_steps // self.steps_per_replay):
            self.work.replay()
        self.steps_collected += num_steps

    # --- cold path -----------------------------------------------------------------------------------------

    @cold_path
    def compile_math(self) -> bool:
        """Compile the agent's stochastic action (`Agent.compile_act`) and the transition's record; each
        compiles at its first call (an eager step: the prefill or the capture's warm-up). Returns whether
        torch.compile accepted both."""
        acts = self.agent.compile_act()
        records = self._record.compile()
        return acts and records

    @cold_path
    def uncompile_math(self, reason: str) -> None:
        """Run the agent's action and the transition's record eagerly again, recording ``reason``."""
        self.agent.uncompile_act(reason)
        self._record.uncompile(reason)

    @cold_path
    def math_diagnostics(self) -> dict[str, Any]:
        """Whether the collector step's math runs compiled (the env's terms and observations, the agent's
        action, the record), and why not where it does not: ``{"step_math_compiled", "step_math_fallback_reason"}``."""
        reasons = dict(self.env.term_math_reasons())
        if not self.agent.act_compiled:
            reasons["act"] = self.agent.act_compile_fallback_reason
        if not self._record.compiled:
            reasons["record"] = self._record.fallback_reason
        return {
            "step_math_compiled": not reasons,
            "step_math_fallback_reason": joined_reasons(reasons, parts=len(self.env.TERM_MATH_PARTS) + 2),
        }

    @cold_path
    def prefill(self, num_steps: int, *, use_policy: bool = False) -> None:
        """Eagerly take ``num_steps`` steps to fill the replay (random actions, or the policy on resume)."""
        for _ in range(num_steps):
            if use_policy:
                self.step()
            else:
                self.random_step()
        self.steps_collected += num_steps

    @cold_path
    def capture(self) -> None:
        """Capture the K-step graph (runs the CapturedWork's eager warm-up steps first on CUDA)."""
        self.work.capture()

    @cold_path
    def episode_summary(self) -> dict[str, float]:
        """Mean return and length of the episodes finished since the last call (zeroes the sums).

        Returns ``{"Train/num_episodes": n}`` plus ``Train/mean_reward`` and ``Train/mean_episode_length``
        when at least one episode finished.
        """
        values = torch.stack(
            [self._finished_return_sum, self._finished_length_sum, self._finished_count]
        ).cpu()
        self._finished_return_sum.zero_()
        self._finished_length_sum.zero_()
        self._finished_count.zero_()
        return_sum, length_sum, count = (float(v) for v in values)
        summary = {"Train/num_episodes": count}
        if count > 0:
            summary["Train/mean_reward"] = return_sum / count
            summary["Train/mean_episode_length"] = length_sum / count
        return summary

    def _carried_tensors(self) -> dict[str, torch.Tensor]:
        """The tensors a collector step carries to the next: the observation and the episode accumulators."""
        carried = {f"obs.{group}": tensor for group, tensor in self.obs.items()}
        return carried | {name: getattr(self, name) for name in _EPISODE_ACCUMULATORS}

    @cold_path
    def state_dict(self) -> dict[str, Any]:
        """CPU copies of what the next step continues from, and the count of steps collected so far."""
        tensors = {name: t.detach().cpu().clone() for name, t in self._carried_tensors().items()}
        return {"tensors": tensors, "steps_collected": self.steps_collected}

    @cold_path
    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put a :meth:`state_dict` back in place; ``ValueError`` when it was saved for other shapes."""
        live, saved = self._carried_tensors(), state["tensors"]
        unfit = sorted(
            name
            for name, tensor in live.items()
            if name not in saved or tuple(saved[name].shape) != tuple(tensor.shape)
        )
        if unfit:
            raise ValueError(f"the saved collector state does not fit this collector ({', '.join(unfit)})")
        with torch.no_grad():
            for name, tensor in live.items():
                tensor.copy_(saved[name].to(tensor.device))
        self.steps_collected = int(state["steps_collected"])

    @cold_path
    def diagnostics(self) -> dict[str, Any]:
        """Collector graph facts for run_summary.json (graph enabled, version, replays, fallback reason)."""
        facts = dict(self.work.diagnostics())
        facts["steps_per_replay"] = self.steps_per_replay
        facts["graph_requested"] = self.use_graph
        facts.update(self.math_diagnostics())
        if not self.use_graph:
            facts["disabled_by"] = "training.cuda_graph=false"
        return facts


def _unique_generators(generators: list[torch.Generator]) -> tuple[torch.Generator, ...]:
    """The generators without duplicates (by identity), in order."""
    unique: list[torch.Generator] = []
    for gen in generators:
        if all(gen is not other for other in unique):
            unique.append(gen)
    return tuple(unique)
