"""Agent contract shared by both algorithms: construction, acting, export, checkpoints, learner lifecycle."""

import pytest
import torch
from pydantic import ValidationError

from trainrt.algos import Agent, FlashSacConfig, SacConfig, make_agent
from trainrt.replay import DeviceReplayBuffer

OBS_DIMS = {"policy": 5, "critic": 7}
NUM_ACTIONS = 2
NUM_ENVS = 8
SMALL = {
    "sac": lambda **kw: SacConfig(
        actor_hidden_dim=16, critic_hidden_dim=32, num_atoms=11, batch_size=32, **kw
    ),
    "flashsac": lambda **kw: FlashSacConfig(
        actor_hidden_dim=8,
        critic_hidden_dim=16,
        actor_num_blocks=1,
        critic_num_blocks=1,
        num_atoms=11,
        batch_size=32,
        **kw,
    ),
}
ALGOS = sorted(SMALL)
UNCOMPILED_BUT_LOSSES_AND_ACTOR_STEP = (
    "_advance_lr_schedule",
    "_normalize",
    "_critic_target",
    "_critic_loss",
    "_actor_loss",
    "_critic_step",
)
"""SAC's parts but ``_record_losses`` and ``_actor_step``: the config that compiles those two alone."""


def _part_names(parts: type) -> list[str]:
    """Every part name of an algorithm's `UpdateParts` class, in order."""
    import dataclasses

    return [f"_{field.name}" for field in dataclasses.fields(parts)]


pytestmark = pytest.mark.usefixtures("one_thread")


def _obs(seed: int, num_envs: int = NUM_ENVS) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {k: torch.randn(num_envs, d, generator=g) for k, d in OBS_DIMS.items()}


def _agent_with_data(algo: str, seed: int = 0, **cfg) -> tuple[Agent, DeviceReplayBuffer]:
    agent = make_agent(algo, SMALL[algo](**cfg), OBS_DIMS, NUM_ACTIONS, "cpu", seed=seed)
    buffer = DeviceReplayBuffer(
        NUM_ENVS, 16, OBS_DIMS, NUM_ACTIONS, "cpu", n_step=agent.cfg.n_step, gamma=0.9
    )
    obs = _obs(100)
    for t in range(12):
        action = agent.act(obs)
        next_obs = _obs(200 + t)
        done = torch.arange(NUM_ENVS) == t % NUM_ENVS
        buffer.add(
            obs,
            action,
            torch.randn(NUM_ENVS),
            next_obs,
            done,
            ~done & (t % 3 == 0),
            torch.ones(NUM_ENVS, dtype=bool),
        )
        obs = next_obs
    return agent, buffer


@pytest.mark.parametrize("algo", ALGOS)
def test_act_is_bounded_and_deterministic_act_is_the_export(algo):
    agent, _ = _agent_with_data(algo)
    obs = _obs(1)
    actions = agent.act(obs)
    assert actions.shape == (NUM_ENVS, NUM_ACTIONS) and actions.abs().max() <= 1.0
    exported = agent.actor_for_export()
    torch.testing.assert_close(exported(obs["policy"]), agent.act(obs, deterministic=True))
    assert not any(p.requires_grad for p in exported.parameters())


@pytest.mark.parametrize("algo", ALGOS)
def test_export_carries_the_normalizer(algo):
    agent, buffer = _agent_with_data(algo, obs_normalization=True)
    agent.update(buffer.sample(32, agent.update_rng))
    assert agent.actor_obs_normalizer.count.item() == 32
    obs = _obs(2)
    exported = agent.actor_for_export()
    agent.actor_obs_normalizer.mean.add_(10.0)  # the export is a snapshot, not a view
    agent.publish_policy()
    assert not torch.allclose(exported(obs["policy"]), agent.act(obs, deterministic=True))
    agent.actor_obs_normalizer.mean.sub_(10.0)
    agent.publish_policy()
    torch.testing.assert_close(exported(obs["policy"]), agent.act(obs, deterministic=True))


