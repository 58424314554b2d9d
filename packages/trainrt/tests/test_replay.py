"""DeviceReplayBuffer: ring order and wrap-around, n-step windows, validity, return statistics."""

import numpy as np
import pytest
import torch

from trainrt.replay import Batch, DeviceReplayBuffer

GAMMA = 0.5


def _fill(
    buffer: DeviceReplayBuffer,
    steps: int,
    *,
    terminated: dict[tuple[int, int], bool] | None = None,
    truncated: dict[tuple[int, int], bool] | None = None,
    invalid: set[tuple[int, int]] | None = None,
) -> None:
    """Add `steps` rows whose values encode (step t, env e): obs = 100 t + e, next_obs = obs + 0.5.

    Rewards are t + 1 + 10 e so every window sum identifies the rows it used.
    """
    terminated, truncated, invalid = terminated or {}, truncated or {}, invalid or set()
    n = buffer.num_envs
    for t in range(steps):
        ids = torch.tensor([100.0 * t + e for e in range(n)])
        obs = {g: ids.unsqueeze(-1).expand(n, d).clone() for g, d in buffer.obs_dims.items()}
        next_obs = {g: (ids + 0.5).unsqueeze(-1).expand(n, d).clone() for g, d in buffer.obs_dims.items()}
        valid = torch.tensor([(t, e) not in invalid for e in range(n)])
        if not valid.all():  # what a non-finite physics row looks like
            for g in obs:
                obs[g][~valid] = float("nan")
        buffer.add(
            obs,
            ids.unsqueeze(-1).expand(n, buffer.num_actions).clone(),
            torch.tensor([t + 1.0 + 10.0 * e for e in range(n)]),
            next_obs,
            torch.tensor([terminated.get((t, e), False) for e in range(n)]),
            torch.tensor([truncated.get((t, e), False) for e in range(n)]),
            valid,
        )


