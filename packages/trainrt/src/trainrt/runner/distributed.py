"""Data-parallel training on the GPUs of one host with torch.distributed (NCCL on CUDA, gloo on CPU).

A run of ``world_size`` ranks is ``world_size`` processes, started by ``torchrun`` or by
``trainrt train --gpus N`` (``trainrt.runner.launcher``); each reads ``RANK``, ``LOCAL_RANK``,
``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` from its environment. Each rank owns its envs
(``algo.num_envs`` per rank), its simcore backend on ``cuda:LOCAL_RANK`` (or the CPU), and its replay shard.
The learner is data-parallel:

- initial weights (and every other agent tensor) are broadcast from rank 0 after construction;
- each optimizer gets a step pre-hook that all-reduces its parameters' gradients as one flattened buffer
  and divides by ``world_size`` before the step (on CUDA the all-reduce is captured with the learner graph);
- at every iteration boundary (cold path) the ranks all-reduce a failure flag and a stop request (a signal
  one rank received during the iteration: every rank then stops after that same iteration), then rank 0's
  agent buffers
  (observation-normalizer and BatchNorm statistics) are broadcast, as DDP does with its buffers;
- every ``training.distributed.check_every`` iterations and at the end, a checksum of all agent parameters
  and buffers is all-gathered; ranks that disagree fail the run.

Seeds: rank ``r`` seeds its env, its agent's generators and torch with
``rank_seed(seed, r) = seed + RANK_SEED_STRIDE * r``; rank 0 keeps the run seed, so a one-rank run is
the single-process run. Initial weights are rank 0's (broadcast), whatever each rank's seed.

A one-process run gets :class:`SingleProcess`, whose methods do nothing: the single-process path has no
distributed branches.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import signal
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from trainrt.hotpath import cold_path

# Large and prime, so per-rank seeds of neighbouring run seeds (a seed sweep) do not collide for any
# realistic world size, and unlike the agent's learner-generator offset (0x5EED).
RANK_SEED_STRIDE = 1_000_003
# Injected failures for tests of the failure path: "RANK:ITERATION" raises on that rank before that
# iteration's boundary; "RANK:ITERATION:crash" ends the process there at once (a rank that dies).
INJECT_FAILURE_ENV = "TRAINRT_INJECT_RANK_FAILURE"
LAUNCH_ENV_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


def rank_seed(seed: int, rank: int) -> int:
    """The seed of rank ``rank`` in a run seeded ``seed`` (rank 0 keeps ``seed``)."""
    return seed + RANK_SEED_STRIDE * rank


class RankFailure(RuntimeError):
    """Another rank failed, or the ranks' weights diverged: this rank stops too."""


@dataclass(frozen=True)
class Boundary:
    """What the ranks agreed at an iteration boundary.

    Attributes:
        stop_signal: the signal number a rank received during the iteration (the lowest rank's), or None.
        time_up: ``training.time_limit_sec`` has passed (on any rank).
    """

    stop_signal: int | None
    time_up: bool


@dataclass(frozen=True)
class LaunchEnv:
    """Where this process sits in a launch, from the launcher's environment variables."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> LaunchEnv:
        """Read ``RANK``/``LOCAL_RANK``/``WORLD_SIZE`` (absent: one process); ``ValueError`` if inconsistent."""
        env = os.environ if environ is None else environ
        try:
            world_size = int(env.get("WORLD_SIZE", "1"))
            rank = int(env.get("RANK", "0"))
            local_rank = int(env.get("LOCAL_RANK", str(rank)))
        except ValueError as err:
            raise ValueError(f"RANK/LOCAL_RANK/WORLD_SIZE must be integers: {err}") from None
        if world_size < 1 or not 0 <= rank < world_size or local_rank < 0:
            raise ValueError(
                f"bad launch environment: RANK={rank}, LOCAL_RANK={local_rank}, WORLD_SIZE={world_size} "
                "(need 0 <= RANK < WORLD_SIZE)"
            )
        return cls(rank=rank, local_rank=local_rank, world_size=world_size)


@cold_path
def rank_device(device: str, launch: LaunchEnv) -> str:
    """The device of this rank: ``cuda`` becomes ``cuda:LOCAL_RANK`` in a multi-rank run; CPU stays CPU."""
    if launch.world_size == 1 or device == "cpu":
        return device
    if device != "cuda":
        raise ValueError(
            f"sim.device={device!r} names one GPU, but {launch.world_size} ranks each need their own; "
            "use sim.device=cuda (rank r runs on cuda:LOCAL_RANK) or leave it unset"
        )
    return f"cuda:{launch.local_rank}"


def agent_tensors(agent: Any) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """(parameters, buffers) of an agent in a fixed order, each tensor once.

    Parameters: those of its modules and those its optimizers step (e.g. a temperature); buffers: its
    modules' buffers (normalizer and BatchNorm statistics). Attribute names fix the order, so every rank
    lists the same tensors in the same order.
    """
    params: list[torch.Tensor] = []
    buffers: list[torch.Tensor] = []
    seen: set[int] = set()

    def add(into: list[torch.Tensor], tensor: torch.Tensor) -> None:
        if id(tensor) not in seen:
            seen.add(id(tensor))
            into.append(tensor)

    attributes = sorted(vars(agent).items())
    for _, value in attributes:
        if isinstance(value, nn.Module):
            for p in value.parameters():
                add(params, p)
    for optimizer in agent_optimizers(agent):
        for group in optimizer.param_groups:
            for p in group["params"]:
                add(params, p)
    for _, value in attributes:
        if isinstance(value, nn.Module):
            for b in value.buffers():
                add(buffers, b)
    return params, buffers


def agent_optimizers(agent: Any) -> list[torch.optim.Optimizer]:
    """The agent's optimizers, ordered by attribute name (the same order on every rank)."""
    return [v for _, v in sorted(vars(agent).items()) if isinstance(v, torch.optim.Optimizer)]


