"""Shared fixtures for simcore tests: the small scene, the G1 when its assets exist, and gpu skips."""

from __future__ import annotations

import mujoco
import pytest
import torch
from g1_model import load_g1
from simcore_scenes import SMALL_XML


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Skip tests marked ``gpu`` when torch sees no CUDA device."""
    if item.get_closest_marker("gpu") is not None and not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")


@pytest.fixture(scope="session")
def small_model() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(SMALL_XML)


@pytest.fixture(scope="session")
def g1_model() -> mujoco.MjModel:
    try:
        return load_g1()
    except FileNotFoundError as err:
        pytest.skip(str(err))
