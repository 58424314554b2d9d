"""The pre-flight memory estimate: close to what a tiny run allocates, and a refusal naming the setting to lower."""

from __future__ import annotations

import mujoco
import pytest
import torch
from tiny_runs import TINY_RUN

import trainrt.runner.preflight as preflight
from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.replay import DeviceReplayBuffer
from trainrt.runner.build import build_agent, build_env, build_replay
from trainrt.runner.collector import Collector
from trainrt.runner.preflight import (
    MemoryDoesNotFit,
    check_memory_fits,
    estimate_memory,
    format_bytes,
    network_layers,
    network_parameters,
    probe_env_facts,
    replay_bytes,
    sim_world_bytes,
)

pytestmark = pytest.mark.usefixtures("one_thread")

GIB = 2**30
NETWORKS = {
    "sac": ["algo.params.actor_hidden_dim=16", "algo.params.critic_hidden_dim=32"],
    "flashsac": ["algo.params.actor_hidden_dim=16", "algo.params.critic_hidden_dim=32"],
}


def _tiny(algo: str = "sac", task: str = "g1_walk_flat", *extra: str):
    overrides = [*TINY_RUN, *NETWORKS[algo], *extra]  # extra's keys win over the tiny run's
    return apply_overrides(cpu_demo_preset(algo, task, "mujoco"), overrides, warn=lambda line: None)


def _allocated_bytes(tensors) -> int:
    """Bytes of the distinct storages behind ``tensors``."""
    storages = {
        t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors if t is not None
    }
    return sum(storages.values())


def _network_tensors(agent) -> list[torch.Tensor]:
    """Every parameter and buffer of the agent's networks, their gradients and the optimizers' state."""
    modules = (agent.actor, agent.critic, agent.critic_target)
    tensors = [t for m in modules for t in (*m.parameters(), *m.buffers())]
    tensors += [p.grad for m in modules for p in m.parameters()]
    for optimizer in (agent.actor_optimizer, agent.critic_optimizer):
        tensors += [v for state in optimizer.state.values() for v in state.values() if torch.is_tensor(v)]
    return tensors


@pytest.mark.parametrize(("algo", "task"), [("sac", "g1_walk_flat"), ("flashsac", "g1_motion_tracking")])
def test_a_tiny_runs_estimate_is_within_three_times_what_it_allocates(algo, task):
    cfg = _tiny(algo, task)
    facts = probe_env_facts(cfg)
    estimate = estimate_memory(cfg, facts, num_envs=cfg.algo.num_envs)
    env = build_env(cfg)
    try:
        assert facts.obs_dims == env.obs_dims and facts.num_actions == env.num_actions
        agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
        replay = build_replay(cfg, env)
        Collector(env, agent, replay, env.reset(), use_graph=False).prefill(cfg.algo.params.learning_starts)
        agent.update(replay.sample(cfg.algo.params.batch_size, agent.update_rng))  # gradients, AdamW moments
        assert estimate.replay == replay._tensor_bytes()  # exact: the buffer's own tensors
        assert replay.memory_bytes() <= estimate.replay <= 3 * replay.memory_bytes()
        networks = _allocated_bytes(_network_tensors(agent))
        assert networks / 3 <= estimate.networks <= 3 * networks, (estimate.networks, networks)
    finally:
        env.close()


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
@pytest.mark.parametrize("width", [8, 64, 200])
def test_the_network_layout_counts_the_agents_parameters(algo, width):
    cfg = apply_overrides(
        cpu_demo_preset(algo, "g1_walk_flat", "mujoco"),
        [f"algo.params.actor_hidden_dim={width}", f"algo.params.critic_hidden_dim={2 * width}"],
    )
    obs_dims, num_actions = {"policy": 98, "critic": 106}, 29
    agent = build_agent(cfg, obs_dims, num_actions, "cpu")
    networks = network_layers(cfg, obs_dims, num_actions)
    for name, module in (("actor", agent.actor), ("critic", agent.critic)):
        actual = sum(p.numel() for p in module.parameters())
        assert network_parameters(*networks[name]) == pytest.approx(actual, rel=0.1), name


def test_the_replay_size_is_exact_for_small_sizes_and_adds_up_beyond_int64():
    obs_dims, num_actions = {"policy": 5, "critic": 7}, 3
    for envs, rows, n_step in ((1, 1, 1), (3, 5, 1), (4, 9, 3)):
        expected = DeviceReplayBuffer.planned_bytes(envs, rows, obs_dims, num_actions, n_step=n_step)
        assert replay_bytes(envs, rows, obs_dims, num_actions) == expected
    huge = replay_bytes(10**30, 10**9, obs_dims, num_actions)
    assert huge > 10**39 and isinstance(huge, int)


