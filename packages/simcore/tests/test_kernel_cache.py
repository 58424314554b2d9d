"""A backend's kernel cache: set below a folder of the user's choosing, and reported with its module count."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
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
import json, sys, mujoco, simcore, torch, warp as wp
from simcore_scenes import SMALL_XML
from simcore._src import mjwarp_backend, warp_compile
directory = simcore.set_kernel_cache_dir("mjwarp", sys.argv[1])
# a randomized mass: the backend recomputes MuJoCo's derived constants when it is built
config = simcore.SimConfig(num_envs=2, device=sys.argv[2], randomized_fields=("body_mass",))
compiled_while_built, compiled_in_dry_run, compiled_later = [], [], []
real_load, real_ahead, real_batch = wp.Module.load, mjwarp_backend.compile_ahead, warp_compile.compile_modules
def load(module, device, block_dim=None, *args, **kwargs):
    variant = block_dim if block_dim is not None else module.options["block_dim"]
    if (wp.get_device(device).context, variant) not in module.execs and not batch:
        (compiled_in_dry_run if dry_run else compiled_later if built else compiled_while_built).append(module.name)
    return real_load(module, device, block_dim, *args, **kwargs)
def compile_ahead(*args):  # dry runs and parallel batches
    global dry_run
    dry_run = True
    try:
        return real_ahead(*args)
    finally:
        dry_run = False
def compile_modules(*args):  # a parallel batch
    global batch
    batch = True
    try:
        return real_batch(*args)
    finally:
        batch = False
compiled_here, real_compile = [], wp.Module._compile
def _compile(module, *args, **kwargs):  # code generated and compiled in this process (not in a forked one)
    done = real_compile(module, *args, **kwargs)
    if done:
        compiled_here.append(module.name)
    return done
wp.Module.load, mjwarp_backend.compile_ahead, warp_compile.compile_modules = load, compile_ahead, compile_modules
wp.Module._compile = _compile
built = dry_run = batch = False
backend = simcore.make_backend("mjwarp", mujoco.MjModel.from_xml_string(SMALL_XML), config)
built, cached = True, simcore.kernel_cache("mjwarp").modules
backend.ctrl.fill_(0.3)
for _ in range(3):
    backend.step()
print(json.dumps({"cached": cached, "cached_after": simcore.kernel_cache("mjwarp").modules,
                  "ahead": backend.compile_ahead, "compiled_later": compiled_later,
                  "compiled_while_built": compiled_while_built, "compiled_in_dry_run": compiled_in_dry_run,
                  "compiled_here": compiled_here,
                  "qpos": backend.qpos.tolist(), "qvel": backend.qvel.tolist()}))
"""


def compile_ahead_run(
    cache: Path, workers: str | None, device: str = "cpu", processes: str | None = None
) -> dict:
    """A fresh process with the kernel cache ``cache``: build a backend (a randomized mass) on ``device`` with
    ``$SIMCORE_COMPILE_WORKERS=workers`` and ``$SIMCORE_COMPILE_PROCESSES=processes`` (None: unset), then step it
    three times, noting every Warp module that
    had to be compiled or loaded outside the compile-ahead, while the backend was built and during the steps, and
    the modules in the cache after the build (``cached``) and after the steps (``cached_after``)."""
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for name, value in (("SIMCORE_COMPILE_WORKERS", workers), ("SIMCORE_COMPILE_PROCESSES", processes)):
        env.pop(name, None)
        if value is not None:
            env[name] = value
    result = subprocess.run(
        [sys.executable, "-c", COMPILE_AHEAD, str(cache), device],
        capture_output=True, text=True, env=env, cwd=str(Path(__file__).parent), timeout=900, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout.splitlines()[-1])  # after Warp's own start-up lines


