"""The tracking task for any robot whose clip names its joints: with the G1 it is the ``g1_motion_tracking``
config of before (pinned by a stored description)."""

from __future__ import annotations

import json
from pathlib import Path

from env_cfg_description import describe
from g1_assets import require_g1_assets

from trainrt.tasks import make_task_cfg

STORED = Path(__file__).with_name("g1_motion_tracking_env_cfg.json")
"""``describe(g1_motion_tracking_env_cfg())`` as the task factory built it before the tracking task took a robot
(written once from that code; terms by qualname, effective params, a summary of the model)."""
MOVED = ("trainrt.tasks.g1_motion_tracking.mdp:", "trainrt.tasks.tracking.mdp:")
"""The one change: the tracking terms moved, unchanged, from the G1 task's folder to ``tasks/tracking``."""


def test_the_g1_registration_builds_the_tracking_config_of_before():
    require_g1_assets()
    stored = STORED.read_text()
    assert MOVED[0] in stored
    expected = json.loads(stored.replace(*MOVED))
    actual = json.loads(json.dumps(describe(make_task_cfg("g1_motion_tracking"))))
    differing = [key for key in expected.keys() | actual.keys() if expected.get(key) != actual.get(key)]
    assert not differing, f"g1_motion_tracking's config changed in {sorted(differing)}"