@pytest.mark.parametrize("algo", ALGOS)
def test_state_dict_round_trip_reproduces_actions_and_updates(algo):
    agent, buffer = _agent_with_data(algo, seed=0)
    for _ in range(3):
        agent.update(buffer.sample(32, agent.update_rng))
    agent.act(_obs(3))  # advance the exploration state (held noise for flashsac)
    state = agent.state_dict()
    restored, _ = _agent_with_data(algo, seed=99)
    restored.load_state_dict(state)

    obs = _obs(4)
    torch.testing.assert_close(restored.act(obs, deterministic=True), agent.act(obs, deterministic=True))
    for _ in range(3):  # the stochastic stream continues identically (rng + held noise restored)
        torch.testing.assert_close(restored.act(obs), agent.act(obs))
    batch_a = buffer.sample(32, agent.update_rng)
    batch_b = buffer.sample(32, restored.update_rng)
    torch.testing.assert_close(batch_a.action, batch_b.action)
    agent.update(batch_a)
    restored.update(batch_b)
    torch.testing.assert_close(restored.losses()["critic_loss"], agent.losses()["critic_loss"])
    for mine, theirs in zip(agent.critic_target.parameters(), restored.critic_target.parameters()):
        torch.testing.assert_close(theirs, mine)
    assert restored.num_updates == agent.num_updates


@pytest.mark.parametrize("algo", ALGOS)
def test_loading_keeps_tensor_identity(algo):
    agent, buffer = _agent_with_data(algo)
    agent.update(buffer.sample(32, agent.update_rng))
    param = next(agent.critic.parameters())
    exp_avg = agent.critic_optimizer.state[param]["exp_avg"]
    agent.load_state_dict(agent.state_dict())
    assert next(agent.critic.parameters()) is param
    assert agent.critic_optimizer.state[param]["exp_avg"] is exp_avg  # a captured graph would still see it


@pytest.mark.parametrize("algo", ALGOS)
def test_an_acting_only_agent_acts_as_the_learner_it_loaded_and_refuses_to_learn(algo):
    agent, buffer = _agent_with_data(algo, seed=0)
    for _ in range(3):
        agent.update(buffer.sample(32, agent.update_rng))
    agent.act(_obs(3))
    actor = make_agent(algo, SMALL[algo](), OBS_DIMS, NUM_ACTIONS, "cpu", seed=99, learns=False)
    assert not actor.learns
    assert not any(isinstance(v, torch.optim.Optimizer) for v in vars(actor).values())
    actor.load_state_dict(agent.state_dict())

    obs = _obs(4)
    torch.testing.assert_close(actor.act(obs, deterministic=True), agent.act(obs, deterministic=True))
    for _ in range(2):  # the exploration stream continues as the learner's (generator and held noise loaded)
        torch.testing.assert_close(actor.act(obs), agent.act(obs))
    torch.testing.assert_close(actor.actor_for_export()(obs["policy"]), agent.act(obs, deterministic=True))
    assert actor.rng_state()["rng"].equal(agent.rng_state()["rng"])
    for refused, call in (
        ("cannot update", lambda: actor.update(buffer.sample(32, actor.update_rng))),
        ("cannot capture updates", lambda: actor.capture_update(lambda g: buffer.sample(32, g))),
        ("cannot save a resumable state", actor.state_dict),
    ):
        with pytest.raises(RuntimeError, match=f"{refused}: this agent was built to act only.*learns=True"):
            call()


