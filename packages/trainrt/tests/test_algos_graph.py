"""CUDA-graph paths of the learner, the actor and the replay buffer match their eager paths (GPU)."""

import pytest
import torch

from trainrt.algos import FlashSacConfig, SacConfig, make_agent
from trainrt.replay import DeviceReplayBuffer

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

DEVICE = torch.device("cuda")
OBS_DIMS = {"policy": 24, "critic": 31}
NUM_ACTIONS = 7
NUM_ENVS = 256
BATCH = 512
CONFIGS = {
    "sac": lambda **kw: SacConfig(actor_hidden_dim=64, critic_hidden_dim=128, batch_size=BATCH, **kw),
    "flashsac": lambda **kw: FlashSacConfig(
        actor_hidden_dim=32, critic_hidden_dim=64, batch_size=BATCH, **kw
    ),
}


FP32_TOL = dict(rtol=1e-3, atol=1e-4)
"""Float32 learner paths that differ only in the order of float atomics agree within this."""


def _filled(algo: str, **cfg):
    agent = make_agent(algo, CONFIGS[algo](**cfg), OBS_DIMS, NUM_ACTIONS, DEVICE, seed=0)
    buffer = DeviceReplayBuffer(
        NUM_ENVS, 32, OBS_DIMS, NUM_ACTIONS, DEVICE, agent.cfg.n_step, agent.cfg.gamma
    )
    g = torch.Generator(device=DEVICE)
    g.manual_seed(1)
    for _ in range(20):
        obs = {k: torch.randn(NUM_ENVS, d, device=DEVICE, generator=g) for k, d in OBS_DIMS.items()}
        next_obs = {k: torch.randn(NUM_ENVS, d, device=DEVICE, generator=g) for k, d in OBS_DIMS.items()}
        done = torch.rand(NUM_ENVS, device=DEVICE, generator=g) < 0.05
        valid = torch.rand(NUM_ENVS, device=DEVICE, generator=g) < 0.95
        reward = torch.randn(NUM_ENVS, device=DEVICE, generator=g)
        buffer.add(obs, agent.act(obs), reward, next_obs, done, torch.zeros_like(done), valid)
    return agent, buffer


@pytest.mark.parametrize("bf16", [False, True])
@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_graph_replayed_updates_match_eager_updates(algo, bf16):
    agent, buffer = _filled(algo, bf16_autocast=bf16)
    agent.capture_update(lambda generator: buffer.sample(BATCH, generator))
    assert agent.update_graph_enabled, agent.update_fallback_reason
    assert agent.update_fallback_reason == ""
    start = agent.state_dict()
    for _ in range(4):  # covers both graph variants for flashsac (actor every 2nd update)
        agent.replay_update()
    torch.cuda.synchronize()
    graph_params = [
        p.detach().clone() for p in [*agent.actor.parameters(), *agent.critic_target.parameters()]
    ]
    graph_losses = {k: v.clone() for k, v in agent.losses().items()}

    agent.load_state_dict(start)  # in place: the captured graphs stay valid
    agent.update_graph_enabled = False  # same schedule and samples, eager kernels
    for _ in range(4):
        agent.replay_update()
    agent.update_graph_enabled = True
    eager_params = [p.detach() for p in [*agent.actor.parameters(), *agent.critic_target.parameters()]]
    tol = dict(rtol=2e-2, atol=2e-3) if bf16 else FP32_TOL  # scatter-add order differs
    for graph_p, eager_p in zip(graph_params, eager_params):
        torch.testing.assert_close(graph_p, eager_p, **tol)
    for name, value in graph_losses.items():
        torch.testing.assert_close(agent.losses()[name], value, **tol, msg=name)
    agent.replay_update()  # and the graph still replays after the in-place load
    assert torch.isfinite(agent.losses()["critic_loss"])


