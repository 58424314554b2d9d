"""The command line and Python resolve the same config: ``trainrt config show --json`` (what ``train`` would run)
against ``trainrt.config.resolve_train_config``, for a new run, a resume with an override it may change, and the
overrides a resume or any run refuses; and ``trainrt.config`` imports no command-line code."""

import json
import subprocess
import sys

import pytest

from trainrt.config import OverrideError, load_resolved_config, resolve_train_config, rollout_config
from trainrt.runner.manifest import write_resolved_config

FRESH = [
    "algo.num_envs=8",
    "algo.params.batch_size=64",
    "training.final_eval=false",
    "task.rewards.alive.weight=0.5",
]


def config_show(*args: str, cwd) -> subprocess.CompletedProcess:
    """``python -m trainrt config show --json ARGS`` (the CPU demo preset unless ARGS say otherwise)."""
    return subprocess.run(
        [sys.executable, "-m", "trainrt", "config", "show", "--json", *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=cwd,
    )


def as_json(cfg) -> dict:
    """``cfg`` as ``config show --json`` prints it, read back."""
    return json.loads(cfg.model_dump_json(indent=2))


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory):
    """A run directory holding only the ``config.json`` of a CPU-demo SAC walking run (what a resume reads)."""
    run_dir = tmp_path_factory.mktemp("parity") / "sac_run"
    cfg, _ = resolve_train_config("sac", "g1_walk_flat", "mujoco", ["algo.num_envs=2"], "cpu-demo")
    write_resolved_config(run_dir, cfg)
    return run_dir


def test_a_new_run_with_a_preset_and_overrides(tmp_path):
    args = ["--algo", "flashsac", "--task", "g1_walk_flat", "--preset", "cpu-demo"]
    shown = config_show(*args, *FRESH, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    cfg, how = resolve_train_config("flashsac", "g1_walk_flat", None, FRESH, "cpu-demo", cuda_available=False)
    assert json.loads(shown.stdout) == as_json(cfg)
    assert (cfg.algo.num_envs, cfg.sim.backend, how["preset"]) == (8, "mujoco", "cpu-demo")
    assert cfg.task.rewards["alive"]["weight"] == 0.5


def test_a_resume_with_an_override_it_may_change(tmp_path, sac_run):
    overrides = [f"training.resume={sac_run}", "algo.max_iterations=7"]
    shown = config_show("--sim", "mjwarp", *overrides, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    cfg, how = resolve_train_config(sim="mjwarp", overrides=overrides, cuda_available=False)
    assert json.loads(shown.stdout) == as_json(cfg)
    stored = load_resolved_config(sac_run)
    assert how["preset"] == "resumed run config"
    # The stored run's settings, with what the command changes: the iterations, the backend, where it writes.
    assert cfg.algo.max_iterations == 7 and cfg.sim.backend == "mjwarp"
    assert (cfg.algo.name, cfg.algo.num_envs, cfg.algo.params) == (
        stored.algo.name,
        stored.algo.num_envs,
        stored.algo.params,
    )
    assert (cfg.training.run_dir, cfg.training.overwrite, cfg.training.resume) == (None, False, str(sac_run))


@pytest.mark.parametrize(
    ("args", "algo", "overrides", "error"),
    [
        # a resume keeps the run's learner: another --algo is refused
        (["--algo", "flashsac"], "flashsac", [], ValueError),
        # the learner is --algo's, never an override's, resumed or not
        ([], None, ["algo.name=flashsac"], OverrideError),
    ],
    ids=["resume-with-another-algo", "reserved-key"],
)
def test_a_refused_resume_override_fails_alike(tmp_path, sac_run, args, algo, overrides, error):
    overrides = [f"training.resume={sac_run}", *overrides]
    shown = config_show(*args, *overrides, cwd=tmp_path)
    with pytest.raises(error) as raised:
        resolve_train_config(algo=algo, overrides=overrides, cuda_available=False)
    assert shown.returncode == 2 and shown.stdout == ""
    assert shown.stderr.strip() == f"error: {raised.value}"


def test_a_rollout_changes_only_the_backend_and_the_solver_limit(sac_run):
    stored = load_resolved_config(sac_run)
    same = rollout_config(sac_run, sim=stored.sim.backend)
    assert same == stored
    other = rollout_config(sac_run, sim="mjwarp", solver_iterations=3)
    assert (other.sim.backend, other.sim.device, other.sim.solver_iterations) == ("mjwarp", None, 3)
    assert other.model_copy(update={"sim": stored.sim}) == stored


def test_the_config_package_imports_no_command_line_code(sac_run):
    code = (
        "import sys\n"
        "import trainrt.config, trainrt.config.resolve, trainrt.config.run_config\n"
        "cfg, _ = trainrt.config.resolve_train_config('sac', 'g1_walk_flat', 'mujoco', ['algo.num_envs=4'], "
        "'cpu-demo')\n"
        f"trainrt.config.run_config.rollout_config({str(sac_run)!r}, sim='mjwarp')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click', 'rich') "
        "or m.startswith('trainrt.cli')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300
    )
    assert out.stdout.strip() == "[]", out.stdout
