"""A backend's kernel cache: set below a folder of the user's choosing, and reported with its module count."""

from __future__ import annotations

import pytest
import warp

import simcore


@pytest.fixture
def restore_warp_cache():
    warp.init()
    directory = warp.config.kernel_cache_dir
    yield
    warp.config.kernel_cache_dir = directory


@warp.kernel
def _add_one(values: warp.array(dtype=float)):
    i = warp.tid()
    values[i] = values[i] + 1.0


def test_warp_compiles_into_the_folder_set_after_it_initialized_and_counts_the_module(
    tmp_path, restore_warp_cache
):
    shared = tmp_path / "shared" / "warp"  # a folder that does not exist yet
    directory = simcore.set_kernel_cache_dir("mjwarp", shared)
    assert directory == shared.resolve() / warp.config.version  # Warp's version folder, as Warp makes it
    assert directory.is_dir()
    assert simcore.kernel_cache("mjwarp") == simcore.KernelCache(directory=directory, modules=0)
    # This file's module is loaded nowhere else, so Warp compiles it now, into the new folder.
    values = warp.zeros(4, dtype=float, device="cpu")
    warp.launch(_add_one, dim=4, inputs=[values], device="cpu")
    assert values.numpy().tolist() == [1.0] * 4
    cache = simcore.kernel_cache("mjwarp")
    assert cache is not None and cache.directory == directory
    assert cache.modules == 1
    assert [p.name.startswith("wp_") for p in directory.iterdir()] == [True]


def test_the_cpu_backend_compiles_nothing_and_unknown_backends_are_refused(tmp_path, restore_warp_cache):
    before = warp.config.kernel_cache_dir
    assert simcore.set_kernel_cache_dir("mujoco", tmp_path / "unused") is None
    assert simcore.kernel_cache("mujoco") is None
    assert not (tmp_path / "unused").exists() and warp.config.kernel_cache_dir == before
    with pytest.raises(ValueError, match=r"unknown backend 'physx'; valid: \['mujoco', 'mjwarp'\]"):
        simcore.set_kernel_cache_dir("physx", tmp_path)
    with pytest.raises(ValueError, match=r"unknown backend 'physx'"):
        simcore.kernel_cache("physx")


def test_a_folder_that_cannot_be_created_raises(tmp_path, restore_warp_cache):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    with pytest.raises(OSError):
        simcore.set_kernel_cache_dir("mjwarp", blocker)
