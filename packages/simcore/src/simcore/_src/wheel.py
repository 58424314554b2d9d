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
"""File written last into an extracted cache folder: the wheel's sha256, then one line per member extracted
(``extracted_members``); its presence means those members' extraction finished."""


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


def _member_line(member: WheelMember) -> str:
    """The marker line recording ``member`` (tab-separated prefix, target, suffix)."""
    return f"{member.prefix}\t{member.target}\t{member.suffix}"


def extracted_members(wheel: PinnedWheel, root: Path) -> frozenset[WheelMember] | None:
    """The members of ``wheel`` that ``root``'s completion marker records as extracted; None without a marker.

    The marker's first line is the wheel's sha256, then one line per member. A marker of another wheel (other
    sha256) or an older one that holds the sha256 alone records no member, so every member asked for is
    extracted again (over the files already there).
    """
    marker = root / COMPLETE_MARKER
    if not marker.is_file():
        return None
    sha, *lines = marker.read_text().splitlines()
    if sha.strip() != wheel.sha256:
        return frozenset()
    members = set()
    for line in lines:
        fields = line.split("\t")
        if len(fields) == 3:
            members.add(WheelMember(*fields))
    return frozenset(members)


def _write_atomically(path: Path, write) -> None:
    """Write ``path`` through a temporary file beside it, renamed into place (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def extract_wheel_members(
    wheel_file: Path, wheel: PinnedWheel, members: Sequence[WheelMember], root: Path
) -> Path:
    """Verify ``wheel_file`` against ``wheel.sha256`` and extract ``members`` into ``root``; returns ``root``.

    Files are written in place (each through a temporary file), over any of the same name; nothing else in
    ``root`` is touched, so members extracted earlier (and files this module did not write) stay. The
    completion marker, written last, records the members extracted now and those it recorded before.
    """
    actual = _sha256(wheel_file)
    if actual != wheel.sha256:
        raise ValueError(f"{wheel_file} has sha256 {actual}, expected {wheel.sha256}; refusing to extract it")
    root.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel_file) as zf:
        for info in zf.infolist():
            if info.is_dir():
                continue
            relative = next((d for m in members if (d := m.destination(info.filename)) is not None), None)
            if relative is None:
                continue
            with zf.open(info) as src:
                _write_atomically(root / relative, lambda dst, src=src: shutil.copyfileobj(src, dst))
    recorded = extracted_members(wheel, root) or frozenset()
    lines = [wheel.sha256, *sorted(_member_line(m) for m in recorded | set(members))]
    _write_atomically(root / COMPLETE_MARKER, lambda f: f.write(("\n".join(lines) + "\n").encode()))
    return root


def fetch_wheel(wheel: PinnedWheel, members: Sequence[WheelMember], root: Path | None = None) -> Path:
    """Fetch, verify and extract ``members`` of ``wheel`` into ``root`` (default ``asset_dir(wheel)``) once.

    A no-op when the folder's completion marker records every member already; otherwise the wheel is downloaded
    and the members not recorded are extracted (a cache fetched for other members, or by an older version that
    recorded none, is extended in place). Returns the folder.
    """
    root = Path(root) if root is not None else asset_dir(wheel)
    missing = [m for m in members if m not in (extracted_members(wheel, root) or frozenset())]
    if not missing and (root / COMPLETE_MARKER).is_file():
        return root
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="simcore-wheel-") as tmp:
        return extract_wheel_members(download_wheel(wheel, Path(tmp)), wheel, missing, root)