def _ids(batch: Batch) -> list[tuple[int, int]]:
    """(t, env) of each sampled first row, decoded from the policy observation."""
    values = batch.obs["policy"][:, 0].round().long().tolist()
    return [(v // 100, v % 100) for v in values]


def _make(num_envs: int = 2, capacity: int = 10, n_step: int = 3) -> DeviceReplayBuffer:
    return DeviceReplayBuffer(
        num_envs, capacity, {"policy": 3, "critic": 5}, 2, "cpu", n_step=n_step, gamma=GAMMA
    )


def test_sample_shapes_and_groups_are_stored_separately():
    buffer = _make()
    _fill(buffer, 4)
    batch = buffer.sample(7, torch.Generator().manual_seed(0))
    assert batch.obs["policy"].shape == (7, 3) and batch.obs["critic"].shape == (7, 5)
    assert batch.next_obs["critic"].shape == (7, 5)
    assert batch.action.shape == (7, 2)
    assert batch.reward.shape == batch.bootstrap.shape == batch.discount.shape == (7,)
    assert batch.batch_size == 7


def test_rows_are_written_at_a_device_cursor_in_env_order():
    buffer = _make(num_envs=3, capacity=4)
    _fill(buffer, 3)
    assert buffer.cursor.item() == 3 and buffer.rows_written.item() == 3
    for t in range(3):
        assert buffer.obs["policy"][t, :, 0].tolist() == [100.0 * t + e for e in range(3)]
    assert not buffer.valid[3].any()  # unwritten row stays unsampleable


def test_wrap_around_overwrites_oldest_and_windows_follow_time_across_the_seam():
    buffer = _make(num_envs=2, capacity=4, n_step=2)
    _fill(buffer, 6)  # steps 4, 5 overwrote ring rows 0, 1
    assert buffer.cursor.item() == 2 and buffer.num_rows() == 4
    assert buffer.obs["policy"][:, 0, 0].tolist() == [400.0, 500.0, 200.0, 300.0]
    batch = buffer.sample(2000, torch.Generator().manual_seed(1))
    ids = _ids(batch)
    assert {t for t, _ in ids} == {2, 3, 4, 5}
    for (t, e), reward, discount, next_obs in zip(
        ids, batch.reward, batch.discount, batch.next_obs["policy"]
    ):
        if t == 3:  # ring row 3 -> ring row 0 continues the same env's history
            assert reward.item() == pytest.approx((4 + 10 * e) + GAMMA * (5 + 10 * e))
            assert next_obs[0].item() == 100 * 4 + e + 0.5
        if t == 5:  # the newest row: the window cannot reach into older data past the cursor
            assert reward.item() == pytest.approx(6 + 10 * e)
            assert discount.item() == pytest.approx(GAMMA)


def test_n_step_windows_against_hand_computed_targets():
    # env 0: terminated at t=2, truncated at t=5. env 1: invalid at t=3, nothing done. 8 steps, no wrap.
    buffer = _make(num_envs=2, capacity=10, n_step=3)
    _fill(buffer, 8, terminated={(2, 0): True}, truncated={(5, 0): True}, invalid={(3, 1)})
    g = GAMMA
    r0 = [t + 1.0 for t in range(8)]  # env 0 rewards
    r1 = [t + 11.0 for t in range(8)]  # env 1 rewards
    # (t, env): (reward sum, discount, bootstrap, next_obs id)
    expected = {
        (0, 0): (r0[0] + g * r0[1] + g**2 * r0[2], g**3, 0.0, 200.5),  # ends in the termination at t=2
        (1, 0): (r0[1] + g * r0[2], g**2, 0.0, 200.5),
        (2, 0): (r0[2], g, 0.0, 200.5),  # terminal row itself
        (3, 0): (r0[3] + g * r0[4] + g**2 * r0[5], g**3, 1.0, 500.5),  # truncation: bootstrap from final obs
        (4, 0): (r0[4] + g * r0[5], g**2, 1.0, 500.5),
        (5, 0): (r0[5], g, 1.0, 500.5),
        (6, 0): (r0[6] + g * r0[7], g**2, 1.0, 700.5),  # newest row at t=7 cuts the window
        (7, 0): (r0[7], g, 1.0, 700.5),
        (0, 1): (r1[0] + g * r1[1] + g**2 * r1[2], g**3, 1.0, 201.5),
        (1, 1): (r1[1] + g * r1[2], g**2, 1.0, 201.5),  # the invalid row at t=3 cuts the window
        (2, 1): (r1[2], g, 1.0, 201.5),
        (4, 1): (r1[4] + g * r1[5] + g**2 * r1[6], g**3, 1.0, 601.5),
        (5, 1): (r1[5] + g * r1[6] + g**2 * r1[7], g**3, 1.0, 701.5),
        (7, 1): (r1[7], g, 1.0, 701.5),
    }
    batch = buffer.sample(4000, torch.Generator().manual_seed(2))
    seen = set()
    for i, key in enumerate(_ids(batch)):
        assert key != (3, 1), "an invalid transition was sampled"
        seen.add(key)
        if key not in expected:
            continue
        reward, discount, bootstrap, next_id = expected[key]
        assert batch.reward[i].item() == pytest.approx(reward), key
        assert batch.discount[i].item() == pytest.approx(discount), key
        assert batch.bootstrap[i].item() == bootstrap, key
        assert batch.next_obs["policy"][i, 0].item() == next_id, key
        assert batch.next_obs["critic"][i, 0].item() == next_id, key
        assert batch.action[i, 0].item() == 100 * key[0] + key[1]
    # every valid transition is reachable: 16 rows minus the invalid one
    assert seen == {(t, e) for t in range(8) for e in range(2)} - {(3, 1)}


def test_invalid_rows_are_never_sampled_and_their_payload_is_zeroed():
    buffer = _make(num_envs=4, capacity=6, n_step=1)
    invalid = {(t, e) for t in range(6) for e in range(4) if (t + e) % 3 == 0}
    _fill(buffer, 6, invalid=invalid)
    batch = buffer.sample(5000, torch.Generator().manual_seed(3))
    assert not set(_ids(batch)) & invalid
    assert torch.isfinite(buffer.obs["policy"]).all()
    assert buffer.num_valid() == 24 - len(invalid)


def test_sampling_is_uniform_over_valid_rows():
    buffer = _make(num_envs=3, capacity=5, n_step=1)
    _fill(buffer, 5, invalid={(0, 0), (4, 2)})
    batch = buffer.sample(26000, torch.Generator().manual_seed(4))
    counts = np.bincount([t * 3 + e for t, e in _ids(batch)], minlength=15)
    counts = np.delete(counts, [0 * 3 + 0, 4 * 3 + 2])
    assert counts.min() > 0.85 * 2000 and counts.max() < 1.15 * 2000


def test_return_statistics_match_a_float64_reference():
    buffer = DeviceReplayBuffer(3, 8, {"policy": 1}, 1, "cpu", n_step=1, gamma=0.9)
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=(12, 3))
    dones = rng.random((12, 3)) < 0.2
    valid = rng.random((12, 3)) > 0.1
    running = np.zeros(3)
    samples = []
    for t in range(12):
        returns = 0.9 * running + rewards[t]
        samples += list(returns[valid[t]])
        running = np.where(dones[t] | ~valid[t], 0.0, returns)
        buffer.add(
            {"policy": torch.zeros(3, 1)},
            torch.zeros(3, 1),
            torch.tensor(rewards[t], dtype=torch.float32),
            {"policy": torch.zeros(3, 1)},
            torch.tensor(dones[t]),
            torch.zeros(3, dtype=torch.bool),
            torch.tensor(valid[t]),
        )
    assert buffer.return_var.item() == pytest.approx(np.var(samples), rel=1e-4)
    assert buffer.return_abs_max.item() == pytest.approx(np.max(np.abs(samples)), rel=1e-5)
    batch = buffer.sample(4, torch.Generator().manual_seed(0))
    assert batch.return_var is buffer.return_var


def test_the_views_return_statistics_are_those_frozen_with_it():
    buffer = DeviceReplayBuffer(2, 8, {"policy": 1}, 1, "cpu", n_step=1, gamma=0.9)

    def add(reward):
        zeros = {"policy": torch.zeros(2, 1)}
        no = torch.zeros(2, dtype=torch.bool)
        buffer.add(zeros, torch.zeros(2, 1), torch.tensor(reward), zeros, no, no, ~no)

    add([1.0, -3.0])
    buffer.freeze_view()
    frozen = buffer.view_return_statistics()
    assert frozen["return_var"] == buffer.return_var.item() > 0
    assert frozen["return_abs_max"] == 3.0
    add([0.0, -10.0])  # live statistics move; the view's stay until the next freeze
    assert buffer.view_return_statistics() == frozen
    buffer.freeze_view()
    assert buffer.view_return_statistics()["return_abs_max"] == pytest.approx(12.7)


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="n_step"):
        DeviceReplayBuffer(2, 4, {"policy": 1}, 1, "cpu", n_step=0)
    with pytest.raises(ValueError, match="gamma"):
        DeviceReplayBuffer(2, 4, {"policy": 1}, 1, "cpu", gamma=1.5)
    with pytest.raises(ValueError, match="obs_dims"):
        DeviceReplayBuffer(2, 4, {}, 1, "cpu")


