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


COMPILE_AHEAD = """
import sys, mujoco, simcore
from simcore_scenes import SMALL_XML, cpu_config
directory = simcore.set_kernel_cache_dir("mjwarp", sys.argv[1])
backend = simcore.make_backend("mjwarp", mujoco.MjModel.from_xml_string(SMALL_XML), cpu_config(num_envs=2))
print(simcore.kernel_cache("mjwarp").modules, backend.compile_ahead_sec is not None)
"""


@pytest.mark.slow
@pytest.mark.parametrize("workers", ["0", "2"])
def test_compile_workers_compile_mujoco_warps_modules_when_the_backend_is_built(tmp_path, workers):
    """With ``$SIMCORE_COMPILE_WORKERS`` the backend compiles MuJoCo Warp's import-time modules (29 in 4.0.0) into
    the kernel cache as it is built, before any step; without it, building compiles only what it launches."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "SIMCORE_COMPILE_WORKERS": workers, "PYTHONPATH": os.pathsep.join(sys.path)}
    tests = str(Path(__file__).parent)
    result = subprocess.run(
        [sys.executable, "-c", COMPILE_AHEAD, str(tmp_path / "cache")],
        capture_output=True, text=True, env=env, cwd=tests, timeout=600, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    modules, ahead = result.stdout.splitlines()[-1].split()  # after Warp's own start-up lines
    if workers == "0":
        assert ahead == "False" and int(modules) < 20
    else:
        assert ahead == "True" and int(modules) >= 25


def test_a_compile_worker_count_that_is_not_one_is_refused_naming_the_variable(monkeypatch):
    from simcore._src.mjwarp_backend import COMPILE_WORKERS_ENV, compile_workers

    monkeypatch.setenv(COMPILE_WORKERS_ENV, "")
    assert compile_workers() == 0
    monkeypatch.setenv(COMPILE_WORKERS_ENV, " 8 ")
    assert compile_workers() == 8
    for text in ["-1", "four", "2.5"]:
        monkeypatch.setenv(COMPILE_WORKERS_ENV, text)
        with pytest.raises(
            ValueError, match=r"\$SIMCORE_COMPILE_WORKERS=.* is not a thread count; set a whole"
        ):
            compile_workers()