class SingleProcess:
    """The rank group of a one-process run: every collective is a no-op."""

    rank = 0
    local_rank = 0
    world_size = 1
    backend: str | None = None
    is_main = True

    def seed(self, seed: int) -> int:
        """This rank's seed: the run seed."""
        return seed

    def device(self, device: str) -> str:
        """This rank's device: the run's."""
        return device

    def shared_object(self, value: Any) -> Any:
        """Rank 0's ``value``: here, ``value``."""
        return value

    def attach_agent(self, agent: Any) -> None:
        """Nothing to synchronize."""

    def end_iteration(
        self,
        iteration: int,
        local_error: BaseException | None,
        stop_signal: int | None = None,
        time_up: bool = False,
    ) -> Boundary:
        """Raise this rank's own error, if any; else the stop request and the time limit, as given."""
        if local_error is not None:
            raise local_error
        return Boundary(stop_signal, time_up)

    def check_agreement(self, agent: Any, iteration: int) -> None:
        """Nothing to compare."""

    def gather(self, value: Any) -> list[Any]:
        """Every rank's ``value``: here, ``[value]``."""
        return [value]

    def facts(self) -> dict[str, Any]:
        """Launch facts for the manifest and summary."""
        return {"world_size": 1}

    def close(self) -> None:
        """Nothing to close."""


