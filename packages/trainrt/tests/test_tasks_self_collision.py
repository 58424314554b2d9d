"""Both G1 tasks enable the limb self-collision pairs and penalize the contacts they count."""

from __future__ import annotations

import pytest
import torch

import simcore
from trainrt import mdp
from trainrt.envs import ManagerBasedRlEnv
from trainrt.robots.g1 import G1_SELF_COLLISION_PAIRS
from trainrt.tasks import make_task_cfg


@pytest.mark.parametrize(("task", "weight"), [("g1_walk_flat", -1.0), ("g1_motion_tracking", -10.0)])
def test_task_penalizes_self_collisions(task, weight):
    try:
        cfg = make_task_cfg(task)
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")
    term = cfg.rewards["self_collisions"]
    assert term.func is mdp.self_collision_count and term.weight == weight
    assert simcore.SELF_COLLISION_SENSOR in cfg.scene.sensors
    model = cfg.scene.model_factory()
    assert model.sensor(simcore.SELF_COLLISION_SENSOR).id >= 0


def test_count_is_zero_standing_and_positive_with_crossed_legs():
    env = ManagerBasedRlEnv(make_task_cfg("g1_walk_flat"), sim="mujoco", num_envs=2, device="cpu", seed=0)
    env.reset()
    env.step(torch.zeros(2, env.num_actions))
    torch.testing.assert_close(mdp.self_collision_count(env), torch.zeros(2))
    # row 0: both hips rolled inwards to their limits, lifted off the floor; the thighs overlap
    model = env.backend.mj_model
    spec = env.backend.reset_spec(("qpos", "qvel"))
    payload = spec.new_payload()
    qpos = env.robot.default_qpos.expand(2, -1).clone()
    qpos[:, 2] += 1.0
    for name, value in (("left_hip_roll_joint", -0.52), ("right_hip_roll_joint", 0.52)):
        qpos[0, model.jnt_qposadr[model.joint(name).id]] = value
    payload["qpos"].copy_(qpos.to(payload["qpos"].dtype))
    env.backend.reset(torch.ones(2, dtype=torch.bool), payload, spec)
    env.backend.step()
    count = mdp.self_collision_count(env)
    assert count[0] > 0 and count[1] == 0
    assert len(G1_SELF_COLLISION_PAIRS) == 2
