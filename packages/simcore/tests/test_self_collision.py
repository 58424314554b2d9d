"""Opt-in limb self-collision: ``load_model(self_collision_pairs=...)`` enables exactly the listed body pairs and
adds a contact sensor counting them, on both backends; the default model is unchanged."""

import re

import mujoco
import numpy as np
import pytest
import torch
from g1_model import g1_default_qpos, load_g1
from simcore_scenes import BACKENDS, cpu_config

import simcore

LEGS = ("left_(hip_roll|knee|ankle_roll)_link", "right_(hip_roll|knee|ankle_roll)_link")
ARMS = ("(left|right)_(elbow|wrist_yaw)_link", "pelvis|torso_link")


def _crossed_legs_qpos(model: mujoco.MjModel) -> np.ndarray:
    """The default pose lifted off the floor with both hips rolled inwards to their limits (thighs overlap)."""
    qpos = g1_default_qpos(model)
    qpos[2] += 1.0
    for name, value in (("left_hip_roll_joint", -0.52), ("right_hip_roll_joint", 0.52)):
        qpos[model.jnt_qposadr[model.joint(name).id]] = value
    return qpos


def _robot_contacts(model: mujoco.MjModel, qpos: np.ndarray) -> tuple[list[tuple[str, str]], mujoco.MjData]:
    """Body-name pairs of the robot-robot contacts of ``qpos`` (CPU MuJoCo, float64), and the data."""
    data = mujoco.MjData(model)
    data.qpos[:] = qpos
    mujoco.mj_forward(model, data)
    floor = model.geom("floor").id
    pairs = [
        (model.body(model.geom_bodyid[c.geom1]).name, model.body(model.geom_bodyid[c.geom2]).name)
        for c in data.contact[: data.ncon]
        if floor not in (c.geom1, c.geom2)
    ]
    return pairs, data


def test_default_model_is_unchanged_and_has_no_self_contacts():
    plain = load_g1()
    assert mujoco.mj_name2id(plain, mujoco.mjtObj.mjOBJ_SENSOR, simcore.SELF_COLLISION_SENSOR) < 0
    contacts, _ = _robot_contacts(plain, _crossed_legs_qpos(plain))
    assert contacts == []


def test_only_the_listed_pairs_collide_and_the_sensor_counts_them():
    model = load_g1(self_collision_pairs=(LEGS, ARMS))
    contacts, data = _robot_contacts(model, _crossed_legs_qpos(model))
    assert contacts, "the crossed-legs pose must make the thighs touch"

    for a, b in contacts:
        assert any(
            (re.fullmatch(p, a) and re.fullmatch(q, b)) or (re.fullmatch(p, b) and re.fullmatch(q, a))
            for p, q in (LEGS, ARMS)
        ), (a, b)
    assert data.sensor(simcore.SELF_COLLISION_SENSOR).data[0] == len(contacts)
    _, standing = _robot_contacts(model, g1_default_qpos(model))
    assert standing.sensor(simcore.SELF_COLLISION_SENSOR).data[0] == 0
    # robot-floor contacts are kept and are not counted
    low = g1_default_qpos(model)
    low[2] -= 0.05
    floor_contacts, sunk = _robot_contacts(model, low)
    assert floor_contacts == [] and sunk.ncon > 0


@pytest.mark.parametrize(
    ("pairs", "message"),
    [
        ((("no_such_body", "pelvis"),), "matches no body"),
        ((("pelvis", "pelvis|torso_link"),), "on both sides"),
        ((("pelvis",),), "two body-name patterns"),
        (tuple([LEGS] * 32), "at most 31"),
    ],
)
def test_bad_pairs_are_refused(pairs, message):
    with pytest.raises(ValueError, match=message):
        load_g1(self_collision_pairs=pairs)


def test_self_collision_flag_and_pairs_are_exclusive():
    with pytest.raises(ValueError, match="drop self_collision_pairs"):
        load_g1(self_collision=True, self_collision_pairs=(LEGS,))


@pytest.mark.parametrize("name", BACKENDS)
def test_backends_report_the_sensor_like_cpu_mujoco(name):
    model = load_g1(self_collision_pairs=(LEGS, ARMS))
    backend = simcore.make_backend(name, model, cpu_config(num_envs=2, decimation=1))
    plan = backend.read_plan(sensors=(simcore.SELF_COLLISION_SENSOR,))
    spec = backend.reset_spec(("qpos",))
    payload = spec.new_payload()
    standing = g1_default_qpos(model)
    standing[2] += 1.0
    rows = np.stack([_crossed_legs_qpos(model), standing])
    payload["qpos"].copy_(torch.as_tensor(rows, dtype=payload["qpos"].dtype))
    backend.reset(torch.ones(2, dtype=torch.bool), payload, spec)
    # an acceleration-stage sensor: a step product, computed on the state the (single) substep starts from
    backend.step()
    expected = [len(_robot_contacts(model, row)[0]) for row in rows]
    assert expected[0] > 0 and expected[1] == 0
    assert plan.sensor(simcore.SELF_COLLISION_SENSOR)[:, 0].tolist() == expected