def test_a_frozen_view_samples_like_the_live_buffer_and_ignores_later_rows():
    buffer = DeviceReplayBuffer(3, 8, {"policy": 2}, 1, "cpu", n_step=3, gamma=GAMMA)
    _fill(buffer, 5, terminated={(2, 1): True}, invalid={(1, 0)})
    buffer.freeze_view()
    live = buffer.sample(400, torch.Generator().manual_seed(3))
    frozen = buffer.sample(400, torch.Generator().manual_seed(3), from_view=True)
    for name in ("action", "reward", "bootstrap", "discount"):
        assert torch.equal(getattr(live, name), getattr(frozen, name)), name
    assert torch.equal(live.next_obs["policy"], frozen.next_obs["policy"])
    # Rows added after the freeze are invisible to the view: neither drawn nor inside a window.
    before = buffer.sample(400, torch.Generator().manual_seed(4), from_view=True)
    _fill(buffer, 2)  # steps 0 and 1 again: ids 0..201, written at ring rows 5 and 6
    after = buffer.sample(400, torch.Generator().manual_seed(4), from_view=True)
    for name in ("action", "reward", "bootstrap", "discount"):
        assert torch.equal(getattr(before, name), getattr(after, name)), name


def test_a_view_excluding_the_next_rows_never_draws_or_reads_them():
    """The rows the collector overwrites next (ring rows cursor..cursor+k-1) are outside the view."""
    buffer = DeviceReplayBuffer(4, 6, {"policy": 1}, 1, "cpu", n_step=2, gamma=GAMMA)
    _fill(buffer, 9)  # wrapped: the cursor is at ring row 3, rows 3 and 4 hold the oldest steps 3 and 4
    assert int(buffer.cursor) == 3
    buffer.freeze_view(exclude_next_rows=2)
    batch = buffer.sample(3000, torch.Generator().manual_seed(0), from_view=True)
    steps = torch.div(batch.action[:, 0], 100, rounding_mode="floor")
    assert set(steps.long().tolist()) == {5, 6, 7, 8}  # steps 3 and 4 (rows 3, 4) are excluded
    next_steps = torch.div(batch.next_obs["policy"][:, 0], 100, rounding_mode="floor")
    assert next_steps.max().item() <= 8  # windows stop at the newest row, before the excluded ones
    # Overwriting the excluded rows changes nothing the view can return.
    again = buffer.sample(3000, torch.Generator().manual_seed(0), from_view=True)
    _fill(buffer, 2)
    later = buffer.sample(3000, torch.Generator().manual_seed(0), from_view=True)
    assert torch.equal(again.reward, later.reward) and torch.equal(again.action, later.action)
    with pytest.raises(ValueError, match="exclude_next_rows"):
        buffer.freeze_view(exclude_next_rows=6)


