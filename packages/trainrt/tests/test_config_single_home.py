"""One home per setting: a default is written once, and a preset names only what differs from it.

The learner's hyperparameters live in its config class (``SacConfig``, ``FlashSacConfig``), run and simulation
settings in the schema (``TrainingSection``, ``SimSection``), what all GPU presets change in
``trainrt.config.presets`` and what one task changes in ``trainrt/tasks/<task>/presets.py``. These tests fail
when a preset restates a value it would have anyway, when a preset module writes a default's value again, or
when a field's description is written in two places.
"""

import ast
import inspect
from pathlib import Path

import pytest
from pydantic import BaseModel

import trainrt
from trainrt.algos import FlashSacConfig, SacConfig
from trainrt.algos.agent import LEARNER_FIELD_DESCRIPTIONS
from trainrt.config import PRESETS, preset
from trainrt.config.presets import CPU_DEMO_CHANGES, CPU_DEMO_NETWORKS
from trainrt.config.schema import DistributedSection, SimSection, TrainingSection

SRC = Path(trainrt.__file__).parent
PRESET_MODULES = sorted([SRC / "config" / "presets.py", *SRC.glob("tasks/*/presets.py")])
"""The modules that build configs from the defaults (and so must not write a default's value again)."""

RELATIVE_TO_A_PRESET = {"cpu_demo_preset", "CPU_DEMO_CHANGES", "CPU_DEMO_NETWORKS"}
"""Functions and assignments whose values change a preset rather than the defaults (checked against the preset
by ``test_the_cpu_demo_changes_only_what_differs_from_the_canonical_preset``)."""

DEFAULT_HOMES: tuple[type[BaseModel], ...] = (
    SacConfig,
    FlashSacConfig,
    TrainingSection,
    SimSection,
    DistributedSection,
)
"""The classes whose field defaults are the one home of those settings."""

BUILDERS: dict[str, type[BaseModel]] = {
    "SacConfig": SacConfig,
    "sac_params": SacConfig,
    "sac": SacConfig,
    "FlashSacConfig": FlashSacConfig,
    "flashsac_params": FlashSacConfig,
    "flashsac": FlashSacConfig,
    "TrainingSection": TrainingSection,
    "gpu_training_section": TrainingSection,
    "SimSection": SimSection,
    "gpu_sim_section": SimSection,
    "DistributedSection": DistributedSection,
}
"""A call, function or ``{"<algo>": ...}`` entry that builds one of the classes -> that class."""

_NO_DEFAULT = object()


def _default(model: type[BaseModel], name: str) -> object:
    field = model.model_fields[name]
    if field.is_required():
        return _NO_DEFAULT
    return field.get_default(call_default_factory=True)


def _set_to_their_defaults(model: BaseModel, where: str) -> list[str]:
    """Dotted keys of ``model`` (recursively) that were set explicitly to the value they default to."""
    found = []
    for name in sorted(model.model_fields_set):
        value = getattr(model, name)
        if value == _default(type(model), name):
            found.append(f"{where}{name}={value!r}")
        elif isinstance(value, BaseModel):
            found += _set_to_their_defaults(value, f"{where}{name}.")
    return found


@pytest.mark.parametrize(("algo", "task"), sorted(PRESETS))
def test_a_preset_names_only_what_differs_from_the_defaults(algo, task):
    restated = _set_to_their_defaults(preset(algo, task), "")
    assert not restated, f"preset {algo}/{task} sets fields to their defaults (drop them): {restated}"


@pytest.mark.parametrize(("algo", "task"), sorted(PRESETS))
def test_the_cpu_demo_changes_only_what_differs_from_the_canonical_preset(algo, task):
    canonical = preset(algo, task)
    sections = {"algo": canonical.algo, "algo.params": canonical.algo.params, "training": canonical.training}
    changes = [(section, CPU_DEMO_CHANGES[section]) for section in CPU_DEMO_CHANGES]
    changes.append(("algo.params", CPU_DEMO_NETWORKS[algo]))
    same = [
        f"{section}.{key}={value!r}"
        for section, fields in changes
        for key, value in fields.items()
        if getattr(sections[section], key) == value
    ]
    assert not same, f"the CPU demo restates the {algo}/{task} preset's values (drop them): {same}"