def test_building_an_acting_only_agent_does_not_import_the_compiler():
    """Evaluation, play and export build agents that only act; torch's compiler (pulled in by building an
    optimizer) costs seconds per process to import, so they must not."""
    import subprocess
    import sys

    code = (
        "import sys, trainrt.algos as a\n"
        f"a.make_agent('sac', None, {OBS_DIMS!r}, {NUM_ACTIONS}, 'cpu', learns=False)\n"
        "acting_only = 'torch._dynamo' in sys.modules\n"
        f"a.make_agent('sac', None, {OBS_DIMS!r}, {NUM_ACTIONS}, 'cpu')\n"
        "print(acting_only, 'torch._dynamo' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # not imported for the acting-only agent; imported by the learner's optimizers (so the check can fail)
    assert out.stdout.split() == ["False", "True"]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the TorchScript exporter needs no onnxscript
@pytest.mark.parametrize("algo", ALGOS)
def test_exported_actor_runs_in_onnxruntime(algo, tmp_path):
    onnxruntime = pytest.importorskip("onnxruntime")
    agent, buffer = _agent_with_data(algo, obs_normalization=True)
    for _ in range(2):
        agent.update(buffer.sample(32, agent.update_rng))
    import onnx

    from trainrt.runner.export import export_policy_onnx

    policy = agent.actor_for_export()
    obs = _obs(5)["policy"]
    path = tmp_path / "policy.onnx"
    export_policy_onnx(policy, obs.shape[1], path)
    session = onnxruntime.InferenceSession(str(path))
    (actions,) = session.run(None, {"obs": obs.numpy()})
    torch.testing.assert_close(torch.from_numpy(actions), policy(obs), rtol=1e-5, atol=1e-6)
    graph = onnx.load(path).graph  # fixed widths, for deploy tools that want static shapes
    for value_info, width in ((graph.input[0], obs.shape[1]), (graph.output[0], actions.shape[1])):
        assert [d.dim_param or d.dim_value for d in value_info.type.tensor_type.shape.dim] == ["batch", width]


def test_checkpoints_are_not_interchangeable_between_algorithms():
    sac, _ = _agent_with_data("sac")
    flash, _ = _agent_with_data("flashsac")
    with pytest.raises(ValueError, match="flashsac"):
        sac.load_state_dict(flash.state_dict())


@pytest.mark.parametrize("algo", ALGOS)
def test_learner_lifecycle_on_cpu_is_eager_with_a_reason(algo):
    agent, buffer = _agent_with_data(algo)
    with pytest.raises(RuntimeError, match="capture_update"):
        agent.replay_update()
    assert not agent.update_graph_capturable
    agent.capture_update(lambda generator: buffer.sample(32, generator))
    assert not agent.update_graph_enabled and agent.update_fallback_reason == "cpu device"
    before = agent.losses()["critic_loss"].clone()
    agent.replay_update()
    assert agent.num_updates == 1
    losses = agent.losses()
    assert losses["critic_loss"].item() != before.item()
    assert all(isinstance(v, torch.Tensor) and v.dim() == 0 for v in losses.values())
    assert agent.update_diagnostics()["update_graph_enabled"] is False


def test_make_agent_validates_its_arguments():
    with pytest.raises(ValueError, match="valid"):
        make_agent("ppo", None, OBS_DIMS, NUM_ACTIONS, "cpu")
    with pytest.raises(ValueError, match="FlashSacConfig"):
        make_agent("flashsac", SacConfig(), OBS_DIMS, NUM_ACTIONS, "cpu")
    with pytest.raises(ValueError, match="critic_obs_group"):
        make_agent("sac", SacConfig(critic_obs_group="privileged"), OBS_DIMS, NUM_ACTIONS, "cpu")
    with pytest.raises(ValidationError):
        SacConfig(batchsize=10)  # extra="forbid": a typo is an error
    with pytest.raises(ValidationError):
        FlashSacConfig(v_min=1.0, v_max=-1.0)
    agent = make_agent("sac", None, OBS_DIMS, NUM_ACTIONS, "cpu")
    assert agent.cfg == SacConfig()


def test_symmetric_observation_groups_share_one_normalizer():
    cfg = SMALL["sac"](critic_obs_group="policy")
    agent = make_agent("sac", cfg, OBS_DIMS, NUM_ACTIONS, "cpu")
    assert agent.critic_obs_normalizer is agent.actor_obs_normalizer


@pytest.mark.parametrize("algo", ALGOS)
def test_same_seed_same_agent(algo):
    a = make_agent(algo, SMALL[algo](), OBS_DIMS, NUM_ACTIONS, "cpu", seed=5)
    b = make_agent(algo, SMALL[algo](), OBS_DIMS, NUM_ACTIONS, "cpu", seed=5)
    c = make_agent(algo, SMALL[algo](), OBS_DIMS, NUM_ACTIONS, "cpu", seed=6)
    obs = _obs(7)
    torch.testing.assert_close(a.act(obs), b.act(obs))
    flat = [torch.cat([p.flatten() for p in agent.critic.parameters()]) for agent in (a, b, c)]
    assert torch.equal(flat[0], flat[1]) and not torch.equal(flat[0], flat[2])


# Fingerprints of seed-3 agents of the SMALL configs, recorded from the constructors before their shared
# parts moved into the base class: (sum, position-weighted sum) of each network's state in float64.
# Any change to the order or number of random draws during construction moves them by far more than the
# tolerance below; FlashSAC's orthogonal initialization goes through the CPU's LAPACK, whose float32 QR
# rounds differently on different processors (a few parts in 1e9 of these sums), so the match is not exact.
SEED3_FINGERPRINTS = {
    "sac": {
        "actor": (26.279869969468564, 1545.5171513915993),
        "critic": (113.92337621178012, 6675.745273743902),
    },
    "flashsac": {
        "actor": (110.16720426046959, 4372.917468314161),
        "critic": (384.1639030160859, 18379.86253086),
    },
}


def _fingerprint(module: torch.nn.Module) -> tuple[float, float]:
    flat = torch.cat([t.detach().double().flatten() for t in module.state_dict().values()])
    weight = torch.arange(flat.numel(), dtype=torch.float64) % 97 + 1
    return flat.sum().item(), (flat * weight).sum().item()


@pytest.mark.parametrize("algo", ALGOS)
def test_seeded_parameters_match_the_recorded_fingerprint(algo):
    agent = make_agent(algo, SMALL[algo](), OBS_DIMS, NUM_ACTIONS, "cpu", seed=3)
    expected = SEED3_FINGERPRINTS[algo]
    for name in ("actor", "acting_actor"):
        assert _fingerprint(getattr(agent, name)) == pytest.approx(expected["actor"], rel=1e-7)
    for name in ("critic", "critic_target"):
        assert _fingerprint(getattr(agent, name)) == pytest.approx(expected["critic"], rel=1e-7)


@pytest.mark.parametrize("cfg_type", [SacConfig, FlashSacConfig])
def test_configs_reject_empty_support_and_log_std_ranges(cfg_type):
    with pytest.raises(ValidationError, match="v_min must be below v_max"):
        cfg_type(v_min=2.0, v_max=2.0)
    with pytest.raises(ValidationError, match="log_std_min must be below log_std_max"):
        cfg_type(log_std_min=0.0, log_std_max=-1.0)


@pytest.mark.parametrize("algo", ALGOS)
def test_updates_drop_gradients_and_match_zero_filled_ones_exactly(algo, monkeypatch):
    """Each update sets the gradients to None before its backward (no fill, no accumulation kernel); the
    weights it reaches equal those of updates that zero-fill and accumulate instead, bit for bit."""
    torch.manual_seed(0)  # the helper's rewards come from the global generator
    dropped, buffer = _agent_with_data(algo, seed=0)
    seen: list[bool] = []
    original = torch.optim.Optimizer.zero_grad

    def recording(self, set_to_none=True):
        seen.append(set_to_none)
        original(self, set_to_none)

    monkeypatch.setattr(torch.optim.Optimizer, "zero_grad", recording)
    for _ in range(4):  # actor period 1 for SAC's default, 2 for FlashSAC's: both branches run
        dropped.update(buffer.sample(32, dropped.update_rng))
    assert seen and all(seen)

    monkeypatch.setattr(
        torch.optim.Optimizer, "zero_grad", lambda self, set_to_none=True: original(self, set_to_none=False)
    )
    torch.manual_seed(0)
    filled, buffer = _agent_with_data(algo, seed=0)
    for _ in range(4):
        filled.update(buffer.sample(32, filled.update_rng))
    for net in ("actor", "critic", "critic_target"):
        for mine, theirs in zip(getattr(dropped, net).parameters(), getattr(filled, net).parameters()):
            assert torch.equal(mine, theirs), net
    assert torch.equal(dropped.log_alpha, filled.log_alpha)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ALGOS)