@pytest.mark.slow
def test_compile_workers_compile_every_module_a_step_launches_when_the_backend_is_built(tmp_path):
    """With ``$SIMCORE_COMPILE_WORKERS`` the backend compiles every Warp module it launches, in its build (the
    derived constants of a randomized mass) and its steps, in one parallel batch found by a dry run, so nothing
    compiles one by one. A backend compiling lazily from the same kernel cache then adds nothing to it (every
    module it launches was compiled ahead, in the variant it asks for) and steps to the same bits."""
    ahead = compile_ahead_run(tmp_path / "cache", "2", processes="1")
    lazy = compile_ahead_run(tmp_path / "cache", "0")
    assert ahead["ahead"]["workers"] == 2 and "error" not in ahead["ahead"]
    assert ahead["compiled_while_built"] == ahead["compiled_in_dry_run"] == ahead["compiled_later"] == []
    # forked compile processes generated and compiled every module; the backend's process only loaded them
    assert ahead["ahead"]["built_in_processes"] == ahead["ahead"]["modules"] and ahead["compiled_here"] == []
    assert ahead["cached"] == ahead["cached_after"] >= ahead["ahead"]["modules"] >= 10  # all in the build
    assert lazy["ahead"] is None and len(lazy["compiled_later"]) >= 10  # MuJoCo Warp's model-sized kernels
    assert len(lazy["compiled_while_built"]) >= 3  # the derived constants' kernels and the first forward
    assert lazy["cached_after"] == ahead["cached_after"]  # the lazy backend found every module in the cache
    assert ahead["qpos"] == lazy["qpos"] and ahead["qvel"] == lazy["qvel"]
    assert lazy["qvel"] != [[0.0] * len(lazy["qvel"][0])] * 2  # the steps moved something


@pytest.mark.gpu
def test_on_cuda_the_backend_compiles_ahead_by_default_and_steps_the_same_bits(tmp_path):
    """Unset, ``$SIMCORE_COMPILE_WORKERS`` compiles ahead on a CUDA device: everything compiles in its parallel
    batches, none alone (the broadphase's occupancy query, which needs its module loaded, is answered in the
    first dry run with a placeholder and for real in the second), here with forked compile processes building
    every module (the parent, which holds a CUDA context, only loads them), and a backend compiling lazily from
    the same kernel cache adds nothing to it and steps to the same bits."""
    from simcore._src.mjwarp_backend import DEFAULT_COMPILE_WORKERS

    ahead = compile_ahead_run(tmp_path / "cache", None, "cuda", processes="1")
    lazy = compile_ahead_run(tmp_path / "cache", "0", "cuda")
    assert ahead["ahead"]["workers"] == min(DEFAULT_COMPILE_WORKERS, os.cpu_count() or 1)
    assert "error" not in ahead["ahead"]
    assert ahead["compiled_while_built"] == ahead["compiled_in_dry_run"] == ahead["compiled_later"] == []
    assert ahead["ahead"]["built_in_processes"] == ahead["ahead"]["modules"] and ahead["compiled_here"] == []
    assert ahead["cached"] == ahead["cached_after"]
    assert lazy["ahead"] is None and len(lazy["compiled_later"]) >= 10
    lazy_modules = " ".join(lazy["compiled_while_built"] + lazy["compiled_later"])
    assert "_nxn_broadphase" in lazy_modules  # the scene's broadphase asks an occupancy query
    assert lazy["cached_after"] == ahead["cached_after"]
    assert ahead["qpos"] == lazy["qpos"] and ahead["qvel"] == lazy["qvel"]


def test_a_dry_run_that_fails_is_recorded_and_the_backend_compiles_lazily(monkeypatch, caplog):
    import mujoco
    from simcore_scenes import SMALL_XML, cpu_config

    import simcore
    from simcore._src.mjwarp_backend import COMPILE_WORKERS_ENV, MjwarpBackend

    def broken(self):
        raise RuntimeError("no dry run here")

    monkeypatch.setenv(COMPILE_WORKERS_ENV, "2")
    monkeypatch.setattr(MjwarpBackend, "_every_launch", broken)
    model = mujoco.MjModel.from_xml_string(SMALL_XML)
    backend = simcore.make_backend("mjwarp", model, cpu_config(num_envs=2))
    assert backend.compile_ahead == {"workers": 2, "error": "RuntimeError: no dry run here"}
    assert "compiling a step, a reset and a forward ahead failed" in caplog.text
    backend.step()
    assert torch.isfinite(backend.qpos).all()


@warp.kernel(module="unique")
def _scale(values: warp.array(dtype=float)):
    i = warp.tid()
    values[i] = values[i] * 3.0


@warp.kernel(module="unique")
def _shift(values: warp.array(dtype=float)):
    i = warp.tid()
    values[i] = values[i] - 2.0


