"""The compilers' caches of a run: ``$TRAINRT_CACHE_DIR`` points all three below one folder, a bad value is
refused before anything is written, and the summary and console say what the caches held before and after
warm-up, and how long each warm-up phase took."""

from __future__ import annotations

import os

import pytest
import torch
import warp
from test_runner_train import tiny_config

from trainrt.runner import OffPolicyRunner, load_run_summary
from trainrt.runner.compile_cache import (
    CACHE_DIR_ENV,
    INDUCTOR_ENV,
    TRITON_ENV,
    CacheDirError,
    cache_contents,
    compile_cache_note,
    compile_cache_record,
    point_compile_caches,
    resolve_cache_dir,
)

WARM_UP_PHASES = ["set_up", "reset", "first_steps", "collector_capture", "learner_capture", "first_updates"]
"""The warm-up phases of a CPU run, in order (``replay_sample_compile`` runs only on CUDA)."""


@pytest.fixture
def compiler_env(monkeypatch):
    """The compilers' variables as they were, and Warp's cache folder, restored after the test."""
    for name in (CACHE_DIR_ENV, INDUCTOR_ENV, TRITON_ENV):
        monkeypatch.delenv(name, raising=False)
    warp.init()
    warp_dir = warp.config.kernel_cache_dir
    yield monkeypatch
    warp.config.kernel_cache_dir = warp_dir


def test_unset_or_empty_means_the_compilers_defaults():
    assert resolve_cache_dir({}) is None
    assert resolve_cache_dir({CACHE_DIR_ENV: "  "}) is None


def test_a_folder_is_created_and_used(tmp_path):
    wanted = tmp_path / "shared" / "cache"
    assert resolve_cache_dir({CACHE_DIR_ENV: str(wanted)}) == wanted.resolve()
    assert wanted.is_dir()


def test_a_file_or_a_folder_that_cannot_be_made_is_refused_naming_the_variable_and_the_fix(tmp_path):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    with pytest.raises(CacheDirError, match=rf"TRAINRT_CACHE_DIR={a_file} is a file, not a folder: point"):
        resolve_cache_dir({CACHE_DIR_ENV: str(a_file)})
    below_a_file = a_file / "cache"
    with pytest.raises(
        CacheDirError,
        match=rf"TRAINRT_CACHE_DIR={below_a_file}: the folder cannot be created .*unset it",
    ):
        resolve_cache_dir({CACHE_DIR_ENV: str(below_a_file)})


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes in any folder")
def test_a_folder_this_user_cannot_write_is_refused(tmp_path):
    read_only = tmp_path / "read_only"
    read_only.mkdir(mode=0o500)
    try:
        with pytest.raises(
            CacheDirError, match=r"TRAINRT_CACHE_DIR=.*: this user cannot write in the folder"
        ):
            resolve_cache_dir({CACHE_DIR_ENV: str(read_only)})
    finally:
        read_only.chmod(0o700)


def test_every_compiler_is_pointed_below_the_folder(tmp_path, compiler_env):
    compiler_env.setenv(INDUCTOR_ENV, "/elsewhere/inductor")  # the one folder replaces a variable set before
    assert point_compile_caches("mjwarp", {CACHE_DIR_ENV: str(tmp_path)}) == tmp_path.resolve()
    assert os.environ[INDUCTOR_ENV] == str(tmp_path / "inductor")
    assert os.environ[TRITON_ENV] == str(tmp_path / "triton")
    assert warp.config.kernel_cache_dir == str(tmp_path / "warp" / warp.config.version)
    (tmp_path / "triton" / "kernel_a").mkdir(parents=True)
    (tmp_path / "inductor" / "fxgraph").mkdir(parents=True)
    (tmp_path / "inductor" / "fxgraph" / "entry").write_text("")
    contents = cache_contents("mjwarp")
    assert contents == {
        "warp": (tmp_path / "warp" / warp.config.version, 0),
        "inductor": (tmp_path / "inductor", 1),
        "triton": (tmp_path / "triton", 1),
    }


def test_unset_leaves_the_compilers_where_they_were(compiler_env):
    before = warp.config.kernel_cache_dir
    assert point_compile_caches("mjwarp", {}) is None
    assert INDUCTOR_ENV not in os.environ and TRITON_ENV not in os.environ
    assert warp.config.kernel_cache_dir == before
    contents = cache_contents("mujoco")
    assert contents["warp"] == (None, None)  # the CPU backend compiles nothing
    assert contents["inductor"][0].name.startswith("torchinductor_")


def test_the_record_and_the_console_say_what_was_reused_and_what_is_new(tmp_path):
    before = {
        "warp": (tmp_path / "w", 212),
        "inductor": (tmp_path / "i", 1000),
        "triton": (tmp_path / "t", 0),
    }
    after = {"warp": (tmp_path / "w", 212), "inductor": (tmp_path / "i", 1204), "triton": (tmp_path / "t", 3)}
    running = compile_cache_record(tmp_path, before, None)
    assert running["warp"] == {"dir": str(tmp_path / "w"), "unit": "modules", "before": 212, "after": None}
    record = compile_cache_record(tmp_path, before, after)
    assert record["root"] == str(tmp_path)
    assert compile_cache_note(record) == (
        f"compile caches ({tmp_path}): warp 212 modules (0 new), inductor 1,204 files (204 new), "
        "triton 3 kernels (3 new)"
    )
    unset = compile_cache_record(None, before, after)
    assert "compilers' defaults, set TRAINRT_CACHE_DIR to share" in compile_cache_note(unset)