def test_a_worlds_size_follows_mujoco_warps_own_buffers():
    wp = pytest.importorskip("warp")
    mjw = pytest.importorskip("mujoco_warp")
    from simcore._src.config import default_nconmax, default_njmax

    env = build_env(_tiny(), num_envs=1)  # the G1 of both tasks
    try:
        mj_model = env.backend.mj_model
    finally:
        env.close()
    nconmax = default_nconmax(mj_model)
    for njmax in (default_njmax(mj_model, nconmax), 2 * default_njmax(mj_model, nconmax)):
        with wp.ScopedDevice("cpu"):
            sizes = [
                _warp_bytes(
                    mjw.put_data(mj_model, mujoco.MjData(mj_model), nworld=n, nconmax=nconmax, njmax=njmax)
                )
                for n in (1, 3)
            ]
        per_world = (sizes[1] - sizes[0]) / 2
        assert sim_world_bytes(mj_model, nconmax, njmax, "mjwarp") == pytest.approx(per_world, rel=0.1)


def _warp_bytes(data, depth: int = 0) -> int:
    """Bytes of every warp array of a MuJoCo Warp struct (nested structs too)."""
    import dataclasses

    import warp as wp

    total = 0
    for field in dataclasses.fields(data):
        value = getattr(data, field.name)
        if isinstance(value, wp.array):
            total += value.size * wp.types.type_size_in_bytes(value.dtype)
        elif dataclasses.is_dataclass(value) and depth < 3:
            total += _warp_bytes(value, depth + 1)
    return total


@pytest.fixture
def sixteen_gib_free(monkeypatch):
    """Every device has 16 GiB free, whatever this machine has."""
    monkeypatch.setattr(preflight, "free_device_bytes", lambda device: 16 * GIB)


@pytest.mark.parametrize(
    ("override", "setting"),
    [
        ("algo.num_envs=1000000000", "algo.num_envs"),
        ("algo.num_envs=" + "9" * 40, "algo.num_envs"),  # beyond int64: still the message, no OverflowError
        ("algo.params.batch_size=1000000000000", "algo.params.batch_size"),
        ("algo.params.critic_hidden_dim=100000", "algo.params.critic_hidden_dim"),
        ("algo.params.buffer_size_per_env=100000000", "algo.params.buffer_size_per_env"),
    ],
)
def test_a_config_too_big_for_the_device_is_refused_naming_the_setting_to_lower(
    sixteen_gib_free, override, setting
):
    cfg = _tiny("sac", "g1_walk_flat", override)
    with pytest.raises(MemoryDoesNotFit) as refused:
        check_memory_fits(cfg)
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(override) and message.endswith(
        f"the host has 16 GiB available: lower {setting}"
    )
    assert isinstance(refused.value, ValueError)  # a usage error: exit 2 at the command line


def test_a_config_that_fits_passes_with_its_estimate(sixteen_gib_free):
    estimate = check_memory_fits(_tiny())
    assert estimate is not None and 0 < estimate.total < 16 * GIB
    consumers = estimate.consumers()
    assert list(consumers.values()) == sorted(consumers.values(), reverse=True)


def test_a_replay_that_alone_does_not_fit_names_both_of_its_sizes(monkeypatch):
    cfg = _tiny("sac", "g1_walk_flat", "algo.num_envs=64", "algo.params.buffer_size_per_env=100000")
    facts = probe_env_facts(cfg)
    estimate = estimate_memory(cfg, facts, num_envs=64)
    free = (
        estimate.total - estimate.replay // 2
    )  # half the replay: fewer envs or fewer rows per env would fit
    monkeypatch.setattr(preflight, "free_device_bytes", lambda device: free)
    with pytest.raises(MemoryDoesNotFit, match="most for the replay") as refused:
        check_memory_fits(cfg)
    assert str(refused.value).endswith("lower algo.params.buffer_size_per_env or algo.num_envs")