def _literal(node: ast.AST) -> object:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NO_DEFAULT


def _targets(parents: dict[ast.AST, ast.AST], node: ast.AST, key: str) -> list[type[BaseModel]]:
    """The classes a keyword or dict entry ``key`` at ``node`` sets a field of: the nearest enclosing builder
    call, ``{"<algo>": ...}`` entry or builder function; else every class with a field ``key``."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.FunctionDef) and parent.name in RELATIVE_TO_A_PRESET:
            return []
        if isinstance(parent, ast.AnnAssign | ast.Assign):
            targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
            if any(isinstance(t, ast.Name) and t.id in RELATIVE_TO_A_PRESET for t in targets):
                return []
        if isinstance(parent, ast.Call):
            func = parent.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
            if name in BUILDERS:
                return [BUILDERS[name]]
        if isinstance(parent, ast.Dict):
            for k, v in zip(parent.keys, parent.values, strict=True):
                if v is child and isinstance(k, ast.Constant) and k.value in BUILDERS:
                    return [BUILDERS[k.value]]
        if isinstance(parent, ast.FunctionDef) and parent.name in BUILDERS:
            return [BUILDERS[parent.name]]
        child, parent = parent, parents.get(parent)
    return [model for model in DEFAULT_HOMES if key in model.model_fields]


def _defaults_written_again(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    parents = {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}
    entries: list[tuple[ast.AST, str, ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg is not None:
            entries.append((node, node.arg, node.value))
        elif isinstance(node, ast.Dict):
            entries += [
                (v, k.value, v)
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            ]
    found = []
    for node, key, value_node in entries:
        value = _literal(value_node)
        if value is _NO_DEFAULT:
            continue
        for model in _targets(parents, node, key):
            if key in model.model_fields and _default(model, key) == value:
                found.append(
                    f"{path.relative_to(SRC)}:{value_node.lineno} {key}={value!r} ({model.__name__}'s default)"
                )
    return found


@pytest.mark.parametrize("path", PRESET_MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_preset_module_writes_a_default_again(path):
    found = _defaults_written_again(path)
    assert not found, f"defaults written a second time (their home is the class): {found}"


def test_the_check_sees_a_default_written_twice(tmp_path):
    module = tmp_path / "presets.py"
    module.write_text(
        "REFERENCE = {'sac': {'tau': 0.125, 'gamma': 0.5}}\n"
        "def f():\n    return sac_params(batch_size=8192), gpu_training_section(seed=0, log_every=10)\n"
    )
    global SRC
    src, SRC = SRC, tmp_path
    try:
        found = _defaults_written_again(module)
    finally:
        SRC = src
    assert [item.split(" ", 1)[1] for item in found] == [
        "tau=0.125 (SacConfig's default)",
        "batch_size=8192 (SacConfig's default)",
        "seed=0 (TrainingSection's default)",
    ]


@pytest.mark.parametrize("model", [SacConfig, FlashSacConfig])
def test_each_learner_field_is_described_in_one_place(model):
    source = ast.parse(inspect.getsource(model))
    own = {
        node.target.id
        for node in ast.walk(source)
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and isinstance(node.value, ast.Call)
        and any(k.arg == "description" for k in node.value.keywords)
    }
    both = sorted(own & set(LEARNER_FIELD_DESCRIPTIONS))
    assert not both, f"{model.__name__} describes fields the shared table also describes: {both}"
    undescribed = [name for name, field in model.model_fields.items() if not field.description]
    assert not undescribed, f"{model.__name__} fields without a description: {undescribed}"
    unused = set(LEARNER_FIELD_DESCRIPTIONS) - set(SacConfig.model_fields) - set(FlashSacConfig.model_fields)
    assert not unused, f"descriptions of no field: {sorted(unused)}"
