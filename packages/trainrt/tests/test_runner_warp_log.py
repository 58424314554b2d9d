"""A MuJoCo Warp run shows Warp's warnings only, not a line per kernel module, unless the user asks."""

from __future__ import annotations

import pytest
import warp

from trainrt.runner.build import WARP_LOG_ENV, quiet_warp
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
        monkeypatch.delenv(WARP_LOG_ENV, raising=False)
    else:
        monkeypatch.setenv(WARP_LOG_ENV, value)
    warp.config.log_level = warp.LOG_INFO if level != warp.LOG_INFO else warp.LOG_ERROR
    quiet_warp()
    assert warp.config.log_level == level


def test_an_unknown_warp_log_level_is_refused_naming_the_valid_ones(monkeypatch, restore_warp_level):
    monkeypatch.setenv(WARP_LOG_ENV, "loud")
    with pytest.raises(ExpectedRunFailure, match=r"TRAINRT_WARP_LOG='loud': give one of \['debug', 'error'"):
        quiet_warp()
