"""Motion files, read safely: a clip file is checked to be an npz archive, and what its arrays hold once
decompressed is weighed (``MAX_MOTION_ARRAY_BYTES``, ``MOTION_LOAD_COPIES`` times the host's available memory)
from the zip directory and the npy headers before anything is decompressed; arrays are read without unpickling.
What the arrays must hold is ``trainrt.motion.loader``'s to check."""

from __future__ import annotations

import math
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from trainrt.hotpath import cold_path


@cold_path
def read_motion_arrays(source: str | Path | Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The arrays of a motion npz file (or of an in-memory mapping), as a plain dict."""
    if isinstance(source, Mapping):
        return {k: np.asarray(v) for k, v in source.items()}
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"motion file not found: {path}")
    _check_npz_header(path)
    _check_decompressed_size(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: np.asarray(data[k]) for k in data.files}
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as err:
        fix = (
            "; a field holds Python objects (joint_names often does): save it as text, "
            "np.array(names, dtype=str)"
            if "allow_pickle" in str(err)
            else ""
        )
        raise ValueError(f"{path} is not a readable .npz motion file: {err}{fix}") from err


MAX_MOTION_ARRAY_BYTES = 2**30
"""Largest total size of a motion file's arrays once decompressed (1 GiB). The G1 asset clips hold under 6 MB;
an hour at 50 fps of a 30-body clip with every holosoma field in float64 holds about 0.7 GiB."""

MOTION_LOAD_COPIES = 4
"""How many times its decompressed size loading a clip holds at its peak (the arrays, their float64 tracks,
resampling, forward kinematics): 2.7 to 4.6 for the G1 asset clips. A clip must fit the host's available
memory that many times."""


@cold_path
def npz_array_bytes(path: str | Path) -> dict[str, int]:
    """Bytes each member of an npz file holds once decompressed, without decompressing it: the larger of the
    zip central directory's size and the array its npy header describes (shape x item size)."""
    sizes = {}
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            sizes[info.filename.removesuffix(".npy")] = max(info.file_size, _npy_header_bytes(archive, info))
    return sizes


def _npy_header_bytes(archive: zipfile.ZipFile, info: zipfile.ZipInfo) -> int:
    """The bytes the array of an npz member holds by its npy header (read alone); 0 for a member that is no npy."""
    with archive.open(info) as member:
        try:
            version = np.lib.format.read_magic(member)
            read_header = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, _, dtype = read_header(member)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile):
            return 0
    return math.prod(shape) * dtype.itemsize


@cold_path
def _check_decompressed_size(path: Path) -> None:
    """``ValueError`` naming the file and its sizes when its arrays, decompressed, would exceed
    ``MAX_MOTION_ARRAY_BYTES`` or (``MOTION_LOAD_COPIES`` times) the host's available memory."""
    from trainrt.runner.build import host_available_bytes
    from trainrt.runner.preflight import format_bytes

    try:
        sizes = npz_array_bytes(path)
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return  # not readable as a zip: np.load names the problem
    total = sum(sizes.values())
    available = host_available_bytes()
    if total > MAX_MOTION_ARRAY_BYTES:
        limit = f"more than the {format_bytes(MAX_MOTION_ARRAY_BYTES)} a motion clip may hold"
    elif available is not None and total * MOTION_LOAD_COPIES > available:
        limit = (
            f"and loading takes about {MOTION_LOAD_COPIES} times that, more than the host's "
            f"{format_bytes(available)} of available memory"
        )
    else:
        return
    largest = sorted(sizes.items(), key=lambda item: -item[1])[:3]
    arrays = ", ".join(f"{name} {format_bytes(size)}" for name, size in largest)
    raise ValueError(
        f"{path} ({format_bytes(path.stat().st_size)} on disk) holds {format_bytes(total)} of arrays once "
        f"decompressed ({arrays}), {limit}: use a shorter clip (fewer frames) or one with fewer fields"
    )


def _name_list(field: Any) -> list[str]:
    """A ``joint_names`` field as text; names stored as bytes (as HDF5 pipelines write them) are decoded."""
    return [n.decode() if isinstance(n, bytes) else str(n) for n in np.asarray(field).reshape(-1)]


_NPZ_FIX = "save motions with np.savez(path, fps=..., joint_pos=..., ...)"


@cold_path
def _check_npz_header(path: Path) -> None:
    """``ValueError`` naming what ``path`` is when it is not an npz archive (empty, a .npy, text, other)."""
    with open(path, "rb") as handle:
        head = handle.read(64)
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return
    if not head:
        what = "it is empty (0 bytes)"
    elif head.startswith(b"\x93NUMPY"):
        what = "it is a single-array .npy file (renamed?), not an .npz archive of named fields"
    else:
        try:
            text = head.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        if text is not None and all(c.isprintable() or c.isspace() for c in text):
            what = f"it is a text file (starts with {text[:32]!r})"
        else:
            what = "it does not start like an .npz (zip) archive"
    raise ValueError(f"{path} is not a readable .npz motion file: {what}; {_NPZ_FIX}")
