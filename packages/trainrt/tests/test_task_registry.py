"""The names a task, algorithm or backend must be registered under agree everywhere they are listed."""

from __future__ import annotations

from trainrt import cli
from trainrt.config import ALGO_NAMES, SIM_BACKEND_NAMES, TASK_NAMES
from trainrt.config.presets import PRESETS
from trainrt.tasks import TASKS


def _missing(names: set[str], where: str, reference: set[str], reference_where: str) -> list[str]:
    return [f"{name!r} is in {reference_where} but not in {where}" for name in sorted(reference - names)]


def test_every_task_is_registered_in_the_schema_the_cli_and_the_presets():
    tasks, schema, choices = set(TASKS), set(TASK_NAMES), {t.value for t in cli.Task}
    problems = (
        _missing(schema, "config/schema.py TaskName", tasks, "trainrt.tasks.TASKS")
        + _missing(tasks, "trainrt.tasks.TASKS", schema, "config/schema.py TaskName")
        + _missing(choices, "cli.py Task", schema, "config/schema.py TaskName")
        + _missing(schema, "config/schema.py TaskName", choices, "cli.py Task")
    )
    for algo in ALGO_NAMES:
        preset_tasks = {task for a, task in PRESETS if a == algo}
        problems += _missing(
            preset_tasks, f"config/presets.py PRESETS for {algo!r}", tasks, "trainrt.tasks.TASKS"
        )
    assert not problems, "; ".join(problems)


def test_the_cli_offers_the_schemas_algorithms_and_backends():
    assert {a.value for a in cli.Algo} == set(ALGO_NAMES)
    assert {s.value for s in cli.Sim} == set(SIM_BACKEND_NAMES)
    assert set(PRESETS) == {(a, t) for a in ALGO_NAMES for t in TASK_NAMES}