def test_the_bookkeeping_parts_compile_whole_and_match_the_eager_update(algo):
    """On CUDA the update compiles its learning-rate step and its loss recording too (a few fused kernels
    instead of about 35): traced whole, no recompilation once both update shapes (with and without the actor
    step) have run, and the same learning rates and recorded losses as the eager update."""
    import torch._dynamo

    bookkeeping = ("_advance_lr_schedule", "_record_losses")
    schedule = {"lr_schedule": "warmup_cosine", "lr_warmup_updates": 2, "lr_final_ratio": 0.1}
    runs = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        agent, buffer = _agent_with_data(algo, seed=0, actor_update_period=2, lr_decay_updates=8, **schedule)
        assert set(bookkeeping) <= set(agent.parts.named())
        if compiled:
            torch._dynamo.reset()
            for part in (agent.parts.advance_lr_schedule, agent.parts.record_losses):
                part.compile()
        seen = []
        for update in range(10):
            with torch._dynamo.config.patch(error_on_recompile=compiled and update >= 2):
                agent.update(buffer.sample(32, agent.update_rng))
            seen.append(
                [g["lr"].item() for g, _ in agent._lr_targets] + [v.item() for v in agent.losses().values()]
            )
        runs[compiled] = torch.tensor(seen)
        expected_lr = 3e-4 * agent._lr_schedule.factor(9)
        assert runs[compiled][-1, 0].item() == pytest.approx(expected_lr, rel=1e-6)
    torch.testing.assert_close(runs[True], runs[False], rtol=1e-6, atol=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["sac", "flashsac"])