def _params(agent):
    return [p.detach().clone() for p in [*agent.actor.parameters(), *agent.critic.parameters()]]


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_one_graph_for_all_updates_matches_one_replay_per_update(algo):
    agent, buffer = _filled(algo, bf16_autocast=False)
    agent.capture_update(lambda generator: buffer.sample(BATCH, generator), updates_per_replay=4)
    facts = agent.update_diagnostics()
    assert facts["update_graph_enabled"] and facts["updates_per_graph_replay"] == 4, (
        facts["update_fallback_reason"],
        facts["updates_per_graph_replay"],
    )
    start = agent.state_dict()
    agent.replay_updates(4)  # one launch
    torch.cuda.synchronize()
    assert agent.update_diagnostics()["update_multi_graph_replays"] == 1
    multi, multi_losses = _params(agent), {k: v.clone() for k, v in agent.losses().items()}
    agent.load_state_dict(start)
    for _ in range(4):
        agent.replay_updates(1)  # the single-update graphs, same schedule and samples
    torch.cuda.synchronize()
    # Only the order of float atomics (scatter-adds) differs. AdamW divides by the root of the second moment,
    # so an element with a near-zero gradient turns a rounding difference into a step-sized one; a missed or
    # misordered update moves every element by about the learning rate (3e-4), far past atol.
    for a, b in zip(multi, _params(agent)):
        torch.testing.assert_close(a, b, **FP32_TOL)
    for name, value in multi_losses.items():
        torch.testing.assert_close(agent.losses()[name], value, **FP32_TOL, msg=name)


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_a_learner_captured_on_part_of_the_gpu_makes_the_same_updates(algo):
    from trainrt.runner.learner_partition import LearnerPartition

    total = torch.cuda.get_device_properties(DEVICE).multi_processor_count
    partition = LearnerPartition(total // 2, DEVICE, overlap=True)
    assert partition.stream is not None, partition.fallback_reason
    runs = []
    for stream in (None, partition.stream):
        agent, buffer = _filled(algo, bf16_autocast=False)
        agent.capture_update(
            lambda generator, buffer=buffer: buffer.sample(BATCH, generator),
            updates_per_replay=4,
            capture_stream=stream,
        )
        assert agent.update_diagnostics()["updates_per_graph_replay"] == 4, agent.update_fallback_reason
        with torch.cuda.stream(stream or torch.cuda.current_stream(DEVICE)):
            agent.replay_updates(4)
        torch.cuda.synchronize()
        runs.append(_params(agent))
    for whole, held in zip(*runs):
        torch.testing.assert_close(held, whole, **FP32_TOL)  # scatter-add order may differ
    with pytest.raises(ValueError, match=f"below this GPU's {total} multiprocessors"):
        LearnerPartition(total, DEVICE, overlap=True)
    alone = LearnerPartition(
        total // 2, DEVICE, overlap=False
    )  # not overlapped: nothing to share the GPU with
    assert alone.stream is None and "training.overlap is off" in alone.fallback_reason


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_compiled_learner_graph_matches_the_eager_update(algo):
    agent, buffer = _filled(algo, bf16_autocast=False)
    agent.capture_update(
        lambda generator: buffer.sample(BATCH, generator), updates_per_replay=2, compile=True
    )
    facts = agent.update_diagnostics()
    assert facts["compile_enabled"] and facts["compile_fallback_reason"] == "", facts[
        "compile_fallback_reason"
    ]
    assert facts["update_graph_enabled"], facts["update_fallback_reason"]
    start = agent.state_dict()
    agent.replay_updates(2)
    torch.cuda.synchronize()
    fused = _params(agent)
    agent.load_state_dict(start)
    agent._uncompile_parts("the eager reference")  # plain parts, eager kernels, same schedule
    agent.update_graph_enabled = False
    agent.replay_updates(2)
    # fused kernels reorder float sums: one iteration from the same state agrees to rounding
    for a, b in zip(fused, _params(agent)):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=2e-4)


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_scheduled_learning_rate_follows_the_host_formula_inside_the_graph(algo):
    agent, buffer = _filled(algo, lr_schedule="warmup_cosine", lr_warmup_updates=3, lr_final_ratio=0.5)
    agent.set_lr_horizon(12)
    agent.capture_update(lambda generator: buffer.sample(BATCH, generator), updates_per_replay=2)
    schedule = agent._lr_schedule
    for _ in range(4):
        step = int(agent._schedule_step.item())
        agent.replay_updates(2)
        lr = agent.actor_optimizer.param_groups[0]["lr"]  # set by the last update of the replay
        assert lr.item() == pytest.approx(agent.cfg.actor_lr * schedule.factor(step + 1), rel=1e-5)


@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_act_captures_in_a_graph_with_the_agent_generator(algo):
    agent, _ = _filled(algo)
    obs = {k: torch.randn(NUM_ENVS, d, device=DEVICE) for k, d in OBS_DIMS.items()}
    agent.act(obs)  # eager warm-up allocates flashsac's held-noise buffers
    state = agent.state_dict()
    eager = [agent.act(obs).clone() for _ in range(5)]
    agent.load_state_dict(state)
    graph = torch.cuda.CUDAGraph()
    graph.register_generator_state(agent.rng)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        agent.act(obs)  # warm-up inside the stream (consumes one step of the stream)
    torch.cuda.current_stream().wait_stream(side)
    agent.load_state_dict(state)
    with torch.cuda.graph(graph):
        actions = agent.act(obs)
    replayed = []
    for _ in range(5):
        graph.replay()
        replayed.append(actions.clone())
    for a, b in zip(eager, replayed):
        torch.testing.assert_close(a, b)


