"""Hot-path discipline: a visible marker for cold-path functions, and the static scan that enforces it.

Per-step code must not synchronize with the device or branch on tensor values; functions that may are marked
``@cold_path``. ``scan_source`` finds violations with ``ast`` (the tests run it over the runtime's sources).
"""

import ast
from collections.abc import Callable, Collection
from typing import TypeVar

F = TypeVar("F", bound=Callable)

COLD_PATH_ATTR = "__trainrt_cold_path__"


def cold_path(fn: F) -> F:
    """Mark a function as cold path: it may synchronize (``.item()``, ``.cpu()``) and must not run per step."""
    setattr(fn, COLD_PATH_ATTR, True)
    return fn


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
    """Collects hot-path violations; with ``only``, just inside the named functions."""

    def __init__(self, filename: str, only: Collection[str] | None = None) -> None:
        self.filename = filename
        self.only = None if only is None else set(only)
        self._inside_selected = only is None
        self.violations: list[str] = []

    def _flag(self, node: ast.AST, what: str) -> None:
        if self._inside_selected:
            self.violations.append(f"{self.filename}:{getattr(node, 'lineno', '?')}: {what}")

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        if _is_cold(node):
            return
        if self._inside_selected or node.name in (self.only or ()):
            outer, self._inside_selected = self._inside_selected, True
            self.generic_visit(node)
            self._inside_selected = outer
        else:
            self.generic_visit(node)  # nested selected functions are still found

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


def scan_source(source: str, filename: str = "<snippet>", only: Collection[str] | None = None) -> list[str]:
    """Return the hot-path violations in ``source`` (outside ``@cold_path`` functions).

    ``only``: scan just the functions with these names (for code that marks its hot functions by name).
    """
    scanner = _Scanner(filename, only)
    scanner.visit(ast.parse(source, filename=filename))
    return scanner.violations