def test_the_optimizer_step_parts_compile_whole_and_match_the_eager_update(algo):
    """Each agent's optimizer-step parts compile whole: AdamW in its functional multi-tensor form (and SAC's
    target EMA). With a scheduled (tensor) learning rate and both update shapes, no
    recompilation after the first two updates, and the weights, the target, the moments and the step counters
    of torch's own `AdamW.step` to float rounding (a learning rate frozen at its traced value would be off by
    the schedule's change, about the step size). Both agents compile them by default (docs/perf/tuning/0025)."""
    import torch._dynamo

    from trainrt.algos.adamw_step import init_adamw_state

    steps = {
        "sac": ("_critic_step", "_actor_step"),
        "flashsac": ("_critic_optimizer_step", "_actor_step", "_temperature_step"),
    }[algo]
    schedule = {"lr_schedule": "warmup_cosine", "lr_warmup_updates": 3, "lr_final_ratio": 0.1}
    finals = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        agent, buffer = _agent_with_data(algo, seed=0, actor_update_period=2, lr_decay_updates=8, **schedule)
        assert type(agent.parts).optimizer_steps == steps
        named = agent.parts.named()
        if compiled:
            torch._dynamo.reset()
            for optimizer in (agent.actor_optimizer, agent.critic_optimizer, agent.alpha_optimizer):
                init_adamw_state(optimizer)
            for name in steps:
                assert named[name].compile()
        for update in range(8):
            with torch._dynamo.config.patch(error_on_recompile=compiled and update >= 2):
                agent.update(buffer.sample(32, agent.update_rng))
        finals[compiled] = agent.state_dict()
    eager, fused = finals[False], finals[True]
    for net in ("actor", "critic", "critic_target"):
        for name, value in eager[net].items():
            torch.testing.assert_close(fused[net][name], value, rtol=1e-5, atol=1e-6, msg=f"{net}.{name}")
    torch.testing.assert_close(fused["log_alpha"], eager["log_alpha"], rtol=1e-6, atol=1e-7)
    for opt in ("actor_optimizer", "critic_optimizer", "alpha_optimizer"):
        for index, state in eager[opt]["state"].items():
            for key, value in state.items():
                torch.testing.assert_close(
                    fused[opt]["state"][index][key], value, rtol=1e-4, atol=1e-8, msg=f"{opt}[{index}].{key}"
                )
    assert eager["critic_optimizer"]["state"][0]["step"].item() == 8