@pytest.mark.parametrize("child_fails", [False, True, "hangs"])
def test_compile_processes_build_into_the_cache_and_the_parent_compiles_what_they_could_not(
    tmp_path, restore_warp_cache, monkeypatch, caplog, child_fails
):
    """Forked children build the recorded modules into Warp's kernel cache and load none; the parent then loads
    them, compiling only what a child could not build (an error), or everything when the children stall."""
    import threading

    from simcore._src import warp_compile

    if not warp_compile.can_fork():
        pytest.skip("compile processes need fork")
    directory = simcore.set_kernel_cache_dir("mjwarp", tmp_path / "cache")
    cpu = warp.get_device("cpu")
    loads = [(kernel.module, cpu, None) for kernel in (_scale, _shift)]
    for module, _, _ in loads:
        module.unload()  # loaded nowhere in this process, whatever ran before
    real_compile = warp.Module._compile

    def fails_first(module, *args, **kwargs):
        if module is loads[0][0]:
            if child_fails == "hangs":
                threading.Event().wait()  # never set: this child stalls until the parent stops it
            raise RuntimeError("boom")
        return real_compile(module, *args, **kwargs)

    if child_fails:  # the children inherit the patch: the first module never builds in a child
        monkeypatch.setattr(warp.Module, "_compile", fails_first)
        monkeypatch.setattr(warp_compile, "STALL_TIMEOUT_S", 5.0)
    built = {False: 2, True: 1, "hangs": 0}[child_fails]
    assert warp_compile.build_in_processes(loads, 2) == built
    assert simcore.kernel_cache("mjwarp").modules == (
        2 if not child_fails else 1
    )  # built there, loaded nowhere
    assert all((cpu.context, module.options["block_dim"]) not in module.execs for module, _, _ in loads)
    assert ("did not build in compile processes" in caplog.text) == (child_fails is True)
    assert ("compile processes failed, compiling in threads instead: TimeoutError" in caplog.text) == (
        child_fails == "hangs"
    )
    compiled_here = []

    def compile_here(module, *args, **kwargs):
        done = real_compile(module, *args, **kwargs)
        compiled_here.extend([module.name] if done else [])
        return done

    monkeypatch.setattr(warp.Module, "_compile", compile_here)
    warp_compile.compile_modules(loads, 1)  # loads both; compiles only what the processes left
    assert compiled_here == ([loads[0][0].name] if child_fails else [])
    values = warp.full(3, 1.0, dtype=float, device="cpu")
    warp.launch(_scale, dim=3, inputs=[values], device="cpu")
    warp.launch(_shift, dim=3, inputs=[values], device="cpu")
    assert values.numpy().tolist() == [1.0] * 3
    assert directory.is_dir()


def test_the_dry_run_leaves_warp_as_it_found_it():
    import warp as wp

    from simcore._src.warp_compile import modules_launched_by

    before = (wp.Module.load, wp.capture_while, wp.capture_if, wp.get_suggested_block_size)
    for placeholder_answers in (True, False):
        with pytest.raises(ValueError, match="inside"):
            modules_launched_by(lambda: (_ for _ in ()).throw(ValueError("inside")), placeholder_answers)
    assert (wp.Module.load, wp.capture_while, wp.capture_if, wp.get_suggested_block_size) == before


def test_compile_workers_default_by_device_and_refuse_what_is_not_a_count(monkeypatch):
    from simcore._src.mjwarp_backend import COMPILE_WORKERS_ENV, DEFAULT_COMPILE_WORKERS, compile_workers

    monkeypatch.setenv(COMPILE_WORKERS_ENV, "")
    assert compile_workers(cuda=False) == 0  # Warp's CPU device: off unless asked
    assert compile_workers(cuda=True) == min(DEFAULT_COMPILE_WORKERS, os.cpu_count() or 1)
    monkeypatch.setenv(COMPILE_WORKERS_ENV, "0")
    assert compile_workers(cuda=True) == 0
    monkeypatch.setenv(COMPILE_WORKERS_ENV, " 8 ")
    assert compile_workers(cuda=False) == 8
    for text in ["-1", "four", "2.5"]:
        monkeypatch.setenv(COMPILE_WORKERS_ENV, text)
        with pytest.raises(
            ValueError, match=r"\$SIMCORE_COMPILE_WORKERS=.* is not a worker count; set a whole"
        ):
            compile_workers()


def test_compile_processes_are_off_unless_asked_and_refuse_what_is_not_a_switch(monkeypatch):
    from simcore._src.mjwarp_backend import COMPILE_PROCESSES_ENV, compile_processes

    monkeypatch.delenv(COMPILE_PROCESSES_ENV, raising=False)
    assert compile_processes() is False
    monkeypatch.setenv(COMPILE_PROCESSES_ENV, " 1 ")
    assert compile_processes() is True
    monkeypatch.setenv(COMPILE_PROCESSES_ENV, "0")
    assert compile_processes() is False
    monkeypatch.setenv(COMPILE_PROCESSES_ENV, "yes")
    with pytest.raises(ValueError, match=r"\$SIMCORE_COMPILE_PROCESSES='yes': set it to 1"):
        compile_processes()
