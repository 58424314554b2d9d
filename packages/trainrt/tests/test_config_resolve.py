"""``trainrt.config.resolve``: the command line's config resolution, callable from Python without the CLI."""

import doctest
import subprocess
import sys

import pytest

import trainrt.config.resolve as resolve


@pytest.mark.slow
def test_a_config_resolves_from_python_without_typer_or_the_cli():
    code = (
        "import sys\n"
        "from trainrt.config import resolve_train_config\n"
        "cfg, how = resolve_train_config('flashsac', 'g1_walk_flat', None, ['algo.num_envs=4'], cuda_available=False)\n"
        "assert (cfg.algo.name, cfg.algo.num_envs, cfg.sim.backend, how['preset']) == "
        "('flashsac', 4, 'mujoco', 'cpu-demo'), (cfg, how)\n"
        "print(sorted(m for m in ('typer', 'click', 'trainrt.cli') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_module_docstring_example_runs():
    result = doctest.testmod(resolve, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 1 and result.failed == 0


def test_resume_is_a_training_resume_override(tmp_path):
    from trainrt.runner.manifest import write_resolved_config

    cfg, _ = resolve.resolve_train_config("sac", "g1_walk_flat", "mujoco", ["algo.num_envs=2"], "cpu-demo")
    write_resolved_config(tmp_path, cfg)
    by_keyword, how = resolve.resolve_train_config(resume=str(tmp_path), cuda_available=False)
    by_override, _ = resolve.resolve_train_config(
        overrides=[f"training.resume={tmp_path}"], cuda_available=False
    )
    assert by_keyword == by_override and by_keyword.algo.num_envs == 2
    assert how["preset"] == "resumed run config" and how["overrides"] == [f"training.resume={tmp_path}"]


def test_the_old_cli_names_are_the_config_modules():
    import trainrt.cli as cli

    assert cli.resolve_train_config is resolve.resolve_train_config
    assert cli.check_device_available is resolve.check_device_available