def test_init_adamw_state_keeps_existing_state_and_refuses_what_the_step_does_not_do():
    from trainrt.algos.adamw_step import init_adamw_state

    first, second = torch.nn.Parameter(torch.ones(3)), torch.nn.Parameter(torch.ones(2, 2))
    optimizer = torch.optim.AdamW([first, second], lr=0.1)
    first.grad = torch.ones(3)
    optimizer.step()  # second has no gradient: torch creates no state for it
    kept = optimizer.state[first]["exp_avg"]
    init_adamw_state(optimizer)
    assert optimizer.state[first]["exp_avg"] is kept and optimizer.state[first]["step"].item() == 1
    created = optimizer.state[second]
    assert created["step"].dtype == torch.float32 and created["step"].item() == 0
    assert torch.equal(created["exp_avg"], torch.zeros(2, 2)) and torch.equal(
        created["exp_avg_sq"], torch.zeros(2, 2)
    )
    with pytest.raises(ValueError, match="amsgrad"):
        init_adamw_state(torch.optim.AdamW([torch.nn.Parameter(torch.ones(1))], amsgrad=True))


def test_adamw_step_with_given_gradients_matches_the_step_on_backward_gradients():
    """Gradients handed to `adamw_step` (FlashSAC's temperature computes its own) step the parameters as the
    same values left by a backward would: eagerly bit for bit, compiled to float rounding; a list of the wrong
    length is refused."""
    import torch._dynamo

    from trainrt.algos.adamw_step import adamw_step, init_adamw_state

    def run(mode: str) -> list[torch.Tensor]:
        params = [
            torch.nn.Parameter(torch.linspace(-1.0, 1.0, 6).reshape(2, 3)),
            torch.nn.Parameter(torch.ones(())),
        ]
        optimizer = torch.optim.AdamW(params, lr=0.05, weight_decay=0.01)
        init_adamw_state(optimizer)
        step = torch.compile(adamw_step, fullgraph=True, dynamic=False) if mode == "compiled" else adamw_step
        for k in range(3):
            grads = [torch.full((2, 3), 0.5 - k) * params[0].detach(), params[1].detach() * (k + 1.0)]
            if mode == "backward":
                for param, grad in zip(params, grads):
                    param.grad = grad.clone()
                step(optimizer)
            else:
                step(optimizer, grads)
        return [p.detach().clone() for p in params]

    torch._dynamo.reset()
    expected = run("backward")
    for mine, theirs in zip(run("given"), expected):
        assert torch.equal(mine, theirs)
    for mine, theirs in zip(run("compiled"), expected):  # the functional form rounds differently
        torch.testing.assert_close(mine, theirs, rtol=1e-5, atol=1e-6)
    pair = torch.optim.AdamW([torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1))])
    with pytest.raises(ValueError, match="1 gradients for the optimizer's 2 parameters"):
        adamw_step(pair, [torch.ones(1)])