class DataParallelRanks:
    """One rank of a data-parallel run on a torch.distributed process group (see the module docstring).

    Args:
        launch: this process's rank, local rank and world size.
        device: the run's device before placement (``cpu`` or ``cuda``): picks the backend (gloo / nccl).
        backend: ``auto`` (nccl on CUDA, gloo on CPU), ``nccl`` or ``gloo``.
        timeout_sec: the process group's timeout: a collective that waits longer raises (no hung rank).
        check_every: iterations between weight checksums.
    """

    def __init__(
        self, launch: LaunchEnv, device: str, *, backend: str, timeout_sec: float, check_every: int
    ) -> None:
        import torch.distributed as dist

        self.dist = dist
        self.rank = launch.rank
        self.local_rank = launch.local_rank
        self.world_size = launch.world_size
        self.is_main = launch.rank == 0
        self.check_every = check_every
        self._device = rank_device(device, launch)
        on_cuda = self._device.startswith("cuda")
        self.backend = backend if backend != "auto" else ("nccl" if on_cuda else "gloo")
        if on_cuda:
            torch.cuda.set_device(torch.device(self._device))
        if self.backend == "nccl":
            # NVLink multicast stays off, for torchrun launches too.
            os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        self.collective_device = torch.device(self._device if self.backend == "nccl" else "cpu")
        self.last_checksums: list[list[float]] = []
        self._hooks: list[Any] = []
        if not dist.is_initialized():
            dist.init_process_group(
                backend=self.backend,
                rank=self.rank,
                world_size=self.world_size,
                timeout=dt.timedelta(seconds=timeout_sec),
            )

    def seed(self, seed: int) -> int:
        """This rank's seed (``rank_seed``)."""
        return rank_seed(seed, self.rank)

    def device(self, device: str) -> str:
        """This rank's device (``rank_device``)."""
        return self._device

    @cold_path
    def shared_object(self, value: Any) -> Any:
        """Rank 0's ``value`` on every rank (e.g. the run directory)."""
        box = [value]
        self.dist.broadcast_object_list(box, src=0)
        return box[0]

    @cold_path
    def attach_agent(self, agent: Any) -> None:
        """Broadcast rank 0's agent tensors, then all-reduce gradients before every optimizer step."""
        params, buffers = agent_tensors(agent)
        with torch.no_grad():
            for tensor in params + buffers:
                self._broadcast_(tensor)
        for optimizer in agent_optimizers(agent):
            self._hooks.append(optimizer.register_step_pre_hook(self._average_gradients))

    def _average_gradients(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        """Step pre-hook: gradients of ``optimizer``'s parameters become their mean over ranks (no sync)."""
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if not grads:
            return
        flat = torch.cat([g.reshape(-1) for g in grads])
        self.dist.all_reduce(flat)  # SUM: gloo has no AVG
        flat.div_(self.world_size)
        for grad, averaged in zip(grads, flat.split([g.numel() for g in grads]), strict=True):
            grad.copy_(averaged.view_as(grad))

    def _broadcast_(self, tensor: torch.Tensor) -> None:
        """Overwrite ``tensor`` with rank 0's (in place: captured graphs keep their addresses)."""
        staged = tensor.detach().to(self.collective_device).clone()
        self.dist.broadcast(staged, src=0)
        tensor.detach().copy_(staged.to(tensor.device))

    @cold_path
    def end_iteration(
        self,
        iteration: int,
        local_error: BaseException | None,
        stop_signal: int | None = None,
        time_up: bool = False,
    ) -> Boundary:
        """Iteration boundary: agree whether every rank is fine and whether the run ends here.

        A rank's own error is re-raised on it; the others raise :class:`RankFailure` naming the failed ranks
        and their errors. Losing contact with a peer (it died mid-iteration) raises too, after at most the
        process group's timeout. Otherwise returns the same :class:`Boundary` on every rank: the stop
        request of the lowest rank that has one (the signal number it received), and whether any rank's
        time limit is up. All ranks then stop after the same iteration.
        """
        flags = torch.zeros(3, self.world_size, dtype=torch.float32, device=self.collective_device)
        flags[0, self.rank] = 1.0 if local_error is not None else 0.0
        flags[1, self.rank] = float(stop_signal or 0)
        flags[2, self.rank] = 1.0 if time_up else 0.0
        try:
            self.dist.all_reduce(flags)
        except Exception as exc:
            if local_error is not None:
                raise local_error from exc
            raise RankFailure(
                f"rank {self.rank} lost contact with the other ranks at iteration {iteration}: {exc}"
            ) from exc
        error_flags, stop_flags, time_flags = flags.cpu().tolist()
        failed = [r for r, flag in enumerate(error_flags) if flag > 0]
        if not failed:
            return Boundary(next((int(sig) for sig in stop_flags if sig > 0), None), any(time_flags))
        text = "" if local_error is None else f"{type(local_error).__name__}: {local_error}"
        errors = self.gather(text)
        if local_error is not None:
            raise local_error
        detail = "; ".join(f"rank {r}: {errors[r]}" for r in failed)
        raise RankFailure(f"rank(s) {failed} failed at iteration {iteration}, stopping every rank ({detail})")

    @cold_path
    def sync_buffers(self, agent: Any) -> None:
        """Broadcast rank 0's agent buffers (normalizer and BatchNorm statistics) in place."""
        _, buffers = agent_tensors(agent)
        with torch.no_grad():
            for tensor in buffers:
                self._broadcast_(tensor)

    @cold_path
    def check_agreement(self, agent: Any, iteration: int) -> None:
        """Sync buffers; every ``check_every`` iterations compare all ranks' weight checksums."""
        self.sync_buffers(agent)
        if self.check_every and iteration % self.check_every == 0:
            self.compare_checksums(agent, iteration)

    @cold_path
    def compare_checksums(self, agent: Any, iteration: int) -> None:
        """All-gather (sum, sum of squares) of every parameter and buffer; ``RankFailure`` if ranks differ."""
        everyone = self.gather(parameter_checksum(agent))
        self.last_checksums = everyone
        diverged = diverged_ranks(everyone)
        if diverged:
            raise RankFailure(
                f"weights diverged at iteration {iteration}: rank(s) {diverged} have checksums "
                f"{[everyone[r] for r in diverged]}, rank 0 has {everyone[0]}"
            )

    @cold_path
    def gather(self, value: Any) -> list[Any]:
        """Every rank's ``value`` (picklable), in rank order, on every rank."""
        out: list[Any] = [None] * self.world_size
        self.dist.all_gather_object(out, value)
        return out

    def facts(self) -> dict[str, Any]:
        """Launch facts for the manifest and summary."""
        return {
            "world_size": self.world_size,
            "rank": self.rank,
            "local_rank": self.local_rank,
            "backend": self.backend,
        }

    @cold_path
    def close(self) -> None:
        """Remove the gradient hooks and leave the process group."""
        for hook in self._hooks:
            hook.remove()
        self._hooks = []
        if self.dist.is_initialized():
            self.dist.destroy_process_group()


@cold_path
def parameter_checksum(agent: Any) -> list[float]:
    """[sum, sum of squares] in float64 over every agent parameter and buffer (cold path: reads the device)."""
    params, buffers = agent_tensors(agent)
    total = torch.zeros(2, dtype=torch.float64)
    for tensor in params + buffers:
        values = tensor.detach().double().cpu()
        total += torch.stack([values.sum(), values.square().sum()])
    return total.tolist()


def diverged_ranks(checksums: list[list[float]]) -> list[int]:
    """Ranks whose checksum differs from rank 0's beyond float64 summation-order noise (relative 1e-9)."""
    reference = checksums[0]
    return [
        rank
        for rank, theirs in enumerate(checksums)
        if not all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(reference, theirs))
    ]


