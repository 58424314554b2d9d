"""Capabilities are declared on each backend class itself and negotiated fail-closed at construction."""

from __future__ import annotations

from typing import ClassVar

import mujoco
import pytest
from simcore_scenes import cpu_config

import simcore
from simcore import Capability
from simcore._src.capability import declared_capabilities
from simcore._src.config import (
    constraint_rows_per_contact,
    default_nconmax,
    default_njmax,
    resolve_buffer_sizes,
)
from simcore._src.mjwarp_backend import MjwarpBackend
from simcore._src.mujoco_backend import MujocoBackend


def test_each_backend_declares_its_own_set():
    assert declared_capabilities(MujocoBackend) == {
        Capability.HOST_BRIDGE,
        Capability.BATCHED_STEP,
        Capability.READ_PLAN,
        Capability.CONTACT_FORCES,
        Capability.PER_WORLD_MODEL_FIELDS,
        Capability.RESET_TRANSACTION,
        Capability.STATE_TENSORS,
        Capability.HEIGHTFIELD,
        Capability.COLLISION_MESH,
        Capability.RAY_CAST,
    }
    assert Capability.GRAPH_CAPTURE not in declared_capabilities(MujocoBackend)
    assert {Capability.DEVICE_RESIDENT, Capability.GRAPH_CAPTURE, Capability.EXTERNAL_GRAPH_CAPTURE} <= (
        declared_capabilities(MjwarpBackend)
    )
    assert Capability.HOST_BRIDGE not in declared_capabilities(MjwarpBackend)


def test_subclass_inherits_no_capabilities(small_model):
    class Quiet(MujocoBackend):
        pass

    class Loud(MujocoBackend):
        capabilities: ClassVar[frozenset[Capability]] = frozenset({Capability.HOST_BRIDGE})

    assert declared_capabilities(Quiet) == frozenset()
    assert declared_capabilities(Loud) == {Capability.HOST_BRIDGE}
    with pytest.raises(NotImplementedError, match="HOST_BRIDGE"):
        Quiet(small_model, cpu_config(), require=[Capability.HOST_BRIDGE])
    Loud(small_model, cpu_config(), require=[Capability.HOST_BRIDGE])


@pytest.mark.parametrize(
    ("name", "missing"),
    [("mujoco", Capability.GRAPH_CAPTURE), ("mjwarp", Capability.HOST_BRIDGE)],
)
def test_missing_capability_fails_at_construction_naming_everything(small_model, name, missing):
    with pytest.raises(NotImplementedError) as err:
        simcore.make_backend(name, small_model, cpu_config(), require=[Capability.READ_PLAN, missing])
    message = str(err.value)
    assert repr(name) in message
    assert f"lacks required capabilities ['{missing.name}']" in message
    cls = MujocoBackend if name == "mujoco" else MjwarpBackend
    for declared in declared_capabilities(cls):
        assert declared.name in message


def test_combined_flags_are_accepted_as_a_requirement(small_model):
    backend = simcore.make_backend(
        "mujoco", small_model, cpu_config(), require=Capability.HOST_BRIDGE | Capability.RESET_TRANSACTION
    )
    assert backend.declared_capabilities >= {Capability.HOST_BRIDGE, Capability.RESET_TRANSACTION}
    with pytest.raises(NotImplementedError, match="DEVICE_RESIDENT"):
        simcore.make_backend("mujoco", small_model, cpu_config(), require=Capability.DEVICE_RESIDENT)


def test_unknown_backend_and_bad_requirement(small_model):
    with pytest.raises(ValueError, match=r"unknown backend 'bullet'; valid: \['mujoco', 'mjwarp'\]"):
        simcore.make_backend("bullet", small_model, cpu_config())
    with pytest.raises(ValueError, match="expected Capability values"):
        simcore.make_backend("mujoco", small_model, cpu_config(), require=["GRAPH_CAPTURE"])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_envs": 0}, "num_envs must be a positive int"),
        ({"num_envs": 2, "decimation": 0}, "decimation must be an int >= 1"),
        ({"num_envs": 2, "nconmax": 0}, "nconmax must be a positive int or None"),
        ({"num_envs": 2, "njmax": -5}, "njmax must be a positive int or None"),
        (
            {"num_envs": 2, "randomized_fields": ("body_mass", "geom_rgba")},
            r"unknown randomized_fields \['geom_rgba'\]",
        ),
        ({"num_envs": 2, "randomized_fields": ("body_mass", "body_mass")}, "duplicates"),
    ],
)
def test_sim_config_validates(kwargs, message):
    with pytest.raises(ValueError, match=message):
        simcore.SimConfig(**kwargs)


def test_buffer_sizes_default_from_the_model(small_model):
    nconmax, njmax = resolve_buffer_sizes(small_model, simcore.SimConfig(4))
    assert nconmax == default_nconmax(small_model) >= 48
    # one limited joint; pyramidal condim-3 contacts take 4 rows each, and a world may hold twice its share
    assert njmax == default_njmax(small_model, nconmax) >= 1 + 2 * 4 * nconmax
    assert njmax % 16 == 0
    assert resolve_buffer_sizes(small_model, simcore.SimConfig(4, nconmax=8, njmax=40)) == (8, 40)


_PAIR_XML = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="1 1 0.1" condim="3"/>
    <body name="a" pos="0 0 0.2"><freejoint/><geom name="ball" type="sphere" size="0.05" condim="3"/></body>
  </worldbody>
  <contact><pair geom1="floor" geom2="ball" condim="6"/></contact>
</mujoco>
"""


def test_contact_rows_count_an_explicit_pairs_condim():
    # every geom is condim 3 (4 pyramidal rows); the pair's condim 6 takes 2 * (6 - 1) = 10
    model = mujoco.MjModel.from_xml_string(_PAIR_XML)
    assert constraint_rows_per_contact(model) == 10
    model.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
    assert constraint_rows_per_contact(model) == 6