def test_a_part_that_cannot_compile_runs_plain_and_the_others_stay_compiled():
    """Compiled parts fall back one by one: a part torch.compile cannot trace whole (here a host branch on a
    tensor value) runs its plain method from its first call on, the reason names it, the other parts stay
    compiled, and the updates equal the eager ones to float rounding."""
    import torch._dynamo

    from trainrt.algos.execution import Part
    from trainrt.algos.update_math import optimizer_step

    def untraceable_step(agent) -> None:
        if bool(
            agent.log_alpha.detach() > -1e9
        ):  # a host read of a tensor: a graph break, refused in fullgraph
            optimizer_step(agent.actor_optimizer)

    finals = {}
    for compiled in (False, True):
        torch.manual_seed(0)
        torch._dynamo.reset()
        agent, buffer = _agent_with_data(
            "sac", seed=0, actor_update_period=1, uncompiled_parts=UNCOMPILED_BUT_LOSSES_AND_ACTOR_STEP
        )
        agent.parts.actor_step = Part(lambda agent=agent: untraceable_step(agent))
        if compiled:
            agent._compile_parts()
        for _ in range(3):
            agent.update(buffer.sample(32, agent.update_rng))
        finals[compiled] = agent
    agent = finals[True]
    assert agent.compile_enabled
    assert agent.compile_fallback_reason.startswith("_actor_step: compiling failed: ")
    assert agent.parts.record_losses.compiled and not agent.parts.actor_step.compiled
    assert agent.update_diagnostics()["compile_fallback_reason"] == agent.compile_fallback_reason
    for mine, theirs in zip(agent.actor.parameters(), finals[False].actor.parameters()):
        torch.testing.assert_close(mine, theirs, rtol=1e-6, atol=1e-7)
    agent._uncompile_parts("disabled for a test")
    assert not agent.compile_enabled and agent.compile_fallback_reason == "disabled for a test"
    assert finals[False].compile_fallback_reason == "not requested" and not finals[False].compile_enabled


@pytest.mark.parametrize("algo", ALGOS)
def test_optimizer_steps_stay_eager_while_step_hooks_average_gradients(algo):
    """Data-parallel training averages gradients in optimizer step pre-hooks, which only `Optimizer.step()`
    runs. With hooks on the optimizers, compiling the update keeps every optimizer-step part plain (the
    reason names the hooks), every step runs its hooks (the critic's each update, the actor's and the
    temperature's each actor update), and the result is the eager update's."""
    parts = type(_agent_with_data(algo)[0].parts)
    steps = set(parts.optimizer_steps)
    others = tuple(name for name in _part_names(parts) if name not in steps | {"_record_losses"})
    finals = {}
    for hooked in (False, True):
        torch.manual_seed(0)
        agent, buffer = _agent_with_data(algo, seed=0, actor_update_period=2, uncompiled_parts=others)
        calls = {"actor": 0, "critic": 0, "alpha": 0}
        if hooked:
            for name in calls:

                def count(optimizer, args, kwargs, name=name, calls=calls):
                    calls[name] += 1

                getattr(agent, f"{name}_optimizer").register_step_pre_hook(count)
            agent._compile_parts()
            named = agent.parts.named()
            assert not any(named[name].compiled for name in steps)
            assert agent.parts.record_losses.compiled
            assert "have step hooks (data-parallel gradient averaging)" in agent.compile_fallback_reason
            assert all(
                f"{name}: the actor, critic, alpha optimizers" in agent.compile_fallback_reason
                for name in steps
            )
        for _ in range(4):
            agent.update(buffer.sample(32, agent.update_rng))
        finals[hooked] = agent
        if hooked:
            assert calls == {"actor": 2, "critic": 4, "alpha": 2}
    for net in ("actor", "critic", "critic_target"):
        for mine, theirs in zip(
            getattr(finals[True], net).parameters(), getattr(finals[False], net).parameters()
        ):
            assert torch.equal(mine, theirs), net
    assert torch.equal(finals[True].log_alpha, finals[False].log_alpha)


