"""The task registry: one ``register_task`` call per task declares everything the runtime needs of it.

A task registers, by name, its env config factory, its learner presets per algorithm and its evaluation
(what ``trainrt eval`` runs). The CLI's ``--task`` help, the config schema's ``task.name`` check,
``config.presets.preset``, ``trainrt eval`` and ``docs/tasks.md`` read the registry, so a new task touches
no other file.

This module imports nothing heavy: a reference may be a callable or a ``"module:attr"`` string that is
imported on first use, so listing the tasks (``trainrt --help``) imports no torch.

Discovery runs on the first lookup: every subpackage of ``trainrt.tasks`` is imported (its ``__init__``
makes the registration), then every module named in ``$TRAINRT_TASK_MODULES`` (comma-separated, e.g.
``TRAINRT_TASK_MODULES=my_tasks.stairs``), which is how a task outside this package is loaded. The variable
is read again on every lookup, so a module named after the first lookup is still imported.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

Ref = Callable[..., Any] | str
"""A callable, or ``"module:attr"`` naming one (imported on first use)."""

TASK_MODULES_ENV = "TRAINRT_TASK_MODULES"
"""Environment variable: comma-separated modules to import for their ``register_task`` calls."""

DEFAULT_TASK = "g1_walk_flat"
"""The task of a new run that names none (``--task``; ``trainrt.config.resolve``)."""

DEFAULT_ALGO = "sac"
"""The learner of a new run that names none (``--algo``; ``trainrt.config.resolve``)."""

_NAME = re.compile(r"[a-z][a-z0-9_]*")


@dataclass(frozen=True)
class TaskSpec:
    """One registered task.

    Attributes:
        name: the task's name (``--task``, ``task.name``).
        env_cfg: ``() -> EnvCfg``, the task's env config factory.
        presets: algorithm name -> ``() -> TrainConfig``, the canonical preset of that learner on the task.
        evaluation: ``() -> EvaluationSpec`` (``trainrt.runner.evaluation_spec``): what ``trainrt eval`` runs.
        summary: one line for ``docs/tasks.md`` and ``--help`` (default: the env factory's docstring).
        module: the module that registered the task (the module that must be imported to find it again).
    """

    name: str
    env_cfg: Ref
    presets: Mapping[str, Ref]
    evaluation: Ref
    summary: str = ""
    module: str = ""
    _loaded: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def env_cfg_factory(self) -> Callable[[], Any]:
        """The env config factory (imported on first use)."""
        return self._load("env_cfg", self.env_cfg)

    def preset_factory(self, algo: str) -> Callable[[], Any]:
        """The preset factory of ``algo``; ValueError naming the algorithms the task has presets for."""
        if algo not in self.presets:
            raise ValueError(
                f"task {self.name!r} has no preset for algo {algo!r}; valid: {sorted(self.presets)}"
            )
        return self._load(f"preset:{algo}", self.presets[algo])

    def evaluation_spec(self) -> Any:
        """The task's ``EvaluationSpec`` (built once)."""
        if "evaluation_spec" not in self._loaded:
            self._loaded["evaluation_spec"] = self._load("evaluation", self.evaluation)()
        return self._loaded["evaluation_spec"]

    def _load(self, key: str, ref: Ref) -> Any:
        if key not in self._loaded:
            self._loaded[key] = resolve_ref(ref)
        return self._loaded[key]


_REGISTRY: dict[str, TaskSpec] = {}
_imported_modules: set[str] = set()
_discovered = False


def resolve_ref(ref: Ref) -> Any:
    """``ref`` itself when callable, else the attribute a ``"module:attr"`` string names."""
    if callable(ref):
        return ref
    module, sep, attr = ref.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"a task reference is a callable or 'module:attr', got {ref!r}")
    target: Any = importlib.import_module(module)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def register_task(
    name: str,
    *,
    env_cfg: Ref,
    presets: Mapping[str, Ref],
    evaluation: Ref,
    summary: str = "",
    module: str | None = None,
) -> TaskSpec:
    """Register a task under ``name`` (lower_snake_case) and return its ``TaskSpec``.

    ValueError for a malformed name, a task without presets, or a name another module registered already
    (the same module registering again, e.g. on reload, replaces its entry). ``module`` defaults to the
    caller's.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ValueError(f"task names are lower_snake_case, got {name!r}")
    if not presets:
        raise ValueError(f"task {name!r} registers no presets; give at least one algorithm's")
    for ref in (env_cfg, evaluation, *presets.values()):
        if not (callable(ref) or isinstance(ref, str)):
            raise ValueError(f"task {name!r}: a reference is a callable or 'module:attr', got {ref!r}")
    if module is None:  # the caller's module: the one a stored run needs imported again
        module = sys._getframe(1).f_globals.get("__name__", "")
    known = _REGISTRY.get(name)
    if known is not None and known.module != module:
        raise ValueError(f"task {name!r} is already registered by module {known.module!r}")
    spec = TaskSpec(
        name=name,
        env_cfg=env_cfg,
        presets=MappingProxyType(dict(presets)),
        evaluation=evaluation,
        summary=summary,
        module=module,
    )
    _REGISTRY[name] = spec
    return spec


def unregister_task(name: str) -> None:
    """Remove ``name`` from the registry (tests); no error when it is absent."""
    _REGISTRY.pop(name, None)


def _discover() -> None:
    """Import the built-in task folders once, and the modules of ``$TRAINRT_TASK_MODULES`` not yet imported."""
    global _discovered
    if not _discovered:
        _discovered = True
        import trainrt.tasks

        for info in pkgutil.iter_modules(trainrt.tasks.__path__):
            if info.ispkg:
                importlib.import_module(f"trainrt.tasks.{info.name}")
    for module in os.environ.get(TASK_MODULES_ENV, "").split(","):
        module = module.strip()
        if module and module not in _imported_modules:
            _imported_modules.add(module)
            try:
                importlib.import_module(module)
            except ImportError as err:
                _imported_modules.discard(module)
                raise ValueError(
                    f"{TASK_MODULES_ENV} names module {module!r}, which cannot be imported: {err}"
                ) from err


def task_names() -> tuple[str, ...]:
    """The registered task names, sorted."""
    _discover()
    return tuple(sorted(_REGISTRY))


def task_spec(name: str) -> TaskSpec:
    """The ``TaskSpec`` of ``name``; ValueError naming the registered tasks otherwise."""
    _discover()
    try:
        return _REGISTRY[name]
    except (KeyError, TypeError):
        raise ValueError(
            f"unknown task {name!r}; valid: {', '.join(sorted(_REGISTRY))} (a task from another module: "
            f"name the module in {TASK_MODULES_ENV})"
        ) from None


__all__ = [
    "TASK_MODULES_ENV",
    "Ref",
    "TaskSpec",
    "register_task",
    "resolve_ref",
    "task_names",
    "task_spec",
    "unregister_task",
]
