"""The compiled per-step term math (``ManagerBasedRlEnv.compile_term_math``) against the eager one.

From the same saved state (every tensor and generator the env reaches), a run of env steps with the term
math compiled must leave what the eager steps leave: integers, flags and generator states exactly, floats
to float32 rounding (fusion may reorder a sum, or contract a multiply and an add). The reset payload is
compiled math too; its last bits go through the physics into the next states and land on every element at
the scale of its tensor's largest (about 1e-6 of it on the CPU). So floats compare within 1e-5 relative and
1e-6 absolute, or 1e-5 of their tensor's largest magnitude. Episodes end inside the compared steps (short
time-outs), so the done flags, the episode statistics and the resets are part of the comparison. On the CPU
inductor compiles C++ (MuJoCo Warp on its CPU device, which can snapshot its state); with a CUDA device
(marked ``gpu``) it compiles Triton kernels, with the constraint solver off so that the physics itself
repeats.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
from state_snapshot import StateSnapshot, compare, without_constraints

from simcore._src.mjwarp_backend import COMPILE_WORKERS_ENV
from trainrt.envs import ManagerBasedRlEnv
from trainrt.managers import EventTermCfg
from trainrt.managers.noise import NoiseCfg
from trainrt.mdp import UniformVelocityCommand
from trainrt.tasks import make_task_cfg

NUM_ENVS = 4
STEPS = 12
EPISODE_STEPS = 5  # time-outs, and so resets, inside the compared steps
TASKS = ("g1_walk_flat", "g1_motion_tracking")
TOL = {
    "rtol": 1e-5,
    "atol": 1e-6,
    "rtol_of_largest": 1e-5,
}  # compiled floats against eager (module docstring)
_CUDA = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


def _env(
    task: str, sim: str, device: str, *, constraints: bool = True, compile_in_background: bool = False
) -> ManagerBasedRlEnv:
    cfg = dataclasses.replace(make_task_cfg(task), episode_length_s=EPISODE_STEPS * 0.02 - 1e-6)
    if not constraints:
        cfg = without_constraints(cfg)
    try:
        return ManagerBasedRlEnv(
            cfg,
            sim=sim,
            num_envs=NUM_ENVS,
            device=device,
            seed=7,
            compile_in_background=compile_in_background,
        )
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")
    except ImportError as err:
        pytest.skip(f"backend {sim} unavailable: {err}")


def _actions(env: ManagerBasedRlEnv) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(11)
    return [
        (torch.rand(NUM_ENVS, env.num_actions, generator=gen) * 2 - 1).to(env.device) for _ in range(STEPS)
    ]


def _run(env: ManagerBasedRlEnv, actions: list[torch.Tensor]) -> None:
    for action in actions:
        env.step(action)
    if env.device.type == "cuda":
        torch.cuda.synchronize()


def _same_steps_compiled_and_eager(env: ManagerBasedRlEnv) -> dict[str, float]:
    env.reset()
    actions = _actions(env)
    _run(env, actions[:2])
    state = StateSnapshot(env)
    finished_before = int(env._finished_episodes)
    _run(env, actions)
    eager = state.current()
    assert int(env._finished_episodes) > finished_before  # episodes ended inside the compared steps
    state.restore()
    assert env.compile_term_math()
    _run(env, actions)
    assert env.term_math_reasons() == {}  # every part compiled
    facts = compare(eager, state.current(), **TOL)
    assert facts["exact_tensors"] > 10 and facts["float_tensors"] > 10
    return facts


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_compiled_term_math_leaves_the_eager_state_on_the_cpu(task):
    env = _env(task, "mjwarp", "cpu")
    assert env.term_math_reasons() == dict.fromkeys(env.TERM_MATH_PARTS, "not requested")
    _same_steps_compiled_and_eager(env)


@pytest.mark.parametrize("task", [pytest.param(t, marks=_CUDA) for t in TASKS])
def test_compiled_term_math_leaves_the_eager_state_on_the_gpu(task):
    facts = _same_steps_compiled_and_eager(_env(task, "mjwarp", "cuda", constraints=False))
    print(f"largest float difference: {facts['max_float_difference']:.3g}")


@pytest.mark.slow
@pytest.mark.parametrize("task", TASKS)
def test_each_part_compiles_once_and_a_second_env_past_the_recompile_limit_steps_eagerly(task):
    """Each part of the term math compiles one variant per env: the observation frames are called with and
    without the history update (a flag that matters only with history terms, which these tasks have none
    of) and with an empty or a full memo of derived quantities, and neither may make them compile again (a
    fresh machine pays seconds per variant). So with a recompile limit of 1 the first env steps through its
    resets with every part compiled. torch.compile compiles a function again for every env object whose
    attributes its guards pin; past the limit the second env's parts fall back to eager instead of raising,
    say why, and step as the eager env."""
    torch._dynamo.reset()
    with torch._dynamo.config.patch(recompile_limit=1):
        first, second, reference = (_env(task, "mjwarp", "cpu") for _ in range(3))
        actions = _actions(first)
        for env in (first, second):
            env.reset()
            assert env.compile_term_math()
            _run(env, actions[: EPISODE_STEPS + 2])  # through a reset of every row
            assert int(env._finished_episodes) > 0
    torch._dynamo.reset()
    assert first.term_math_reasons() == {}  # one variant of each part
    reasons = second.term_math_reasons()
    # A part whose guards do not pin the env object (the reset payload's) runs the first env's graph
    assert {"terms", "observations"} <= set(reasons), reasons
    assert all("failed: FailOnRecompileLimitHit" in r for r in reasons.values()), reasons
    reference.reset()
    _run(reference, actions[: EPISODE_STEPS + 2])  # eager all along, from the same seed
    facts = compare(StateSnapshot(reference), StateSnapshot(second), **TOL)
    assert facts["exact_tensors"] > 10 and facts["float_tensors"] > 10


@pytest.mark.slow
@pytest.mark.parametrize("task", (*TASKS, "g1_walk_rough"))
def test_term_math_compiled_before_the_first_reset_leaves_the_state_and_compiles_nothing_later(
    task, monkeypatch
):
    """What a training run does on a GPU: the backend compiles its Warp kernels in the background (no work
    of the env's construction waits for them) while `compile_term_math_now` compiles every part of the term
    math, before the first reset, and puts every tensor and the generator back: the env's state is the one it
    had, bit for bit. With a recompile limit of 1 the reset and the steps through resets of every row then
    compile nothing more (each part's guards hold for the calls of a real step), and they end in the very
    state of an env built at once whose parts compiled at their first steps (the same kernels)."""
    monkeypatch.setenv(COMPILE_WORKERS_ENV, "2")
    ahead = _env(task, "mjwarp", "cpu", compile_in_background=True)
    lazy = _env(task, "mjwarp", "cpu")
    assert ahead.backend.compile_pending and not lazy.backend.compile_pending
    actions = _actions(ahead)[: EPISODE_STEPS + 2]  # through a reset of every row
    torch._dynamo.reset()
    with torch._dynamo.config.patch(recompile_limit=1):
        before = StateSnapshot(ahead)
        assert ahead.compile_term_math()
        ahead.compile_term_math_now()
        assert ahead.backend.compile_pending  # torch compiled beside the backend's batch
        compare(before, before.current(), rtol=0.0, atol=0.0)
        ahead.reset()
        _run(ahead, actions)
        assert int(ahead._finished_episodes) > 0
    assert ahead.term_math_reasons() == {}  # nothing compiled again past the limit
    torch._dynamo.reset()
    assert lazy.compile_term_math()
    lazy.reset()
    _run(lazy, actions)
    torch._dynamo.reset()
    assert lazy.term_math_reasons() == {}
    compare(StateSnapshot(lazy), StateSnapshot(ahead), rtol=0.0, atol=0.0)


@pytest.mark.slow
def test_term_math_that_cannot_compile_runs_eagerly_and_says_why():
    env = _env("g1_walk_flat", "mjwarp", "cpu")
    compute = env.metrics_manager.compute

    def untraceable() -> None:
        torch._dynamo.graph_break()  # a host-side step torch.compile(fullgraph=True) refuses
        compute()

    env.metrics_manager.compute = untraceable
    env.reset()
    actions = _actions(env)
    state = StateSnapshot(env)
    _run(env, actions)
    eager = state.current()
    state.restore()
    assert env.compile_term_math()  # accepted; the first step decides
    _run(env, actions)
    reasons = env.term_math_reasons()
    assert list(reasons) == ["terms"], reasons  # the other parts stay compiled
    assert reasons["terms"].startswith("compiling failed:")
    # the failed step ran eagerly once (twice would double the episode sums); the other parts stay compiled
    compare(eager, state.current(), **TOL)
    env.uncompile_term_math("disabled")
    assert env.term_math_reasons() == dict.fromkeys(env.TERM_MATH_PARTS, "disabled")


def _noisy_terms(env: ManagerBasedRlEnv) -> list:
    terms = env.observation_manager._noisy_terms
    assert terms, "the walking task's policy observations carry noise"
    return terms


def test_noise_drawn_before_the_frames_gives_the_interleaved_draws_exactly():
    env = _env("g1_walk_flat", "mjwarp", "cpu")
    env.reset()
    _run(env, _actions(env)[:3])
    manager = env.observation_manager
    _noisy_terms(env)
    state = StateSnapshot(env)
    manager.compute(update_history=True)  # draws apart, then the frames
    apart = state.current()
    state.restore()
    manager._compute_frames(True, True)  # each term draws as its frame is made
    compare(apart, state.current(), rtol=0.0, atol=0.0)


@dataclasses.dataclass
class _AddOnlyNoise(NoiseCfg):
    """Noise written against the older interface: `add_` only."""

    def add_(self, values: torch.Tensor, scratch: torch.Tensor, generator: torch.Generator) -> None:
        scratch.uniform_(-0.01, 0.01, generator=generator)
        values.add_(scratch)


@pytest.mark.slow
def test_noise_without_a_separate_draw_keeps_the_observations_eager_and_says_so():
    env = _env("g1_walk_flat", "mjwarp", "cpu")
    term = _noisy_terms(env)[0]
    term.noise = _AddOnlyNoise()
    env.observation_manager._draws_apart = False  # as the manager finds at construction
    assert env.compile_term_math() is False
    assert env.term_math_reasons() == {
        "observations": "observation noise _AddOnlyNoise does not implement draw_"
    }
    env.reset()
    _run(env, _actions(env)[:2])  # the eager path draws through add_


def _term_by_term_reset_rows(env: ManagerBasedRlEnv, env_mask: torch.Tensor) -> None:
    """The step's resets and updates with each term drawing right before its own math (command by command,
    event by event, timer by timer): the order in which terms that drew as they ran used the generator."""
    commands, events = env.command_manager, env.event_manager
    env.curriculum_manager.compute(env_mask)
    env._fill_default_payload()
    for term in commands._terms.values():
        term.reset(env_mask)
        env.state_cache.bump()
    for _, event, _ in events._by_mode["reset"]:
        event(env, env_mask)
    env.backend.reset(env_mask, env.reset_payload, env.reset_spec)
    env.state_cache.bump()
    for timer in events._timers:
        timer.redraw(env_mask, env.rng, at_reset=True)
    env._reset_manager_rows(env_mask)  # the timers take what they just drew
    for term in commands._terms.values():
        term.compute(env.step_dt)
        env.state_cache.bump()
    for timer, (_, event, _) in zip(events._timers, events._by_mode["interval"]):
        timer.time_left.sub_(env.step_dt)
        torch.le(timer.time_left, 1e-6, out=timer.fired)
        event(env, timer.fired)
        env.state_cache.bump()
        timer.redraw(timer.fired, env.rng, at_reset=False)
    env.state_cache.bump()


@pytest.mark.slow
@pytest.mark.parametrize("task", ("g1_walk_flat", "t1_walk_flat", "g1_motion_tracking", "g1_walk_rough"))
def test_resets_with_every_draw_made_first_leave_the_state_of_term_by_term_draws_exactly(task, monkeypatch):
    """The step's resets and updates as every draw first, then the math (the env's one reset path), against
    each term drawing right before its own math: from the same saved state the generator yields the same
    numbers to the same places, so every tensor and the generator match bit for bit."""
    env = _env(task, "mujoco", "cpu")
    env.reset()
    actions = _actions(env)
    _run(env, actions[:2])
    state = StateSnapshot(env)
    finished_before = int(env._finished_episodes)
    with monkeypatch.context() as patch:
        patch.setattr(env, "_reset_rows", lambda mask: _term_by_term_reset_rows(env, mask))
        _run(env, actions)
    term_by_term = state.current()
    assert int(env._finished_episodes) > finished_before  # resets happened inside the compared steps
    state.restore()
    _run(env, actions)
    facts = compare(term_by_term, state.current(), rtol=0.0, atol=0.0)
    assert facts["exact_tensors"] > 10 and facts["float_tensors"] > 10


class _InlineVelocityCommand(UniformVelocityCommand):
    """A command term written against the older interface: `_resample` draws as it runs."""

    def _resample(self, env_mask: torch.Tensor) -> None:
        self._draw.uniform_(0.0, 1.0, generator=self.env.rng)
        self._resample_drawn(env_mask)


def _inline_push(env: ManagerBasedRlEnv, env_mask: torch.Tensor) -> None:
    """An interval event as a plain function: it draws as it runs."""
    kick = torch.rand(env.num_envs, 1, device=env.device, generator=env.rng) * 0.1
    qvel = env.backend.qvel
    qvel[:, :1] = torch.where(env_mask.unsqueeze(1), qvel[:, :1] + kick.to(qvel.dtype), qvel[:, :1])


def test_terms_that_draw_as_they_run_are_refused_when_the_env_is_built():
    """No silent eager path: a command term on the older interface, or an interval event that is a plain
    function, stops the build with the class and the two methods to implement."""
    cfg = make_task_cfg("g1_walk_flat")
    commands = dict(cfg.commands)
    name = next(n for n, c in commands.items() if c.cls is UniformVelocityCommand)
    commands[name] = dataclasses.replace(commands[name], cls=_InlineVelocityCommand)
    with pytest.raises(
        TypeError, match=r"_InlineVelocityCommand overrides _resample.*_draw_.*_resample_drawn"
    ):
        ManagerBasedRlEnv(dataclasses.replace(cfg, commands=commands), sim="mujoco", num_envs=2, device="cpu")
    events = {
        **make_task_cfg("g1_walk_flat").events,
        "inline_push": EventTermCfg(_inline_push, mode="interval", interval_range_s=(0.02, 0.04)),
    }
    with pytest.raises(TypeError, match=r"event 'inline_push' .* draws as it runs: .*draw_.*apply"):
        ManagerBasedRlEnv(
            dataclasses.replace(make_task_cfg("g1_walk_flat"), events=events),
            sim="mujoco",
            num_envs=2,
            device="cpu",
        )
