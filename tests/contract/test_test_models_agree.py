"""simcore's tests carry their own copy of the G1's constants (simcore imports no robot and no trainrt); that
copy must stay what trainrt's description ``trainrt.robots.G1``, which owns them, says."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from trainrt.robots import G1
from trainrt.robots.holosoma import HOLOSOMA_WHEEL

G1_MODEL = Path(__file__).resolve().parents[2] / "packages" / "simcore" / "tests" / "g1_model.py"


@pytest.fixture(scope="module")
def test_copy():
    spec = importlib.util.spec_from_file_location("simcore_tests_g1_model", G1_MODEL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_copied_constants_equal_the_g1_description(test_copy):
    assert G1.joint_names == test_copy.G1_JOINT_NAMES
    assert dict(G1.default_joint_pos) == test_copy.G1_DEFAULT_JOINT_POS
    assert G1.feet == test_copy.G1_FOOT_BODIES
    assert G1.sole_clearance == test_copy.G1_SOLE_CLEARANCE
    assert test_copy.HOLOSOMA_WHEEL == HOLOSOMA_WHEEL == G1.wheel


def test_the_copied_model_helpers_give_the_descriptions_pose_and_gains(test_copy):
    if not G1.mjcf_path().is_file():
        pytest.skip("G1 assets missing: run `make setup`")
    assert test_copy.g1_mjcf_path() == G1.mjcf_path()
    model = test_copy.load_g1()
    assert test_copy.g1_standing_root_height(model) == G1.standing_root_height()
    np.testing.assert_array_equal(test_copy.g1_default_qpos(model), G1.default_qpos(model))
    ours, theirs = test_copy.g1_pd_gains(model), G1.pd_gains()
    np.testing.assert_array_equal(np.asarray(ours.kp), np.asarray(theirs.kp))
    np.testing.assert_array_equal(np.asarray(ours.kd), np.asarray(theirs.kd))
