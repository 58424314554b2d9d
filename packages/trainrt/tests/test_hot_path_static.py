"""Static hot-path check: no host syncs or tensor-valued branches in code the hot entry points reach.

Starts at ``trainrt.hotpath.HOT_ENTRY_POINTS`` (env step, managers, terms, collector, learner update, replay)
and follows same-module calls; ``@cold_path`` functions are skipped. Flags ``.item()``, ``.cpu()``,
``.tolist()``, ``.numpy()``, ``nonzero``, ``masked_select``, one-argument ``torch.where``, any ``bool(...)``,
and ``if``/``while``/``assert``/conditional expressions whose test calls a tensor reduction or predicate
(``.any()``, ``.all()``, ``torch.*`` ...), and ``int()``/``float()`` of such calls. Names cannot be typed
statically, so branches on plain names, attributes and comparisons are trusted (config flags, shapes,
``is None``).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from trainrt.hotpath import (
    EVERY_FUNCTION,
    HOT_ENTRY_POINTS,
    hot_functions,
    missing_entry_points,
    scan_source,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "trainrt"
# Every module of these folders runs per step, so each must be listed among the hot entry points.
PER_STEP_DIRS = ("envs", "managers", "mdp", "replay")
# Config, constructors, checkpoint-time state copies, descriptions and types only.
NOT_PER_STEP = {
    "envs/compiled_step_math.py",  # the compile switches: set-up only
    "envs/env_cfg.py",
    "envs/env_description.py",
    "envs/env_state.py",
    "managers/env_protocol.py",
    "mdp/name_matching.py",
    "mdp/state_layout.py",
}


def test_every_per_step_module_has_entry_points():
    modules = {
        p.relative_to(SRC).as_posix()
        for d in PER_STEP_DIRS
        for p in (SRC / d).glob("*.py")
        if p.name != "__init__.py"
    }
    modules |= {p.relative_to(SRC).as_posix() for p in SRC.glob("tasks/*/mdp.py")}
    unlisted = sorted(modules - set(HOT_ENTRY_POINTS) - NOT_PER_STEP)
    assert unlisted == [], f"add these modules to trainrt.hotpath.HOT_ENTRY_POINTS: {unlisted}"


@pytest.mark.parametrize("module", sorted(HOT_ENTRY_POINTS))
def test_hot_path_has_no_sync_calls(module: str):
    path = SRC / module
    assert path.is_file(), f"HOT_ENTRY_POINTS names {module}, which does not exist"
    source, entry_points = path.read_text(), HOT_ENTRY_POINTS[module]
    assert missing_entry_points(source, entry_points) == [], f"{module}: update HOT_ENTRY_POINTS"
    assert hot_functions(ast.parse(source), entry_points), f"{module}: no hot function reached"
    violations = scan_source(source, module, entry_points)
    assert violations == [], "hot-path violations (move the sync out of the step, or mark a function that "
    "never runs per step with @cold_path):\n" + "\n".join(violations)


def test_the_env_step_reaches_the_reset_of_finished_rows():
    source = (SRC / "envs/manager_based_rl_env.py").read_text()
    reached = hot_functions(ast.parse(source), HOT_ENTRY_POINTS["envs/manager_based_rl_env.py"])
    assert {"ManagerBasedRlEnv.step", "ManagerBasedRlEnv._reset_rows"} <= set(reached)


PLANTED = {
    "item": "def f(x):\n    return x.sum().item()\n",
    "cpu": "def f(x):\n    return x.cpu()\n",
    "tolist": "def f(x):\n    return x.tolist()\n",
    "numpy": "def f(x):\n    return x.numpy()\n",
    "nonzero": "def f(x):\n    return x.nonzero()\n",
    "torch_nonzero": "import torch\ndef f(x):\n    return torch.nonzero(x)\n",
    "masked_select": "def f(x, m):\n    return x.masked_select(m)\n",
    "where_one_arg": "import torch\ndef f(m):\n    return torch.where(m)\n",
    "bool": "def f(x):\n    return bool(x)\n",
    "if_any": "def f(x):\n    if x.any():\n        return 1\n    return 0\n",
    "if_torch": "import torch\ndef f(x):\n    if torch.isnan(x).all():\n        return 1\n",
    "while_compare": "def f(x):\n    while (x > 0).all():\n        x = x - 1\n",
    "ifexp": "def f(x):\n    return 1 if x.sum() > 0 else 0\n",
    "float_of_tensor": "def f(x):\n    return float(x.mean())\n",
    "assert": "def f(x):\n    assert x.isfinite().all()\n",
    "method": "class A:\n    def step(self):\n        if self.buf.any():\n            pass\n",
}


@pytest.mark.parametrize("name", sorted(PLANTED))
def test_scanner_flags_planted_violation(name: str):
    assert scan_source(PLANTED[name]), f"scanner missed planted violation {name!r}"


def test_scanner_allows_cold_path_and_static_branches():
    source = textwrap.dedent(
        """
        import torch
        from trainrt.hotpath import cold_path

        @cold_path
        def publish(x):
            if x.any():
                return x.sum().item()
            return x.cpu().tolist()

        class M:
            @cold_path
            def __init__(self, cfg):
                self.ids = cfg.ids.tolist()

            def step(self, x, mask):
                if self.noise is not None and self.history_length > 0:
                    x = torch.where(mask, x, 0.0)
                if torch.compiler.is_compiling():  # a Python bool, no tensor
                    return x
                return x
        """
    )
    assert scan_source(source) == []
    assert scan_source("import torch\ndef f(x):\n    if torch.is_nonzero(x):\n        return 1\n") != []


def test_scanner_flags_inside_nested_hot_function_of_cold_module():
    source = "def outer(x):\n    def inner():\n        return x.item()\n    return inner\n"
    assert len(scan_source(source)) == 1


FOLLOWED = textwrap.dedent(
    """
    from trainrt.hotpath import cold_path

    def helper(x):
        return x.item()

    def unused_factory(x):
        return x.tolist()

    @cold_path
    def publish(x):
        return x.cpu()

    class Term:
        def __call__(self, x):
            publish(x)
            return self._inner(x) + self.level

        def _inner(self, x):
            return helper(x)

        @property
        def level(self):
            return float(x.mean())
    """
)


def test_scan_follows_calls_and_attribute_reads_from_the_entry_points():
    violations = scan_source(FOLLOWED, "m.py", {"Term.__call__"})
    assert [v.split(": ", 1)[1] for v in violations] == [
        ".item() synchronizes with the device",
        "float() of a tensor expression synchronizes",
    ], violations
    reached = hot_functions(ast.parse(FOLLOWED), {"__call__"})
    assert reached == ["Term.__call__", "Term._inner", "Term.level", "helper"]


def test_code_no_entry_point_reaches_needs_no_marker():
    assert scan_source(FOLLOWED, "m.py", {"unused_factory"}) != []
    assert scan_source(FOLLOWED, "m.py", {"publish"}) == []
    assert missing_entry_points(FOLLOWED, {"Term.__call__", "gone"}) == ["gone"]
    assert missing_entry_points(FOLLOWED, EVERY_FUNCTION) == []
