"""The task registry: one ``register_task`` call per task, read by the CLI, the schema, the presets and eval."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainrt import cli
from trainrt.config import ALGO_NAMES, PRESETS, SIM_BACKEND_NAMES, TaskSection, preset
from trainrt.tasks import TASKS
from trainrt.tasks.registry import register_task, task_names, task_spec, unregister_task

BUILT_IN = ("g1_motion_tracking", "g1_walk_flat", "t1_walk_flat")


def test_the_built_in_tasks_register_a_preset_per_algorithm_and_an_evaluation():
    assert set(BUILT_IN) <= set(task_names())
    for name in BUILT_IN:
        spec = task_spec(name)
        assert spec.module == f"trainrt.tasks.{name}"
        assert set(spec.presets) == set(ALGO_NAMES)
        assert spec.evaluation_spec().scenarios, name
        assert TASKS[name] is spec.env_cfg_factory()
    assert set(PRESETS) >= {(a, t) for a in ALGO_NAMES for t in BUILT_IN}
    assert cli.DEFAULT_TASK in task_names()


def test_the_cli_offers_the_registered_tasks_algorithms_and_backends():
    assert {a.value for a in cli.Algo} == set(ALGO_NAMES)
    assert {s.value for s in cli.Sim} == set(SIM_BACKEND_NAMES)
    help_text = cli.TaskOpt.__metadata__[0].help
    assert all(name in help_text for name in task_names())


def test_listing_the_tasks_imports_no_torch_and_no_config():
    code = (
        "import sys, trainrt.cli; from trainrt.tasks.registry import task_names; task_names(); "
        "print(sorted(m for m in ('torch', 'mujoco', 'trainrt.config') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_an_unknown_task_names_the_registered_ones():
    with pytest.raises(ValueError, match=r"unknown task 'nope'; valid: .*g1_walk_flat"):
        task_spec("nope")
    with pytest.raises(ValueError, match="unknown task 'nope'"):
        TaskSection(name="nope")
    with pytest.raises(ValueError, match="no preset for algo 'sac' and task 'nope'; valid: sac/g1_"):
        preset("sac", "nope")


def test_a_task_registered_later_is_accepted_everywhere():
    from trainrt.tasks.g1_walk_flat.env_cfg import g1_walk_flat_env_cfg

    def sac_preset():
        cfg = preset("sac", "g1_walk_flat")
        return cfg.model_copy(update={"task": TaskSection(name="late_walk")})

    register_task(
        "late_walk",
        env_cfg=g1_walk_flat_env_cfg,
        presets={"sac": sac_preset},
        evaluation="trainrt.tasks.velocity.evaluation:walk_evaluation",
    )
    try:
        assert "late_walk" in task_names() and "late_walk" in TASKS
        assert TaskSection(name="late_walk").name == "late_walk"
        assert preset("sac", "late_walk").task.name == "late_walk"
        assert ("sac", "late_walk") in PRESETS and ("flashsac", "late_walk") not in PRESETS
        with pytest.raises(ValueError, match="valid: sac/late_walk"):
            preset("flashsac", "late_walk")
        with pytest.raises(ValueError, match="already registered by module"):
            register_task(
                "late_walk", env_cfg="x.y:z", presets={"sac": sac_preset}, evaluation="x.y:e", module="x.y"
            )
    finally:
        unregister_task("late_walk")
    assert "late_walk" not in task_names()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "Bad-Name"}, "lower_snake_case"),
        ({"presets": {}}, "no presets"),
        ({"env_cfg": 3}, "a callable or 'module:attr'"),
    ],
)
def test_register_task_refuses_malformed_registrations(kwargs, message):
    args = {"name": "fine_name", "env_cfg": "m:f", "presets": {"sac": "m:p"}, "evaluation": "m:e", **kwargs}
    name = args.pop("name")
    with pytest.raises(ValueError, match=message):
        register_task(name, **args)
    assert "fine_name" not in task_names()


def test_task_modules_from_the_environment_are_imported(tmp_path, monkeypatch):
    (tmp_path / "env_named_tasks.py").write_text(
        "from trainrt.tasks.registry import register_task\n"
        "register_task('env_named', env_cfg='m:f', presets={'sac': 'm:p'}, evaluation='m:e')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("TRAINRT_TASK_MODULES", "env_named_tasks")
    try:
        assert task_spec("env_named").module == "env_named_tasks"
    finally:
        unregister_task("env_named")
    monkeypatch.setenv("TRAINRT_TASK_MODULES", "no_such_module_here")
    with pytest.raises(ValueError, match="TRAINRT_TASK_MODULES names module 'no_such_module_here'"):
        task_names()
