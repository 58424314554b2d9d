"""Device-resident replay: one fixed-capacity ring per env, n-step returns assembled at sample time.

Layout: every field is a `(capacity_per_env, num_envs, ...)` tensor on the env device and row `t`
holds each env's transition from the same vector step, so an env's history is one column read in
ring order. The write cursor is a device tensor: `add` indexes with it and advances it in place, so
a CUDA graph that captured `add` keeps writing new rows on every replay (a Python int would be frozen
into the graph at capture time).

Invalid transitions (`valid` False: the env's physics went non-finite) are written like any other
row, with their payload zeroed and their validity flag off. Sampling draws only rows whose flag is
on by inverting the cumulative count of valid rows, which is fixed-shape and needs no host sync, so
an invalid row can never be drawn and no loss needs masking. Unwritten rows start invalid, which
also keeps sampling inside the filled part of the ring.

n-step returns are built when sampling: from a drawn row the window walks forward along that env's
column for up to `n_step` rows and stops after a terminated or truncated row, before an invalid row,
and at the newest row (it never crosses the cursor into older data). It bootstraps from the stored
`next_obs` of the last row it kept, unless that row terminated. Because `next_obs` is stored
explicitly (the final observation before an auto-reset), truncated episodes bootstrap from their
true last state.

The buffer also tracks the running discounted return of each env and its variance and largest
magnitude (`return_var`, `return_abs_max`); algorithms that scale rewards by the return scale
(FlashSAC) read them from the sampled `Batch`.
"""

from dataclasses import dataclass

import torch

from trainrt.compiled import CompiledOnFirstCall
from trainrt.hotpath import cold_path
from trainrt.running_stats import merge_moments_


@dataclass
class Batch:
    """One sampled minibatch of n-step transitions (B = batch size).

    Attributes:
        obs: observation groups at the first step, e.g. {"policy": (B, Dp), "critic": (B, Dc)}.
        action: action taken at the first step (B, A).
        reward: discounted reward sum over the window, sum_k gamma^k r_k (B,).
        next_obs: observation groups to bootstrap from, same keys and shapes as `obs`.
        bootstrap: 1.0 where the target bootstraps from `next_obs`, 0.0 where the window ended in a
            termination (B,).
        discount: gamma ** (number of rewards in the window), to multiply the bootstrapped value (B,).
        return_var: running variance of the per-env discounted return () or None.
        return_abs_max: largest |discounted return| seen so far () or None.
    """

    obs: dict[str, torch.Tensor]
    action: torch.Tensor
    reward: torch.Tensor
    next_obs: dict[str, torch.Tensor]
    bootstrap: torch.Tensor
    discount: torch.Tensor
    return_var: torch.Tensor | None = None
    return_abs_max: torch.Tensor | None = None

    @property
    def batch_size(self) -> int:
        """Number of transitions B."""
        return self.action.shape[0]


