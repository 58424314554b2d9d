"""The run directory's record of what was asked for: ``config.json`` (the resolved, validated config) and
``manifest.json`` (how it was resolved: preset, overrides, command line, device, env summary).

``config.json`` is written before anything is built, so even a run that fails at construction leaves it;
``play``, ``export`` and ``training.resume`` rebuild from it (reading it back, with its rules, is
``trainrt.config.run_config``'s ``load_resolved_config``).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainrt.config import TrainConfig
from trainrt.config.run_config import CONFIG_FILE_NAME, load_resolved_config, runs_inside
from trainrt.hotpath import cold_path
from trainrt.runner.atomic_files import atomic_write_text
from trainrt.runner.build import env_cfg_summary
from trainrt.runner.summary import json_safe, utc_now

MANIFEST_FILE_NAME = "manifest.json"

__all__ = [
    "CONFIG_FILE_NAME",
    "MANIFEST_FILE_NAME",
    "load_resolved_config",
    "recorded_run_id",
    "runs_inside",
    "write_env_record",
    "write_manifest",
    "write_resolved_config",
]


@cold_path
def write_resolved_config(run_dir: str | os.PathLike, cfg: TrainConfig) -> Path:
    """Atomically write the resolved config as ``<run_dir>/config.json``."""
    return atomic_write_text(
        Path(run_dir) / CONFIG_FILE_NAME, json.dumps(cfg.model_dump(mode="json"), indent=2) + "\n"
    )


@cold_path
def write_manifest(run_dir: str | os.PathLike, **facts: Any) -> Path:
    """Atomically write ``<run_dir>/manifest.json``: the given facts plus the command line and a timestamp."""
    record = {"written_at": utc_now(), "argv": list(sys.argv), **facts}
    return atomic_write_text(
        Path(run_dir) / MANIFEST_FILE_NAME, json.dumps(json_safe(record), indent=2) + "\n"
    )


@cold_path
def write_env_record(
    run_dir: Path, env: Any, *, run_id: str, facts: dict[str, Any], log: Callable[[str], None]
) -> None:
    """The built env's full manager tables in ``<run_dir>/env.txt`` (said on ``log``), and the manifest
    rewritten with the env's device and config summary beside ``facts``."""
    env_tables = run_dir / "env.txt"
    env_tables.write_text(str(env) + "\n")
    log(f"full manager tables written to {env_tables}")
    write_manifest(run_dir, device=str(env.device), env=env_cfg_summary(env.cfg), run_id=run_id, **facts)


@cold_path
def recorded_run_id(run_dir: str | os.PathLike) -> str | None:
    """The run id ``<run_dir>/manifest.json`` records (``None`` for a directory without one)."""
    manifest = Path(run_dir) / MANIFEST_FILE_NAME
    try:
        value = json.loads(manifest.read_text()).get("run_id")
    except (OSError, ValueError, AttributeError):
        return None
    return str(value) if value else None
