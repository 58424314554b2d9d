"""A MuJoCo Warp run shows Warp's warnings only, not a line per kernel module, unless the user asks."""

from __future__ import annotations

import pytest
import warp

import simcore
from trainrt.runner.build import BACKEND_LOG_ENV, quiet_backend_log
from trainrt.runner.failures import ExpectedRunFailure


@pytest.fixture
def restore_warp_level():
    level = warp.config.log_level
    yield
    warp.config.log_level = level


@pytest.mark.parametrize(
    ("value", "level"), [(None, warp.LOG_WARNING), ("info", warp.LOG_INFO), (" DEBUG ", warp.LOG_DEBUG)]
)
def test_warp_logs_warnings_unless_the_user_asks_for_more(monkeypatch, restore_warp_level, value, level):
    if value is None:
        monkeypatch.delenv(BACKEND_LOG_ENV, raising=False)
    else:
        monkeypatch.setenv(BACKEND_LOG_ENV, value)
    warp.config.log_level = warp.LOG_INFO if level != warp.LOG_INFO else warp.LOG_ERROR
    quiet_backend_log("mjwarp")
    assert warp.config.log_level == level


def test_the_cpu_backend_accepts_every_level_and_leaves_warp_alone(monkeypatch, restore_warp_level):
    monkeypatch.setenv(BACKEND_LOG_ENV, "info")
    warp.config.log_level = warp.LOG_ERROR
    quiet_backend_log("mujoco")
    assert warp.config.log_level == warp.LOG_ERROR


def test_an_unknown_log_level_is_refused_naming_the_valid_ones(monkeypatch, restore_warp_level):
    monkeypatch.setenv(BACKEND_LOG_ENV, "loud")
    with pytest.raises(
        ExpectedRunFailure, match=r"TRAINRT_BACKEND_LOG='loud': unknown log level 'loud'; valid"
    ):
        quiet_backend_log("mjwarp")
    with pytest.raises(ValueError, match=r"unknown backend 'physx'; valid: \['mujoco', 'mjwarp'\]"):
        simcore.set_backend_log_level("physx", "info")
