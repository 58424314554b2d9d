"""The G1 assets the trainrt tests read, or a skip that names what is missing.

``python -m trainrt.robots fetch`` (``make setup``) fetches them.
"""

from __future__ import annotations

from pathlib import Path

import mujoco
import pytest

from trainrt.robots import G1
from trainrt.tasks.g1_motion_tracking.env_cfg import DEFAULT_MOTION_FILE


def require_g1_assets() -> None:
    """Skip the calling test (or fixture) when the G1 assets are not fetched."""
    try:
        G1.mjcf_path()
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")


def load_g1_or_skip() -> mujoco.MjModel:
    """The G1 model (``G1.model()``), or a skip when its assets are not fetched."""
    try:
        return G1.model()
    except FileNotFoundError as err:
        pytest.skip(f"G1 assets missing: {err}")


def g1_clip_or_skip(name: str = DEFAULT_MOTION_FILE) -> Path:
    """The path of the G1 asset clip ``name`` (default: the tracking task's clip), or a skip without it."""
    require_g1_assets()
    paths = [p for p in G1.motion_files() if p.name == name]
    if not paths:
        pytest.skip(f"motion clip {name} missing from the G1 assets")
    return paths[0]
