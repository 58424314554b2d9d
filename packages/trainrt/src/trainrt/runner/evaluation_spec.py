"""What a task's evaluation declares (``trainrt eval``): its config changes, scenarios, metrics and horizon.

A task registers ``evaluation=`` (``trainrt.tasks.registry``), a factory of an ``EvaluationSpec``; the runner
(``trainrt.runner.evaluate``) runs any spec the same way: one env of ``num_envs`` rows per scenario, one
deterministic rollout, each metric averaged over the steps a row was still running.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainrt.config.schema import NEVER_S


@dataclass(frozen=True)
class EvalScenario:
    """One block of rows of an evaluation.

    Attributes:
        name: the scenario's key in the result.
        facts: copied into the scenario's result ahead of its metrics (e.g. the walk's ``command``).
    """

    name: str
    facts: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EvaluationSpec:
    """A task's evaluation.

    Attributes:
        config: ``TrainConfig -> TrainConfig``: the run's config with the evaluation's changes (pushes off,
            pinned commands...), usually through ``with_task_changes``.
        scenarios: the scenarios, all run at once in blocks of rows, in this order.
        metrics: name -> ``env -> (num_envs,)`` per step; ``action_saturation`` is always added last.
        horizon: ``(env, options) -> control steps`` of the rollout when ``--steps`` is not given.
        options: option name -> what it does: the CLI options (``commands``, ``horizon_s``) the evaluation
            takes; ``trainrt eval`` refuses any other one it is given.
        scenario_option: the option that selects a subset of ``scenarios`` by name (None: none does).
        setup: ``(env, scenarios, rows_per_scenario)`` after the reset, before the first step (None: nothing).
        result: ``(env, horizon_steps, rows) -> dict``, the JSON body from each scenario's row
            (facts then metrics) by name (None: ``{"scenarios": rows}``).
        per_second: also record each scenario's metrics and running fraction over every second of the
            rollout (its row's ``per_second``; ``trainrt report`` draws them).
    """

    config: Callable[[Any], Any]
    scenarios: tuple[EvalScenario, ...]
    metrics: Mapping[str, Callable[[Any], Any]]
    horizon: Callable[[Any, Mapping[str, Any]], int]
    options: Mapping[str, str] = field(default_factory=dict)
    scenario_option: str | None = None
    setup: Callable[[Any, Sequence[EvalScenario], int], None] | None = None
    result: Callable[[Any, int, dict[str, dict[str, Any]]], dict[str, Any]] | None = None
    per_second: bool = False

    def select(self, names: Sequence[str] | None) -> tuple[EvalScenario, ...]:
        """The scenarios named by ``names`` in that order (None: all); ValueError naming the valid ones."""
        if names is None:
            return self.scenarios
        by_name = {s.name: s for s in self.scenarios}
        unknown = [name for name in names if name not in by_name]
        if unknown or not names:
            raise ValueError(
                f"unknown evaluation {self.scenario_option or 'scenarios'} {unknown}; valid: {list(by_name)}"
            )
        return tuple(by_name[name] for name in names)


def with_task_changes(cfg: Any, changes: Mapping[str, Any], **fields: Any) -> Any:
    """``cfg`` with evaluation changes merged over its task section and validated like any override."""
    from trainrt.tasks.term_overrides import merge_term_overrides

    task = cfg.task.model_dump()
    for section, overrides in changes.items():
        task[section] = merge_term_overrides(task.get(section, {}), overrides)
    task.update(fields)
    return cfg.model_copy(update={"task": type(cfg.task).model_validate(task)})


__all__ = ["NEVER_S", "EvalScenario", "EvaluationSpec", "with_task_changes"]
