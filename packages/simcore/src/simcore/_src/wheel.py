"""Pinned asset wheels: fetch a wheel from PyPI by exact version, verify its sha256, and extract chosen
members into a cache folder.

A wheel is a build-time asset source only; its Python code is never imported. Files land in
``$SIMCORE_ASSET_DIR`` or ``~/.cache/simcore/<name>-<version>`` and are never committed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ASSET_DIR_ENV = "SIMCORE_ASSET_DIR"
"""Environment variable naming the asset cache folder (overrides the per-wheel default)."""

COMPLETE_MARKER = ".complete"
"""File written last into an extracted cache folder; its presence means the extraction finished."""


@dataclass(frozen=True)
class PinnedWheel:
    """A wheel pinned by exact version and checksum.

    Attributes:
        requirement: the pip requirement, ``"name==version"``.
        filename: the wheel's file name on PyPI.
        sha256: the wheel's expected sha256 (hex).
    """

    requirement: str
    filename: str
    sha256: str

    @property
    def cache_name(self) -> str:
        """``name-version`` of the requirement (the default cache folder's name)."""
        name, _, version = self.requirement.partition("==")
        return f"{name}-{version}"


@dataclass(frozen=True)
class WheelMember:
    """Files of a wheel to extract: those under ``prefix`` (ending in ``suffix``) go to ``target`` (a folder
    relative to the cache root), keeping their paths below ``prefix``."""

    prefix: str
    target: str
    suffix: str = ""

    def destination(self, name: str) -> str | None:
        """The cache-relative path of the wheel file ``name``, or None when this member does not take it."""
        if not (name.startswith(self.prefix) and name.endswith(self.suffix)):
            return None
        return f"{self.target}/{name[len(self.prefix) :]}"


def asset_dir(wheel: PinnedWheel) -> Path:
    """Return the asset cache folder of ``wheel`` (``$SIMCORE_ASSET_DIR`` or the user cache)."""
    env = os.environ.get(ASSET_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "simcore" / wheel.cache_name


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download_wheel(wheel: PinnedWheel, dest: Path) -> Path:
    """Download ``wheel`` (no dependencies) into ``dest`` with pip, or with uvx where pip is absent."""
    args = ["download", "--no-deps", "--only-binary=:all:", "-d", str(dest), wheel.requirement]
    try:
        import pip  # noqa: F401

        cmd = [sys.executable, "-m", "pip", *args]
    except ImportError:
        uvx = shutil.which("uvx")
        if uvx is None:
            raise RuntimeError(f"neither pip nor uvx is available to download {wheel.requirement}") from None
        cmd = [uvx, "pip", *args]
    subprocess.run(cmd, check=True)
    return dest / wheel.filename


def extract_wheel_members(
    wheel_file: Path, wheel: PinnedWheel, members: Sequence[WheelMember], root: Path
) -> Path:
    """Verify ``wheel_file`` against ``wheel.sha256`` and extract ``members`` into ``root`` (replaced whole,
    marked complete last); returns ``root``."""
    actual = _sha256(wheel_file)
    if actual != wheel.sha256:
        raise ValueError(f"{wheel_file} has sha256 {actual}, expected {wheel.sha256}; refusing to extract it")
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root.parent))
    with zipfile.ZipFile(wheel_file) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            relative = next((d for m in members if (d := m.destination(info.filename)) is not None), None)
            if relative is None:
                continue
            target = staging / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
    (staging / COMPLETE_MARKER).write_text(wheel.sha256 + "\n")
    if root.exists():
        shutil.rmtree(root)
    staging.rename(root)
    return root


def fetch_wheel(wheel: PinnedWheel, members: Sequence[WheelMember], root: Path | None = None) -> Path:
    """Fetch, verify and extract ``members`` of ``wheel`` into ``root`` (default ``asset_dir(wheel)``) once;
    a no-op when the folder is already marked complete. Returns the folder."""
    root = Path(root) if root is not None else asset_dir(wheel)
    if (root / COMPLETE_MARKER).is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="simcore-wheel-") as tmp:
        return extract_wheel_members(download_wheel(wheel, Path(tmp)), wheel, members, root)
