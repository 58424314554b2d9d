"""G1 assets: fetch the pinned holosoma wheel from PyPI, verify it, and extract the robot and motion files.

The wheel is a build-time asset source only; its Python code is never imported. Files land in a cache folder
(``SIMCORE_ASSET_DIR`` or ``~/.cache/simcore/holosoma-0.0.3``) and are never committed.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

WHEEL_NAME = "holosoma-0.0.3-py3-none-any.whl"
WHEEL_REQUIREMENT = "holosoma==0.0.3"
WHEEL_SHA256 = "1c007c27dbf130c04533af6052649d88da32eaa9b54e69c6d39009e979a2312f"
ASSET_DIR_ENV = "SIMCORE_ASSET_DIR"
_ROBOT_PREFIX = "holosoma/data/robots/g1/"
_MOTION_PREFIX = "holosoma/data/motions/g1_29dof/whole_body_tracking/"
_COMPLETE_MARKER = ".complete"
FETCH_HINT = "run `make setup` (or `uv run python -m simcore.assets fetch`) to fetch them"


@dataclass(frozen=True)
class G1Assets:
    """Paths of the extracted G1 assets."""

    root: Path
    mjcf: Path
    motions_dir: Path
    motion_files: tuple[Path, ...]


def asset_dir() -> Path:
    """Return the asset cache folder (``$SIMCORE_ASSET_DIR`` or the user cache)."""
    env = os.environ.get(ASSET_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "simcore" / "holosoma-0.0.3"


def g1_asset_paths(root: Path | None = None) -> G1Assets:
    """Return the G1 asset paths; raise FileNotFoundError naming the fetch command if they are missing."""
    root = Path(root) if root is not None else asset_dir()
    mjcf = root / "robots" / "g1" / "g1_29dof.xml"
    motions_dir = root / "motions" / "g1_29dof"
    if not mjcf.is_file():
        raise FileNotFoundError(f"G1 model not found at {mjcf}; {FETCH_HINT}.")
    motion_files = tuple(sorted(motions_dir.glob("*.npz"))) if motions_dir.is_dir() else ()
    return G1Assets(root=root, mjcf=mjcf, motions_dir=motions_dir, motion_files=motion_files)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _download_wheel(dest: Path) -> Path:
    """Download the pinned wheel (no dependencies) with pip, or with uvx where pip is absent."""
    args = ["download", "--no-deps", "--only-binary=:all:", "-d", str(dest), WHEEL_REQUIREMENT]
    try:
        import pip  # noqa: F401

        cmd = [sys.executable, "-m", "pip", *args]
    except ImportError:
        uvx = shutil.which("uvx")
        if uvx is None:
            raise RuntimeError("neither pip nor uvx is available to download the G1 assets") from None
        cmd = [uvx, "pip", *args]
    subprocess.run(cmd, check=True)
    return dest / WHEEL_NAME


def extract_wheel(wheel: Path, root: Path) -> G1Assets:
    """Verify the wheel's sha256 and extract the G1 robot and motion files into ``root``."""
    actual = _sha256(wheel)
    if actual != WHEEL_SHA256:
        raise ValueError(f"{wheel} has sha256 {actual}, expected {WHEEL_SHA256}; refusing to extract it")
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root.parent))
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            name = info.filename
            if info.is_dir():
                continue
            if name.startswith(_ROBOT_PREFIX):
                target = staging / "robots" / "g1" / name[len(_ROBOT_PREFIX) :]
            elif name.startswith(_MOTION_PREFIX) and name.endswith(".npz"):
                target = staging / "motions" / "g1_29dof" / name[len(_MOTION_PREFIX) :]
            else:
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst)
    (staging / _COMPLETE_MARKER).write_text(WHEEL_SHA256 + "\n")
    if root.exists():
        shutil.rmtree(root)
    staging.rename(root)
    return g1_asset_paths(root)


def fetch_g1_assets(root: Path | None = None) -> G1Assets:
    """Fetch, verify and extract the G1 assets once; a no-op when they are already in place."""
    root = Path(root) if root is not None else asset_dir()
    if (root / _COMPLETE_MARKER).is_file():
        return g1_asset_paths(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="simcore-wheel-") as tmp:
        wheel = _download_wheel(Path(tmp))
        return extract_wheel(wheel, root)


def main(argv: list[str] | None = None) -> int:
    """Command line: ``python -m simcore.assets fetch`` or ``python -m simcore.assets path``."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv else "fetch"
    if command == "fetch":
        assets = fetch_g1_assets()
        print(f"G1 assets ready in {assets.root} ({len(assets.motion_files)} motion clips)")
        return 0
    if command == "path":
        print(g1_asset_paths().root)
        return 0
    print(f"unknown command {command!r}; valid: fetch, path", file=sys.stderr)
    return 2
