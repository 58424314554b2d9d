"""``trainrt eval`` on CUDA: each replay of the rollout-step graph equals the eager step from the same state.

Whole rollouts are not compared: a rollout amplifies any difference between two executions until a fall
happens a step earlier or later. Every step starts from one saved state (env, agent, rollout accumulators,
generators), runs once as the graph and once eagerly, and the two results must agree: exactly for flags,
counters and generators, tightly for floats. The physics runs with its constraint solver off
(``state_snapshot.without_constraints``): with contacts, one step from the same state is not repeatable on a
GPU. The robot falls through the floor, so the rollout's failure path runs within the compared steps.
"""

from __future__ import annotations

import pytest
import torch
from state_snapshot import StateSnapshot, compare, without_constraints

import simcore
from trainrt import mdp
from trainrt.config import apply_overrides, cpu_demo_preset
from trainrt.envs import ManagerBasedRlEnv
from trainrt.runner import evaluate
from trainrt.runner.build import build_agent, make_env_cfg
from trainrt.tasks.velocity import evaluation as walk_evaluation

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

COMMANDS = ("stand", "forward_1.0", "combined")
ROWS_PER_COMMAND = 16
STEPS = 30


def test_each_eval_graph_replay_equals_the_eager_step_from_the_same_state():
    run_same_state_steps("cuda")


def _synchronize(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize()


def run_same_state_steps(device: str) -> None:
    """The comparison on ``device`` (CPU: both paths eager; a check of the test itself)."""
    cfg = apply_overrides(
        cpu_demo_preset("sac", "g1_walk_flat", "mujoco"),
        [
            "sim.backend=mjwarp",
            f"sim.device={device}",
            "algo.params.actor_hidden_dim=32",
            "algo.params.critic_hidden_dim=32",
        ],
    )
    env = ManagerBasedRlEnv(
        without_constraints(make_env_cfg(walk_evaluation.walk_eval_config(cfg, (0.0, 0.0, 0.0)))),
        sim="mjwarp",
        num_envs=ROWS_PER_COMMAND * len(COMMANDS),
        device=device,
        seed=cfg.training.seed,
    )
    # without constraints every row falls through the floor: the failure path runs inside the compared steps
    agent = build_agent(cfg, env.obs_dims, env.num_actions, env.device)
    rollout = evaluate._RolloutStep(
        env, agent, {"lin_vel_error_xy": lambda env: mdp.lin_vel_error_xy(env, command_name="twist")}
    )
    table = torch.tensor([walk_evaluation.WALK_EVAL_COMMANDS[n] for n in COMMANDS]).repeat_interleave(
        ROWS_PER_COMMAND, dim=0
    )
    walk_evaluation.assign_walk_commands(env, table)
    generators = [g for g in (env.rng, getattr(agent, "rng", None)) if isinstance(g, torch.Generator)]
    graph = simcore.CapturedWork(
        rollout.step, backend=env.backend, name="eval_rollout", generators=generators, warmup_steps=2
    )
    graph.capture()
    assert graph.graph_enabled or device == "cpu", graph.diagnostics()
    eager = simcore.CapturedWork(rollout.step, backend=env.backend, name="eager", enabled=False)
    eager.capture()
    state = StateSnapshot(env, agent, rollout)
    steps_before = int(rollout.steps_taken)
    for _ in range(STEPS):
        start = state.current()
        graph.replay()
        _synchronize(device)
        after_graph = start.current()
        start.restore()
        eager.replay()
        _synchronize(device)
        compare(after_graph, start.current(), rtol=1e-4, atol=1e-4)
    assert int(rollout.steps_taken) == steps_before + STEPS
    assert bool(rollout.failed.any()), "no row fell: the reset path was not exercised"