def test_a_bad_cache_folder_is_refused_before_the_run_directory_is_written(tmp_path, compiler_env):
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    compiler_env.setenv(CACHE_DIR_ENV, str(a_file))
    run_dir = tmp_path / "run"
    with pytest.raises(CacheDirError, match=r"TRAINRT_CACHE_DIR=.* is a file, not a folder"):
        OffPolicyRunner(tiny_config(run_dir), log=lambda line: None)
    assert not run_dir.exists()


def test_a_run_records_its_caches_and_warm_up_phases_and_says_them_on_the_console(tmp_path, compiler_env):
    cache = tmp_path / "cache"
    compiler_env.setenv(CACHE_DIR_ENV, str(cache))
    lines: list[str] = []
    OffPolicyRunner(tiny_config(tmp_path / "run"), log=lines.append).run()
    summary = load_run_summary(tmp_path / "run")
    record = summary.compile_cache
    assert record is not None and record.root == str(cache.resolve())
    assert record.inductor.dir == str(cache.resolve() / "inductor") and record.inductor.unit == "files"
    assert record.triton.dir == str(cache.resolve() / "triton")
    assert record.warp.dir is None and record.warp.before is None  # CPU MuJoCo compiles no kernels
    assert record.inductor.before == 0 and record.inductor.after is not None
    assert list(summary.warmup_phases_sec) == WARM_UP_PHASES
    assert sum(summary.warmup_phases_sec.values()) == pytest.approx(summary.warmup_time_sec, abs=0.05)
    # One line as each phase starts, with the seconds since set-up began, then the caches after warm-up.
    phase_lines = [line for line in lines if line.startswith("warm-up: ")]
    assert [line.split(" ... ")[0] for line in phase_lines] == [
        "warm-up: resetting the envs",
        "warm-up: first physics steps, filling the replay",
        "warm-up: capturing the collector's steps",
        "warm-up: capturing the learner update",
        "warm-up: first learner updates",
    ]
    seconds = [float(line.rsplit(" ... ", 1)[1].removesuffix("s")) for line in phase_lines]
    assert seconds == sorted(seconds) and seconds[-1] <= summary.warmup_time_sec + 0.05  # printed to 0.1 s
    done = next(i for i, line in enumerate(lines) if line.startswith("warm-up done in"))
    assert lines[done + 1].startswith(f"compile caches ({cache.resolve()}): inductor ")
    assert lines.index(phase_lines[-1]) < done


def test_play_eval_and_bench_point_the_caches_where_they_build_their_env(tmp_path, compiler_env):
    from trainrt.runner.build import build_env

    compiler_env.setenv(CACHE_DIR_ENV, str(tmp_path / "cache"))
    build_env(tiny_config(tmp_path / "run"), num_envs=1)  # what play, eval and bench build through
    assert os.environ[INDUCTOR_ENV] == str((tmp_path / "cache").resolve() / "inductor")
    assert os.environ[TRITON_ENV] == str((tmp_path / "cache").resolve() / "triton")


def test_a_mjwarp_run_says_before_building_its_envs_that_warp_compiles_there(tmp_path, monkeypatch):
    """Building MuJoCo Warp envs compiles the physics kernels on a fresh machine (tens of seconds): the console
    says so before the pause, with the seconds since set-up began; a CPU MuJoCo run has no such line."""
    import trainrt.runner.off_policy_runner as runner_module

    class Stop(Exception):
        pass

    def stop(cfg, **kwargs):
        raise Stop

    monkeypatch.setattr(runner_module, "build_env", stop)
    for backend, expected in (("mjwarp", 1), ("mujoco", 0)):
        lines: list[str] = []
        cfg = tiny_config(tmp_path / backend, "sac", "g1_walk_flat", f"sim.backend={backend}")
        with pytest.raises(Stop):
            OffPolicyRunner(cfg, log=lines.append).run()
        said = [
            line for line in lines if line.startswith("set-up: building the envs; on a fresh machine Warp")
        ]
        assert len(said) == expected, lines
        if said:
            assert float(said[0].rsplit(" ... ", 1)[1].removesuffix("s")) >= 0.0


@pytest.mark.parametrize(
    ("compile_ahead", "says_warp"),
    [
        (None, True),
        ({"workers": 16, "error": "RuntimeError: x"}, True),
        ({"workers": 16, "modules": 59}, False),
    ],
)
def test_the_first_steps_say_warp_compiles_there_unless_set_up_compiled_it_ahead(compile_ahead, says_warp):
    from types import SimpleNamespace

    from trainrt.config import cpu_demo_preset
    from trainrt.runner.warm_up import first_steps_note

    cfg = cpu_demo_preset("sac", "g1_walk_flat", "mjwarp")
    backend = SimpleNamespace(diagnostics=lambda: SimpleNamespace(compile_ahead=compile_ahead))
    env = SimpleNamespace(backend=backend, device=torch.device("cpu"))
    note = first_steps_note(cfg, env)
    assert note.startswith("first physics steps, filling the replay")
    assert ("Warp compiles the physics kernels" in note) == says_warp
