"""The backend factory: builds by name, names the valid set, and stays out of the base class's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import mujoco
import pytest
from simcore_scenes import BACKENDS, SMALL_XML, cpu_config

import simcore
from simcore._src import backend as backend_module
from simcore._src.factory import BACKEND_NAMES


def _imported_modules(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def test_the_base_class_imports_none_of_its_backends_nor_the_factory():
    imported = _imported_modules(Path(backend_module.__file__))
    concrete = {"simcore._src.mujoco_backend", "simcore._src.mjwarp_backend", "simcore._src.factory"}
    assert not imported & concrete, sorted(imported & concrete)


def test_make_backend_builds_by_name_and_names_the_valid_set():
    model = mujoco.MjModel.from_xml_string(SMALL_XML)
    backend = simcore.make_backend("mujoco", model, cpu_config(2))
    assert isinstance(backend, simcore.SimBackend) and type(backend).__name__ == "MujocoBackend"
    with pytest.raises(ValueError, match=r"unknown backend 'bullet'; valid: \['mujoco', 'mjwarp'\]"):
        simcore.make_backend("bullet", model, cpu_config(2))
    assert BACKEND_NAMES == BACKENDS


def test_devices_and_buffer_sizes_a_backend_cannot_use_are_refused_naming_the_setting():
    import torch

    model = mujoco.MjModel.from_xml_string(SMALL_XML)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="requested but torch sees no CUDA device"):
            simcore.make_backend("mujoco", model, simcore.SimConfig(num_envs=1, device="cuda"))
    with pytest.raises(ValueError, match=r"keeps its tensors on 'cpu' or 'cuda\[:i\]', got device 'meta'"):
        simcore.make_backend("mujoco", model, simcore.SimConfig(num_envs=1, device="meta"))
    with pytest.raises(ValueError, match="'bogus' is not a torch device"):
        simcore.make_backend("mujoco", model, simcore.SimConfig(num_envs=1, device="bogus"))
    resting = mujoco.MjModel.from_xml_string(
        '<mujoco><worldbody><geom type="plane" size="1 1 .1"/>'
        '<body pos="0 0 .05"><freejoint/><geom type="box" size=".1 .1 .1"/></body></worldbody></mujoco>'
    )  # in contact from the start: its first state needs constraint rows
    with pytest.raises(ValueError, match=r"raise SimConfig.njmax \(now 1\) or SimConfig.nconmax"):
        simcore.make_backend("mjwarp", resting, cpu_config(num_envs=1, njmax=1))
