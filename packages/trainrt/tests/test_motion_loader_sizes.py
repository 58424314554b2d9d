"""Motion files are sized before they are decompressed: a clip too big to load is refused, naming its sizes."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest
from g1_assets import g1_clip_or_skip

import trainrt.motion.files as files
import trainrt.runner.build as build
from trainrt.motion import read_motion_arrays
from trainrt.motion.files import MAX_MOTION_ARRAY_BYTES, npz_array_bytes


def _write_lying_npz(path, shape=(10**8, 36)) -> None:
    """An npz whose ``joint_pos`` header declares ``shape`` float64 but whose member holds 64 bytes."""
    member = io.BytesIO()
    np.lib.format.write_array_header_1_0(member, {"descr": "<f8", "fortran_order": False, "shape": shape})
    member.write(b"\0" * 64)
    fps = io.BytesIO()
    np.save(fps, np.array(50.0))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("joint_pos.npy", member.getvalue())
        archive.writestr("fps.npy", fps.getvalue())


def test_member_sizes_come_from_the_headers_and_match_the_arrays():
    clip = g1_clip_or_skip()
    sizes = npz_array_bytes(clip)
    arrays = read_motion_arrays(clip)
    assert set(sizes) == set(arrays)
    for name, array in arrays.items():
        assert array.nbytes <= sizes[name] <= array.nbytes + 256, name  # + the npy header
    assert sum(sizes.values()) < MAX_MOTION_ARRAY_BYTES  # the asset clips load


def test_a_header_that_declares_gigabytes_is_refused_before_anything_is_allocated(tmp_path, monkeypatch):
    path = tmp_path / "bomb.npz"
    _write_lying_npz(path)
    assert npz_array_bytes(path)["joint_pos"] == 10**8 * 36 * 8
    monkeypatch.setattr(np, "load", lambda *args, **kwargs: pytest.fail("np.load must not run"))
    with pytest.raises(ValueError) as refused:
        read_motion_arrays(path)
    message = str(refused.value)
    assert message.startswith(f"{path} (")
    assert "holds 26.8 GiB of arrays once decompressed (joint_pos 26.8 GiB" in message
    assert "more than the 1 GiB a motion clip may hold" in message
    assert message.endswith("use a shorter clip (fewer frames) or one with fewer fields")


def test_a_small_file_that_decompresses_past_the_bound_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "zeros.npz"
    np.savez_compressed(path, fps=np.array(50.0), joint_pos=np.zeros((2**16, 36)))  # 18 MiB of zeros
    assert path.stat().st_size < 2**16
    monkeypatch.setattr(files, "MAX_MOTION_ARRAY_BYTES", 2**20)
    with pytest.raises(ValueError, match=r"holds 18 MiB of arrays once decompressed .*more than the 1 MiB"):
        read_motion_arrays(path)


def test_a_clip_that_fits_the_bound_but_not_the_hosts_memory_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "clip.npz"
    np.savez(path, fps=np.array(50.0), joint_pos=np.zeros((1000, 36)))
    monkeypatch.setattr(build, "host_available_bytes", lambda: 100_000)
    with pytest.raises(ValueError, match=r"loading takes about 4 times that, more than the host's 97.7 KiB"):
        read_motion_arrays(path)
    monkeypatch.setattr(build, "host_available_bytes", lambda: None)  # unknown: only the bound applies
    assert read_motion_arrays(path)["joint_pos"].shape == (1000, 36)
