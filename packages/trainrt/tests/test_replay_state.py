"""DeviceReplayBuffer checkpoint state: return statistics always, the rings on request, in place."""

import torch
from test_replay import _fill, _make

from trainrt.replay import DeviceReplayBuffer

STATISTICS = ("return_mean", "return_var", "return_count", "return_abs_max", "running_return")


def test_statistics_round_trip_without_the_rings():
    source = _make()
    _fill(source, 7, terminated={(3, 1): True})
    state = source.state_dict()
    assert "rings" not in state
    target = _make()
    identities = {name: getattr(target, name).data_ptr() for name in STATISTICS}
    assert target.load_state_dict(state) == []
    for name in STATISTICS:
        assert torch.equal(getattr(target, name), getattr(source, name)), name
        assert getattr(target, name).data_ptr() == identities[name], f"{name} was replaced, not copied into"
    assert target.num_rows() == 0  # the rings were not saved: the replay refills


def test_rings_round_trip_and_sample_the_same_batch():
    source = _make(capacity=6)
    _fill(source, 9, truncated={(4, 0): True}, invalid={(5, 1)})  # wrapped around once
    target = _make(capacity=6)
    assert target.load_state_dict(source.state_dict(include_rings=True)) == []
    assert target.num_rows() == source.num_rows() and target.num_valid() == source.num_valid()
    assert torch.equal(target.cursor, source.cursor)
    a = source.sample(16, torch.Generator().manual_seed(1))
    b = target.sample(16, torch.Generator().manual_seed(1))
    for name in ("reward", "bootstrap", "discount", "action"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert torch.equal(a.obs["critic"], b.obs["critic"])


def test_a_buffer_of_another_shape_keeps_what_fits_and_says_what_refills():
    source = _make(num_envs=2)
    _fill(source, 4)
    other = DeviceReplayBuffer(3, 10, {"policy": 3, "critic": 5}, 2, "cpu", n_step=3, gamma=0.5)
    notes = other.load_state_dict(source.state_dict(include_rings=True))
    assert any("running_return" in note and "starts fresh" in note for note in notes), notes
    assert any("the replay refills" in note for note in notes), notes
    assert torch.equal(other.return_count, source.return_count)  # the scalar statistics still carry over
    assert other.num_rows() == 0