def test_planned_bytes_are_what_a_real_buffer_of_those_sizes_holds():
    num_envs, capacity, obs_dims, num_actions = 5, 7, {"policy": 3, "critic": 4}, 2
    planned = DeviceReplayBuffer.planned_bytes(num_envs, capacity, obs_dims, num_actions, n_step=3)
    buffer = DeviceReplayBuffer(num_envs, capacity, obs_dims, num_actions, "cpu", n_step=3)
    assert planned == buffer._tensor_bytes()  # the meta-device shell holds the tensors a real buffer does
    # the rings dominate: 5 * 7 rows of (2 * 7 obs + 2 actions + 1 reward) floats and 3 flags
    assert buffer.memory_bytes() == 5 * 7 * (4 * (2 * 7 + 2 + 1) + 3) < planned
    bigger = DeviceReplayBuffer.planned_bytes(num_envs, 2 * capacity, obs_dims, num_actions, n_step=3)
    assert bigger > planned


def _compiled_against_eager(device: str) -> None:
    """The compiled sample draws the same rows as the eager one from the same generator state: observations,
    actions and bootstrap flags equal, window rewards and discounts to rounding; live flags and a view."""
    import torch._dynamo

    torch._dynamo.reset()
    buffer = DeviceReplayBuffer(3, 10, {"policy": 3, "critic": 5}, 2, device, n_step=3, gamma=GAMMA)
    _fill_on(buffer, 14, terminated={(11, 1): True}, truncated={(12, 0): True}, invalid={(9, 2)})
    buffer.freeze_view(exclude_next_rows=2)
    for from_view in (False, True):
        generator = torch.Generator(device).manual_seed(5)
        eager = buffer.sample(64, generator, from_view=from_view)
        assert buffer.compile_sample()
        generator.manual_seed(5)
        with torch._dynamo.config.patch(error_on_recompile=from_view):  # one trace serves both
            compiled = buffer.sample(64, generator, from_view=from_view)
        assert buffer.sample_diagnostics() == {
            "replay_sample_compiled": True,
            "replay_sample_compile_fallback_reason": "",
        }
        for group in buffer.obs_dims:
            assert torch.equal(compiled.obs[group], eager.obs[group])
            assert torch.equal(compiled.next_obs[group], eager.next_obs[group])
        assert torch.equal(compiled.action, eager.action)
        assert torch.equal(compiled.bootstrap, eager.bootstrap)
        torch.testing.assert_close(compiled.reward, eager.reward, rtol=1e-6, atol=0.0)
        torch.testing.assert_close(compiled.discount, eager.discount, rtol=1e-6, atol=0.0)
        assert compiled.return_var is eager.return_var
        buffer._transitions.uncompile("back to eager for the next pass")
    assert len(set(_ids(eager))) > 10  # many different rows, several windows cut short


def _fill_on(buffer: DeviceReplayBuffer, steps: int, **flags) -> None:
    """`_fill` for a buffer on any device (the rows are built on the CPU and moved)."""
    host = DeviceReplayBuffer(
        buffer.num_envs, buffer.capacity_per_env, buffer.obs_dims, buffer.num_actions, "cpu",
        n_step=buffer.n_step, gamma=buffer.gamma,
    )  # fmt: skip
    _fill(host, steps, **flags)
    for name in ("action", "reward", "terminated", "truncated", "valid", "cursor", "rows_written"):
        getattr(buffer, name).copy_(getattr(host, name))
    for group in buffer.obs_dims:
        buffer.obs[group].copy_(host.obs[group])
        buffer.next_obs[group].copy_(host.next_obs[group])


def test_the_compiled_sample_draws_what_the_eager_sample_draws():
    _compiled_against_eager("cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_compiled_sample_draws_what_the_eager_sample_draws_on_cuda():
    _compiled_against_eager("cuda")