def test_replay_add_and_sample_capture_in_a_graph():
    eager = DeviceReplayBuffer(64, 8, OBS_DIMS, NUM_ACTIONS, DEVICE, n_step=3, gamma=0.9)
    captured = DeviceReplayBuffer(64, 8, OBS_DIMS, NUM_ACTIONS, DEVICE, n_step=3, gamma=0.9)
    static = {
        "obs": {k: torch.zeros(64, d, device=DEVICE) for k, d in OBS_DIMS.items()},
        "next_obs": {k: torch.zeros(64, d, device=DEVICE) for k, d in OBS_DIMS.items()},
        "action": torch.zeros(64, NUM_ACTIONS, device=DEVICE),
        "reward": torch.zeros(64, device=DEVICE),
        "terminated": torch.zeros(64, dtype=torch.bool, device=DEVICE),
        "truncated": torch.zeros(64, dtype=torch.bool, device=DEVICE),
        "valid": torch.ones(64, dtype=torch.bool, device=DEVICE),
    }
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # capture needs a side-stream warm-up; undo its write afterwards
        captured.add(**static)
    torch.cuda.current_stream().wait_stream(side)
    captured.cursor.zero_()
    captured.rows_written.zero_()
    captured.valid.zero_()
    captured.running_return.zero_()
    captured.return_count.zero_()
    captured.return_var.fill_(1.0)
    captured.return_mean.zero_()
    with torch.cuda.graph(graph):
        captured.add(**static)
    g = torch.Generator(device=DEVICE)
    g.manual_seed(0)
    for step in range(11):  # wraps the 8-row ring
        for group in OBS_DIMS:
            static["obs"][group].normal_(generator=g)
            static["next_obs"][group].normal_(generator=g)
        static["action"].uniform_(-1, 1, generator=g)
        static["reward"].normal_(generator=g)
        static["terminated"].copy_(torch.rand(64, device=DEVICE, generator=g) < 0.1)
        static["truncated"].copy_(torch.rand(64, device=DEVICE, generator=g) < 0.1)
        static["valid"].copy_(torch.rand(64, device=DEVICE, generator=g) < 0.9)
        eager.add(**static)
        graph.replay()
        assert captured.cursor.item() == eager.cursor.item() == (step + 1) % 8
    for name in ("action", "reward", "terminated", "truncated", "valid"):
        assert torch.equal(getattr(captured, name), getattr(eager, name)), name
    torch.testing.assert_close(captured.return_var, eager.return_var)
    ga, gb = torch.Generator(device=DEVICE), torch.Generator(device=DEVICE)
    ga.manual_seed(5)
    gb.manual_seed(5)
    a, b = eager.sample(1000, ga), captured.sample(1000, gb)
    assert torch.equal(a.reward, b.reward) and torch.equal(a.next_obs["critic"], b.next_obs["critic"])


def test_flashsac_bf16_weight_copies_stay_in_step_inside_the_compiled_learner_graph():
    """As shipped (`FlashSacConfig.bf16_weight_copies`, docs/perf/tuning/0029) the networks hold bf16 copies of their unit-norm
    weights. Replayed inside the compiled learner graph, with the projections and optimizer steps fused
    horizontally (docs/perf/tuning/0033), every projection and the target's EMA rewrite them: after the replays (and
    publishing) each copy is exactly its weight in bf16, in the actor, critic, target and acting actor."""
    from test_algos_flashsac import _copies_in_step

    from trainrt.algos import FlashSacConfig, flashsac_config

    assert FlashSacConfig().bf16_weight_copies
    assert FlashSacConfig().horizontal_fusion_parts == flashsac_config.HORIZONTAL_FUSION_PARTS
    agent, buffer = _filled("flashsac", bf16_autocast=True)
    assert agent.keeps_bf16_weight_copies
    agent.capture_update(
        lambda generator: buffer.sample(BATCH, generator), updates_per_replay=2, compile=True
    )
    facts = agent.update_diagnostics()
    assert facts["compile_fallback_reason"] == "" and facts["update_graph_enabled"], (
        facts["compile_fallback_reason"],
        facts["update_fallback_reason"],
    )
    before = [p.detach().clone() for p in agent.critic_target.parameters()]
    agent.replay_updates(2)
    torch.cuda.synchronize()
    assert any(not torch.equal(a, b) for a, b in zip(before, agent.critic_target.parameters()))
    assert _copies_in_step(agent) == 22  # the trunks' 5 layers in all four networks, the two critics' heads
    assert torch.isfinite(agent.losses()["critic_loss"])
