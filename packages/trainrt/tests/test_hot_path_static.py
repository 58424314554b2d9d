"""Static hot-path check: no host syncs or tensor-valued branches outside ``@cold_path`` functions.

Scans the env, managers, terms, tasks, algorithms, replay and runner with ``ast``. Flags ``.item()``, ``.cpu()``, ``.tolist()``,
``.numpy()``, ``nonzero``, ``masked_select``, one-argument ``torch.where``, any ``bool(...)``, and
``if``/``while``/``assert``/conditional expressions whose test calls a tensor reduction or predicate (``.any()``,
``.all()``, ``torch.*`` ...), and ``int()``/``float()`` of such calls. Names cannot be typed statically, so
branches on plain names, attributes and comparisons are trusted (config flags, shapes, ``is None``).
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "trainrt"
SCANNED_DIRS = ("managers", "envs", "mdp", "tasks", "algos", "replay", "runner")

SYNC_METHODS = {"item", "cpu", "tolist", "numpy"}
SYNC_CALLS = {"nonzero", "masked_select", "argwhere"}
# Methods whose result is a tensor that a branch would have to bring to the host.
TENSOR_PREDICATES = {
    "any", "all", "sum", "mean", "max", "min", "norm", "abs", "eq", "ne", "gt", "ge", "lt", "le",
    "isnan", "isinf", "isfinite", "equal", "allclose", "isclose", "count_nonzero",
}  # fmt: skip


def _is_cold(node: ast.AST) -> bool:
    for deco in getattr(node, "decorator_list", []):
        target = deco.func if isinstance(deco, ast.Call) else deco
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if name == "cold_path":
            return True
    return False


def _is_torch_call(call: ast.Call) -> bool:
    func = call.func
    while isinstance(func, ast.Attribute):
        func = func.value
        if isinstance(func, ast.Name) and func.id == "torch":
            return True
    return False


def _tensorish(expr: ast.AST) -> bool:
    """Whether an expression calls a tensor predicate/reduction method or any ``torch.*`` function."""
    for node in ast.walk(expr):
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Attribute) and node.func.attr in TENSOR_PREDICATES:
                return True
            if _is_torch_call(node):
                return True
    return False


class _Scanner(ast.NodeVisitor):
    def __init__(self, filename: str) -> None:
        self.filename = filename
        self.violations: list[str] = []

    def _flag(self, node: ast.AST, what: str) -> None:
        self.violations.append(f"{self.filename}:{getattr(node, 'lineno', '?')}: {what}")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if not _is_cold(node):
            self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
        if isinstance(func, ast.Attribute) and name in SYNC_METHODS:
            self._flag(node, f".{name}() synchronizes with the device")
        if name in SYNC_CALLS:
            self._flag(node, f"{name} has a data-dependent shape (host sync)")
        if name == "where" and isinstance(func, ast.Attribute) and len(node.args) + len(node.keywords) == 1:
            self._flag(node, "one-argument torch.where has a data-dependent shape (host sync)")
        if isinstance(func, ast.Name) and func.id == "bool":
            self._flag(node, "bool(...) in the hot path (a tensor would synchronize)")
        if (
            isinstance(func, ast.Name)
            and func.id in ("int", "float")
            and any(_tensorish(a) for a in node.args)
        ):
            self._flag(node, f"{func.id}() of a tensor expression synchronizes")
        self.generic_visit(node)

    def _check_test(self, node: ast.AST, test: ast.AST, kind: str) -> None:
        if _tensorish(test):
            self._flag(node, f"{kind} on a tensor value (host sync)")

    def visit_If(self, node: ast.If) -> None:
        self._check_test(node, node.test, "if")
        self.generic_visit(node)

    def visit_While(self, node: ast.While) -> None:
        self._check_test(node, node.test, "while")
        self.generic_visit(node)

    def visit_IfExp(self, node: ast.IfExp) -> None:
        self._check_test(node, node.test, "conditional expression")
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        self._check_test(node, node.test, "assert")
        self.generic_visit(node)


def scan_source(source: str, filename: str = "<snippet>") -> list[str]:
    """Return the hot-path violations in ``source``."""
    scanner = _Scanner(filename)
    scanner.visit(ast.parse(source, filename=filename))
    return scanner.violations


def _scanned_files() -> list[Path]:
    return sorted(p for d in SCANNED_DIRS if (SRC / d).is_dir() for p in (SRC / d).rglob("*.py"))


def test_scanned_tree_has_the_env_and_managers():
    names = {p.relative_to(SRC).as_posix() for p in _scanned_files()}
    assert "envs/manager_based_rl_env.py" in names
    assert "managers/observation.py" in names


@pytest.mark.parametrize("path", _scanned_files(), ids=lambda p: p.relative_to(SRC).as_posix())
def test_hot_path_has_no_sync_calls(path: Path):
    violations = scan_source(path.read_text(), str(path.relative_to(SRC)))
    assert violations == [], "hot-path violations (mark cold-path functions with @cold_path):\n" + "\n".join(
        violations
    )


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
                return x
        """
    )
    assert scan_source(source) == []


def test_scanner_flags_inside_nested_hot_function_of_cold_module():
    source = "def outer(x):\n    def inner():\n        return x.item()\n    return inner\n"
    assert len(scan_source(source)) == 1