class DeviceReplayBuffer:
    """Fixed-capacity per-env replay rings on the device; `add` and `sample` are sync-free.

    Args:
        num_envs: N, transitions per `add`.
        capacity_per_env: C, rows kept per env before the oldest is overwritten.
        obs_dims: observation group sizes, e.g. {"policy": 98, "critic": 131}; each group is stored
            separately so actor and critic may read different groups.
        num_actions: A.
        device: where the rings live (the env device).
        n_step: longest window of rewards summed per sample.
        gamma: discount of the n-step sum and of the tracked returns.

    Attributes:
        obs / next_obs: dict of (C, N, D_g) float32 rings.
        action: (C, N, A); reward: (C, N); terminated / truncated / valid: (C, N) bool.
        cursor: () long, the ring row the next `add` writes.
        rows_written: () long, rows written so far, saturating at C.
    """

    def __init__(
        self,
        num_envs: int,
        capacity_per_env: int,
        obs_dims: dict[str, int],
        num_actions: int,
        device: torch.device | str,
        n_step: int = 1,
        gamma: float = 0.99,
    ):
        if num_envs < 1 or capacity_per_env < 1 or num_actions < 1:
            raise ValueError(
                f"num_envs, capacity_per_env and num_actions must be >= 1, got {num_envs}, "
                f"{capacity_per_env}, {num_actions}"
            )
        if n_step < 1:
            raise ValueError(f"n_step must be >= 1, got {n_step}")
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must lie in [0, 1], got {gamma}")
        if not obs_dims:
            raise ValueError("obs_dims must name at least one observation group")
        self.num_envs = num_envs
        self.capacity_per_env = capacity_per_env
        self.obs_dims = dict(obs_dims)
        self.num_actions = num_actions
        self.device = torch.device(device)
        self.n_step = n_step
        self.gamma = gamma

        shape = (capacity_per_env, num_envs)
        zeros = dict(device=self.device, dtype=torch.float32)
        self.obs = {group: torch.zeros(*shape, dim, **zeros) for group, dim in self.obs_dims.items()}
        self.next_obs = {group: torch.zeros(*shape, dim, **zeros) for group, dim in self.obs_dims.items()}
        self.action = torch.zeros(*shape, num_actions, **zeros)
        self.reward = torch.zeros(*shape, **zeros)
        self.terminated = torch.zeros(shape, device=self.device, dtype=torch.bool)
        self.truncated = torch.zeros(shape, device=self.device, dtype=torch.bool)
        self.valid = torch.zeros(shape, device=self.device, dtype=torch.bool)
        self.cursor = torch.zeros((), device=self.device, dtype=torch.long)
        self.rows_written = torch.zeros((), device=self.device, dtype=torch.long)
        self._env_index = torch.arange(num_envs, device=self.device)
        self._step_discounts = [gamma**k for k in range(n_step + 1)]
        self._ring_rows = torch.arange(capacity_per_env, device=self.device)

        # The learner's view (see `freeze_view`): which rows it may sample, frozen at one moment.
        self.view_valid_count = torch.zeros(capacity_per_env * num_envs, device=self.device, dtype=torch.long)
        self.view_cursor = torch.zeros((), device=self.device, dtype=torch.long)
        self.view_return_var = torch.ones((), **zeros)
        self.view_return_abs_max = torch.zeros((), **zeros)
        self._view_rows_ahead = torch.zeros_like(self._ring_rows)
        self._view_row_kept = torch.zeros(capacity_per_env, device=self.device, dtype=torch.bool)
        self._view_sampleable = torch.zeros(shape, device=self.device, dtype=torch.bool)

        # `sample`'s row picking and gathers; eager until `compile_sample`.
        self._transitions = CompiledOnFirstCall(self._draw_transitions)

        # Running discounted return per env and its statistics (FlashSAC's reward scale).
        self.running_return = torch.zeros(num_envs, **zeros)
        self.return_mean = torch.zeros((), **zeros)
        self.return_var = torch.ones((), **zeros)
        self.return_count = torch.zeros((), device=self.device, dtype=torch.float64)
        self.return_abs_max = torch.zeros((), **zeros)

    # ----------------------------------------------------------------------------------------------
    # writing
    # ----------------------------------------------------------------------------------------------
    @torch.no_grad()
    def add(
        self,
        obs: dict[str, torch.Tensor],
        action: torch.Tensor,
        reward: torch.Tensor,
        next_obs: dict[str, torch.Tensor],
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        valid: torch.Tensor,
    ) -> None:
        """Write one row: every env's transition from one vector step, at the cursor.

        Args:
            obs: observation groups before the action, (N, D_g) each; must hold every stored group.
            action: action applied (N, A).
            reward: reward received (N,).
            next_obs: observation groups after the action and before any auto-reset, (N, D_g)
                (the env's `final_obs`: for done rows the last state of the finished episode).
            terminated: (N,) bool, episode ended by failure (no bootstrap).
            truncated: (N,) bool, episode cut by a time limit (bootstrap from next_obs).
            valid: (N,) bool, False where the transition must never be sampled.
        """
        valid = valid.to(torch.bool)
        keep = valid.unsqueeze(-1)
        row = self.cursor.view(1)  # a view, no kernel: a compiled add reads the cursor as one input
        for group in self.obs_dims:
            clean_obs = torch.where(keep, obs[group].float(), 0.0)
            clean_next = torch.where(keep, next_obs[group].float(), 0.0)
            self.obs[group].index_copy_(0, row, clean_obs.unsqueeze(0))
            self.next_obs[group].index_copy_(0, row, clean_next.unsqueeze(0))
        clean_reward = torch.where(valid, reward.float(), 0.0)
        self.action.index_copy_(0, row, torch.where(keep, action.float(), 0.0).unsqueeze(0))
        self.reward.index_copy_(0, row, clean_reward.unsqueeze(0))
        self.terminated.index_copy_(0, row, terminated.to(torch.bool).unsqueeze(0))
        self.truncated.index_copy_(0, row, truncated.to(torch.bool).unsqueeze(0))
        self.valid.index_copy_(0, row, valid.unsqueeze(0))
        self.cursor.add_(1).remainder_(self.capacity_per_env)
        self.rows_written.add_(1).clamp_(max=self.capacity_per_env)
        done = terminated.to(torch.bool) | truncated.to(torch.bool)
        self._track_returns(clean_reward, done, valid)

    def _track_returns(self, reward: torch.Tensor, done: torch.Tensor, valid: torch.Tensor) -> None:
        """Advance each env's discounted return and merge the valid ones into the statistics."""
        returns = torch.where(valid, self.gamma * self.running_return + reward, 0.0)
        weight = valid.float()
        count = weight.sum()
        batch_mean = (returns * weight).sum() / count.clamp(min=1.0)
        batch_var = ((returns - batch_mean).square() * weight).sum() / count.clamp(min=1.0)
        total = self.return_count + count
        ratio = torch.where(total > 0, count / total.clamp(min=1.0), 0.0).float()
        merge_moments_(self.return_mean, self.return_var, batch_mean, batch_var, ratio)
        self.return_count.copy_(total)
        self.return_abs_max.copy_(torch.maximum(self.return_abs_max, (returns.abs() * weight).max()))
        # The next episode starts from zero; an invalid row also restarts (its env gets reset).
        self.running_return.copy_(torch.where(done | ~valid, 0.0, returns))

    # ----------------------------------------------------------------------------------------------
    # the learner's view
    # ----------------------------------------------------------------------------------------------
    @torch.no_grad()
    def freeze_view(self, exclude_next_rows: int = 0) -> None:
        """Freeze what `sample(..., from_view=True)` may draw: the rows valid now, minus the next ones.

        The view holds the cumulative count of sampleable rows (the inverse-CDF table, computed once
        here instead of in every sample), the cursor (n-step windows stop before it) and the return
        statistics. ``exclude_next_rows`` ring rows starting at the cursor, the ones the next
        ``exclude_next_rows`` `add` calls overwrite, are left out, so a learner sampling this view
        on another stream never reads a row the collector is writing. Sync-free.
        """
        capacity = self.capacity_per_env
        if not 0 <= exclude_next_rows < capacity:
            raise ValueError(
                f"exclude_next_rows must lie in [0, capacity_per_env={capacity}), got {exclude_next_rows}"
            )
        sampleable = self.valid
        if exclude_next_rows:  # in place into preallocated buffers: this runs every iteration
            torch.sub(self._ring_rows, self.cursor, out=self._view_rows_ahead).remainder_(capacity)
            torch.ge(self._view_rows_ahead, exclude_next_rows, out=self._view_row_kept)
            torch.logical_and(self.valid, self._view_row_kept.unsqueeze(-1), out=self._view_sampleable)
            sampleable = self._view_sampleable
        torch.cumsum(sampleable.view(-1), 0, out=self.view_valid_count)
        self.view_cursor.copy_(self.cursor)
        self.view_return_var.copy_(self.return_var)
        self.view_return_abs_max.copy_(self.return_abs_max)

    # ----------------------------------------------------------------------------------------------
    # sampling
    # ----------------------------------------------------------------------------------------------
    @torch.no_grad()
    def sample(self, batch_size: int, generator: torch.Generator, *, from_view: bool = False) -> Batch:
        """Draw `batch_size` valid transitions uniformly (with replacement) as n-step samples.

        Fixed shape and sync-free (capturable in a CUDA graph when `generator` is registered with it).
        Before any valid row exists, every sample is the last ring slot (zeroed, flagged invalid); callers
        gate on `learning_starts`. ``from_view`` draws from the rows frozen by the last `freeze_view`
        (with its cursor and return statistics) instead of the live flags. The uniform numbers are drawn
        here, eagerly; the rows they pick and the gathers run in `_draw_transitions`, compiled after
        `compile_sample`.
        """
        valid_count = self.view_valid_count if from_view else self.valid.view(-1).cumsum(0)
        cursor = self.view_cursor if from_view else self.cursor
        uniform = torch.rand(batch_size, device=self.device, dtype=torch.float64, generator=generator)
        obs, action, reward, next_obs, bootstrap, discount = self._transitions(uniform, valid_count, cursor)
        return Batch(
            obs=obs,
            action=action,
            reward=reward,
            next_obs=next_obs,
            bootstrap=bootstrap,
            discount=discount,
            return_var=self.view_return_var if from_view else self.return_var,
            return_abs_max=self.view_return_abs_max if from_view else self.return_abs_max,
        )

    @cold_path
    def compile_sample(self) -> bool:
        """Run `sample`'s row picking and gathers through torch.compile (a few fused kernels instead of about
        twenty small ones per sample). It compiles at the next `sample`, which should be an eager warm-up
        before any CUDA graph capture; if it cannot, sampling stays eager and `sample_diagnostics` says why.
        Returns whether torch.compile accepted it."""
        return self._transitions.compile()

    @cold_path
    def sample_diagnostics(self) -> dict[str, object]:
        """Whether sampling runs compiled, and why not (for the run summary)."""
        return {
            "replay_sample_compiled": self._transitions.compiled,
            "replay_sample_compile_fallback_reason": self._transitions.fallback_reason,
        }

    def _draw_transitions(
        self, uniform: torch.Tensor, valid_count: torch.Tensor, cursor: torch.Tensor
    ) -> tuple[
        dict[str, torch.Tensor],
        torch.Tensor,
        torch.Tensor,
        dict[str, torch.Tensor],
        torch.Tensor,
        torch.Tensor,
    ]:
        """The transitions `sample` returns, for uniform numbers (B,) in [0, 1), the cumulative count of
        sampleable rows (C * N,) and the cursor its n-step windows stop before (a compilable part).

        Returns (obs, action, reward, next_obs, bootstrap, discount), as in `Batch`.
        """
        capacity, num_envs = self.capacity_per_env, self.num_envs
        batch_size = uniform.shape[0]
        # Inverse-CDF over the valid flags: the (u+1)-th valid row is the first with cumsum > u.
        total = valid_count[-1]
        rank = (uniform * total).long().clamp(max=(total - 1).clamp(min=0))
        flat = torch.searchsorted(valid_count, rank, right=True).clamp(max=capacity * num_envs - 1)
        start_row = torch.div(flat, num_envs, rounding_mode="floor")
        env = flat - start_row * num_envs

        reward_flat = self.reward.view(-1)
        terminated_flat = self.terminated.view(-1)

        reward_sum = reward_flat[flat]
        last_flat = flat
        if self.n_step == 1:  # one reward per sample: no window to walk
            discount = torch.full_like(reward_sum, self.gamma)
        else:
            # Rows after the start that are newer than it; the window never passes the newest row.
            newest_row = (cursor - 1).remainder(capacity)
            rows_ahead = (newest_row - start_row).remainder(capacity)
            done_flat = (self.terminated | self.truncated).view(-1)
            valid_flat = self.valid.view(-1)
            steps = torch.ones(batch_size, device=self.device, dtype=torch.long)
            open_window = ~done_flat[flat]
            for k in range(1, self.n_step):
                row_k = (start_row + k).remainder(capacity)
                flat_k = row_k * num_envs + env
                open_window = open_window & (rows_ahead >= k) & valid_flat[flat_k]
                reward_sum = reward_sum + torch.where(
                    open_window, self._step_discounts[k] * reward_flat[flat_k], 0.0
                )
                last_flat = torch.where(open_window, flat_k, last_flat)
                steps = steps + open_window.long()
                open_window = open_window & ~done_flat[flat_k]
            discount = torch.pow(torch.full_like(reward_sum, self.gamma), steps.float())
        bootstrap = (~terminated_flat[last_flat]).float()
        obs = {g: self.obs[g].view(capacity * num_envs, -1).index_select(0, flat) for g in self.obs_dims}
        next_obs = {
            g: self.next_obs[g].view(capacity * num_envs, -1).index_select(0, last_flat)
            for g in self.obs_dims
        }
        action = self.action.view(capacity * num_envs, -1).index_select(0, flat)
        return obs, action, reward_sum, next_obs, bootstrap, discount

    # ----------------------------------------------------------------------------------------------
    # cold path
    # ----------------------------------------------------------------------------------------------
    @cold_path
    def num_rows(self) -> int:
        """Rows written per env so far, at most capacity_per_env (synchronizes)."""
        return int(self.rows_written.item())

    @cold_path
    def num_valid(self) -> int:
        """Valid transitions currently stored across all envs (synchronizes)."""
        return int(self.valid.sum().item())

    @cold_path
    def view_return_statistics(self) -> dict[str, float]:
        """The return statistics of the learner's view (`freeze_view`) on the host: ``return_var`` and
        ``return_abs_max``, what FlashSAC's reward scale is made of (reads device values)."""
        return {"return_var": self.view_return_var.item(), "return_abs_max": self.view_return_abs_max.item()}

    @cold_path
    @staticmethod
    def planned_bytes(
        num_envs: int, capacity_per_env: int, obs_dims: dict[str, int], num_actions: int, n_step: int = 1
    ) -> int:
        """Device bytes a buffer of these sizes allocates: every tensor it holds (the rings, the learner view's
        per-row state, the small per-env state).

        Measured on a buffer built on the ``meta`` device (shapes and dtypes, no memory), so it follows the
        constructor. Lets a caller check that a buffer fits before allocating it (``build_replay``).
        """
        shell = DeviceReplayBuffer(num_envs, capacity_per_env, obs_dims, num_actions, "meta", n_step=n_step)
        return shell._tensor_bytes()

    def _tensor_bytes(self) -> int:
        """Bytes of every tensor this buffer holds (as attributes or in attribute dicts)."""
        tensors = []
        for value in vars(self).values():
            tensors += list(value.values()) if isinstance(value, dict) else [value]
        return sum(t.numel() * t.element_size() for t in tensors if isinstance(t, torch.Tensor))

    def memory_bytes(self) -> int:
        """Device bytes held by the rings."""
        tensors = [*self.obs.values(), *self.next_obs.values(), self.action, self.reward]
        tensors += [self.terminated, self.truncated, self.valid]
        return sum(t.numel() * t.element_size() for t in tensors)

    # ----------------------------------------------------------------------------------------------
    # checkpoint state (cold path)
    # ----------------------------------------------------------------------------------------------
    _STATISTICS = ("return_mean", "return_var", "return_count", "return_abs_max", "running_return")
    _RINGS = ("action", "reward", "terminated", "truncated", "valid", "cursor", "rows_written")

    @cold_path
    def state_dict(self, include_rings: bool = False) -> dict[str, object]:
        """CPU copies of the return statistics (FlashSAC's reward scale) and, optionally, of the rings.

        Args:
            include_rings: also save every stored transition and the write cursor (``memory_bytes()`` of
                data), so a resumed run samples the same replay instead of refilling it.
        """
        state: dict[str, object] = {
            "statistics": {name: getattr(self, name).detach().cpu().clone() for name in self._STATISTICS},
        }
        if include_rings:
            rings: dict[str, object] = {
                name: getattr(self, name).detach().cpu().clone() for name in self._RINGS
            }
            rings["obs"] = {g: t.detach().cpu().clone() for g, t in self.obs.items()}
            rings["next_obs"] = {g: t.detach().cpu().clone() for g, t in self.next_obs.items()}
            state["rings"] = rings
        return state

    @cold_path
    def load_state_dict(self, state: dict[str, object]) -> list[str]:
        """Copy a :meth:`state_dict` into this buffer's tensors in place (captured graphs keep working).

        The statistics always load; ``running_return`` only when the env count matches (else every env's
        return restarts at zero). The rings load only when their shapes match this buffer's exactly.

        Returns:
            notes on what did not load and why (empty when everything loaded).
        """
        notes: list[str] = []
        statistics = state.get("statistics", {})
        for name in self._STATISTICS:
            if name not in statistics:
                notes.append(f"replay state has no {name}; it starts fresh")
                continue
            saved, mine = statistics[name], getattr(self, name)
            if tuple(saved.shape) != tuple(mine.shape):
                notes.append(
                    f"replay {name} has shape {tuple(saved.shape)}, this run {tuple(mine.shape)}; it starts fresh"
                )
                continue
            mine.copy_(saved.to(device=mine.device, dtype=mine.dtype))
        rings = state.get("rings")
        if rings is None:
            return notes
        mine_rings = {name: getattr(self, name) for name in self._RINGS}
        mine_rings.update({f"obs.{g}": t for g, t in self.obs.items()})
        mine_rings.update({f"next_obs.{g}": t for g, t in self.next_obs.items()})
        saved_rings = {name: rings[name] for name in self._RINGS if name in rings}
        saved_rings.update({f"obs.{g}": t for g, t in rings.get("obs", {}).items()})
        saved_rings.update({f"next_obs.{g}": t for g, t in rings.get("next_obs", {}).items()})
        mismatched = [
            name
            for name, tensor in mine_rings.items()
            if name not in saved_rings or tuple(saved_rings[name].shape) != tuple(tensor.shape)
        ]
        if mismatched:
            notes.append(
                f"saved replay rings do not fit this buffer ({', '.join(mismatched[:4])} differ: other num_envs, "
                "buffer size or observations); the replay refills"
            )
            return notes
        for name, tensor in mine_rings.items():
            tensor.copy_(saved_rings[name].to(device=tensor.device, dtype=tensor.dtype))
        return notes