def test_a_rollout_counts_no_replay_or_update_and_names_the_option(monkeypatch, sixteen_gib_free):
    cfg = _tiny()
    facts = probe_env_facts(cfg)
    rollout = estimate_memory(cfg, facts, num_envs=16, training=False)
    assert rollout.replay == 0 and rollout.update_batch == 0 and rollout.env_state > 0
    with pytest.raises(MemoryDoesNotFit) as refused:
        check_memory_fits(
            cfg,
            num_envs=10**9,
            training=False,
            env_setting=("--num-envs", "--num-envs 1000000000"),
        )
    assert str(refused.value).startswith("--num-envs 1000000000 needs ~")
    assert str(refused.value).endswith("lower --num-envs")


def test_unknown_free_memory_or_an_env_that_cannot_be_built_skips_the_check(monkeypatch):
    monkeypatch.setattr(preflight, "free_device_bytes", lambda device: None)
    assert check_memory_fits(_tiny("sac", "g1_walk_flat", "algo.num_envs=1000000000")) is None
    monkeypatch.setattr(preflight, "free_device_bytes", lambda device: 16 * GIB)

    def unbuildable(*args, **kwargs):
        raise ValueError("a damaged motion clip")

    monkeypatch.setattr(preflight, "build_env", unbuildable)
    assert check_memory_fits(_tiny()) is None  # the run's own probe names the problem, with its setting


def test_byte_counts_read_in_binary_units_at_any_size():
    assert format_bytes(0) == "0 B"
    assert format_bytes(1023) == "1023 B"
    assert format_bytes(1536) == "1.5 KiB"
    assert format_bytes(16 * GIB) == "16 GiB"
    assert format_bytes(int(4.1 * 2**40)) == "4.1 TiB"
    assert format_bytes(1000 * 2**20) == "1000 MiB"  # not 1e+03
    assert format_bytes(10**40).endswith(" YiB")
    assert format_bytes(10**5000).startswith("2^")


def test_a_run_too_big_for_the_device_is_refused_before_its_directory_exists(tmp_path, sixteen_gib_free):
    from trainrt.runner import OffPolicyRunner

    run_dir = tmp_path / "run"
    cfg = _tiny("sac", "g1_walk_flat", "algo.num_envs=1000000000", f"training.run_dir={run_dir}")
    with pytest.raises(MemoryDoesNotFit, match=r"lower algo\.num_envs$"):
        OffPolicyRunner(cfg, log=lambda line: None)
    assert not run_dir.exists()


def test_any_number_of_residual_blocks_adds_up_without_listing_them(sixteen_gib_free):
    cfg = _tiny("flashsac", "g1_walk_flat", "algo.params.critic_num_blocks=1000000000000")
    with pytest.raises(MemoryDoesNotFit) as refused:
        check_memory_fits(cfg)
    assert str(refused.value).startswith("algo.params.critic_num_blocks=1000000000000 needs ~")
    assert str(refused.value).endswith("lower algo.params.critic_num_blocks")


def test_contact_buffers_too_big_for_the_device_name_the_sim_setting(sixteen_gib_free):
    cfg = _tiny("sac", "g1_walk_flat", "sim.njmax=1000000000")
    with pytest.raises(MemoryDoesNotFit) as refused:
        check_memory_fits(cfg)
    assert str(refused.value).startswith("sim.njmax=1000000000 needs ~")
    assert "most for the env state" in str(refused.value)
    assert str(refused.value).endswith("lower sim.njmax")


def test_the_summarys_memory_record_holds_the_estimate_by_consumer(sixteen_gib_free):
    cfg = _tiny()
    estimate = check_memory_fits(cfg)
    record = preflight.memory_record(estimate, "cpu")
    assert record["estimate_total_bytes"] == estimate.total
    assert sum(record["estimate_bytes"].values()) == estimate.total
    assert record["estimate_bytes"]["replay"] == estimate.replay
    assert record["estimate_bytes"]["update_batch"] == estimate.update_batch
    assert record["device_used_bytes"] is None and record["torch_peak_reserved_bytes"] is None  # CPU
    assert preflight.memory_record(None, "cpu") is None


@pytest.mark.gpu
def test_on_cuda_the_memory_record_reads_what_the_device_holds():
    if not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    held = torch.empty(64 * 2**20, dtype=torch.uint8, device="cuda")
    record = preflight.memory_record(preflight.MemoryEstimate(1, 2, 3, 4, 5, 6), "cuda")
    assert record["estimate_total_bytes"] == 21
    assert record["torch_peak_reserved_bytes"] >= held.numel()
    assert record["device_used_bytes"] >= record["torch_peak_reserved_bytes"]