def test_a_part_compiles_with_its_own_inductor_options():
    """A config's ``inductor_options`` reach torch.compile for every part it compiles, its
    ``horizontal_fusion_parts`` add horizontal fusion to those alone, and its ``uncompiled_parts`` stay plain
    and out of the reasons: an option inductor does not know makes each compiled part fall back at its first
    call, naming the option."""
    import torch._dynamo

    from trainrt.algos.execution import HORIZONTAL_FUSION_OPTIONS

    keep = ("_record_losses", "_advance_lr_schedule")
    others = tuple(name for name in _part_names(type(_agent_with_data("sac")[0].parts)) if name not in keep)
    fused, _ = _agent_with_data("sac", seed=0, horizontal_fusion_parts=("_critic_step",))
    assert fused._part_options("_critic_step") == HORIZONTAL_FUSION_OPTIONS
    assert fused._part_options("_actor_step") == {}
    torch._dynamo.reset()
    unknown = {"no_such_inductor_option": True}
    agent, buffer = _agent_with_data("sac", seed=0, uncompiled_parts=others, inductor_options=unknown)
    assert agent._part_options("_record_losses") == unknown
    agent._compile_parts()
    agent.update(buffer.sample(32, agent.update_rng))
    assert not agent.compile_enabled
    assert "no_such_inductor_option" in agent.compile_fallback_reason
    assert set(agent._compiling) == set(keep)
    assert not agent.parts.critic_loss.compiled


def test_a_config_naming_an_unknown_part_is_refused_with_the_names_there_are():
    with pytest.raises(ValueError, match=r"uncompiled_parts names unknown update parts \['_critic_stepp'\]"):
        make_agent("sac", SMALL["sac"](uncompiled_parts=("_critic_stepp",)), OBS_DIMS, NUM_ACTIONS, "cpu")
    with pytest.raises(ValueError, match="horizontal_fusion_parts names unknown update parts"):
        make_agent(
            "flashsac",
            SMALL["flashsac"](horizontal_fusion_parts=("_critic_step",)),
            OBS_DIMS,
            NUM_ACTIONS,
            "cpu",
        )


@pytest.mark.parametrize("algo", ALGOS)
def test_the_kernel_settings_of_the_config_reach_every_copy_of_the_networks(algo):
    """``gemm_alignment`` (and SAC's ``fused_norm_kernel`` and ``norm_backward_programs``) are the networks' own
    settings, in the live, target and acting copies; the defaults are the library's."""
    from trainrt.algos import fused_norm, networks

    def settings(agent) -> set[tuple]:
        found = set()
        for net in (agent.actor, agent.critic, agent.critic_target, agent.acting_actor):
            for layer in net.modules():
                if hasattr(layer, "gemm_alignment"):
                    found.add(("gemm_alignment", layer.gemm_alignment))
                if isinstance(layer, networks.StackedLayerNormMlp):
                    found |= {("fused", layer.fused_norm_kernel), ("programs", layer.norm_backward_programs)}
        return found

    sac_only = {"fused_norm_kernel": False, "norm_backward_programs": 64} if algo == "sac" else {}
    changed = make_agent(algo, SMALL[algo](gemm_alignment=1, **sac_only), OBS_DIMS, NUM_ACTIONS, "cpu")
    default = make_agent(algo, SMALL[algo](), OBS_DIMS, NUM_ACTIONS, "cpu")
    if algo == "sac":
        assert settings(changed) == {("gemm_alignment", 1), ("fused", False), ("programs", 64)}
        programs = fused_norm._TARGET_PROGRAMS
        assert settings(default) == {("gemm_alignment", 8), ("fused", True), ("programs", programs)}
    else:
        assert settings(changed) == {("gemm_alignment", 1)} and settings(default) == {("gemm_alignment", 8)}