@cold_path
def rank_config(cfg: Any, ranks: Any, device: str) -> tuple[str, Any]:
    """This rank's device and config: its own device and seed (``device`` and ``cfg`` for one process)."""
    if ranks.world_size == 1:
        return device, cfg
    device = ranks.device(device)
    training = cfg.training.model_copy(update={"seed": ranks.seed(cfg.training.seed)})
    return device, cfg.model_copy(
        update={"sim": cfg.sim.model_copy(update={"device": device}), "training": training}
    )


@cold_path
def make_ranks(device: str, *, backend: str, timeout_sec: float, check_every: int) -> Any:
    """The rank group of this process: :class:`SingleProcess` unless the launcher says ``WORLD_SIZE`` > 1."""
    launch = LaunchEnv.from_environ()
    if launch.world_size == 1:
        return SingleProcess()
    return DataParallelRanks(
        launch, device, backend=backend, timeout_sec=timeout_sec, check_every=check_every
    )


@cold_path
def injected_failure(rank: int, iteration: int) -> None:
    """Fail as ``TRAINRT_INJECT_RANK_FAILURE`` says (``"<rank>:<iteration>[:crash|:sigterm]"``) on that rank
    and iteration: raise, exit at once, or send this process SIGTERM (a stop request of one rank only)."""
    spec = os.environ.get(INJECT_FAILURE_ENV)
    if not spec or not spec.startswith(f"{rank}:{iteration}"):
        return
    if spec == f"{rank}:{iteration}:crash":
        os._exit(17)  # no cleanup, no summary: what a killed or segfaulted rank looks like to its peers
    if spec == f"{rank}:{iteration}:sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        return
    if spec == f"{rank}:{iteration}":
        raise RuntimeError(f"injected failure on rank {rank} at iteration {iteration} ({INJECT_FAILURE_ENV})")


@cold_path
def gather_rank_figures(
    ranks: Any, agent: Any, rank_cfg: Any, timings: list[Any], *, device: str
) -> list[Any]:
    """Every rank's own figures (``RankFigures``, with its weight checksum) on every rank; ``RankFailure`` if the
    weights differ between ranks. ``rank_cfg``: this rank's config (its seed)."""
    from trainrt.runner.summary import RankFigures, tail_throughput

    tail = tail_throughput(timings, rank_cfg.training.tail_window)
    mine = RankFigures(
        rank=ranks.rank,
        device=device,
        seed=rank_cfg.training.seed,
        num_envs=rank_cfg.algo.num_envs,
        completed_iterations=len(timings),
        total_env_steps=sum(t.env_steps for t in timings),
        training_wall_time_sec=math.fsum(t.wall_time_sec for t in timings),
        tail_env_steps_per_sec=tail.env_steps_per_sec,
        parameter_checksum=parameter_checksum(agent),
    )
    per_rank = [RankFigures.model_validate(f) for f in ranks.gather(mine.model_dump())]
    checksums = [f.parameter_checksum for f in per_rank]
    diverged = diverged_ranks(checksums)
    if diverged:
        raise RankFailure(
            f"weights diverged: rank(s) {diverged} end with checksums "
            f"{[checksums[r] for r in diverged]}, rank 0 with {checksums[0]}"
        )
    return per_rank
