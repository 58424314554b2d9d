"""G1 assets: the robot and motion files of the pinned holosoma wheel (``simcore._src.wheel`` fetches it)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from simcore._src.wheel import PinnedWheel, WheelMember, asset_dir, extract_wheel_members, fetch_wheel

HOLOSOMA_WHEEL = PinnedWheel(
    requirement="holosoma==0.0.3",
    filename="holosoma-0.0.3-py3-none-any.whl",
    sha256="1c007c27dbf130c04533af6052649d88da32eaa9b54e69c6d39009e979a2312f",
)
"""The pinned wheel the G1 model and motion clips come from."""

WHEEL_NAME = HOLOSOMA_WHEEL.filename
G1_MEMBERS: tuple[WheelMember, ...] = (
    WheelMember("holosoma/data/robots/g1/", "robots/g1"),
    WheelMember("holosoma/data/motions/g1_29dof/whole_body_tracking/", "motions/g1_29dof", suffix=".npz"),
)
"""The wheel's G1 files and where they land in the cache."""

FETCH_HINT = "run `make setup` (or `uv run python -m simcore.assets fetch`) to fetch them"


@dataclass(frozen=True)
class G1Assets:
    """Paths of the extracted G1 assets."""

    root: Path
    mjcf: Path
    motions_dir: Path
    motion_files: tuple[Path, ...]


def g1_asset_paths(root: Path | None = None) -> G1Assets:
    """Return the G1 asset paths; raise FileNotFoundError naming the fetch command if they are missing."""
    root = Path(root) if root is not None else asset_dir(HOLOSOMA_WHEEL)
    mjcf = root / "robots" / "g1" / "g1_29dof.xml"
    motions_dir = root / "motions" / "g1_29dof"
    if not mjcf.is_file():
        raise FileNotFoundError(f"G1 model not found at {mjcf}; {FETCH_HINT}.")
    motion_files = tuple(sorted(motions_dir.glob("*.npz"))) if motions_dir.is_dir() else ()
    return G1Assets(root=root, mjcf=mjcf, motions_dir=motions_dir, motion_files=motion_files)


def extract_wheel(wheel: Path, root: Path) -> G1Assets:
    """Verify the holosoma wheel's sha256 and extract the G1 robot and motion files into ``root``."""
    return g1_asset_paths(extract_wheel_members(wheel, HOLOSOMA_WHEEL, G1_MEMBERS, root))


def fetch_g1_assets(root: Path | None = None) -> G1Assets:
    """Fetch, verify and extract the G1 assets once; a no-op when they are already in place."""
    return g1_asset_paths(fetch_wheel(HOLOSOMA_WHEEL, G1_MEMBERS, root))


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
