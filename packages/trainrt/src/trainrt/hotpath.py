"""Hot-path discipline: the hot entry points, a visible marker for cold-path functions, and the static scan.

Per-step code must not synchronize with the device or branch on tensor values. The scan starts at the hot
entry points (``HOT_ENTRY_POINTS``: the functions the env step, the collector and the learner update run every
step) and follows every call to a function of the same module, transitively; functions marked ``@cold_path``
are neither scanned nor followed. Code that no entry point reaches (config factories, run set-up, reports)
needs no marker. ``scan_source`` finds violations with ``ast`` (the tests run it over the runtime's sources).
"""

import ast
from collections.abc import Callable, Collection, Mapping
from typing import Final, TypeVar

F = TypeVar("F", bound=Callable)

COLD_PATH_ATTR = "__trainrt_cold_path__"

EVERY_FUNCTION: Final = "*"
"""Entry-point value: every function of the module is hot (term modules, where all but constructors run per step)."""

HOT_ENTRY_POINTS: Mapping[str, str | frozenset[str]] = {
    # the env step and what it reads
    "compiled.py": frozenset({"CompiledOnFirstCall.__call__"}),
    "envs/manager_based_rl_env.py": frozenset(
        {"ManagerBasedRlEnv.step", "ManagerBasedRlEnv.terminated", "ManagerBasedRlEnv._evaluate_step_terms"}
    ),
    "envs/robot_view.py": EVERY_FUNCTION,
    "envs/state_cache.py": frozenset({"StateCache.get", "StateCache.bump", "StateCache.memoizing"}),
    # the managers' per-step and per-reset methods (a bare name matches that method in every class)
    "managers/action.py": frozenset({"process_action", "apply_action", "write_reset_ctrl", "reset"}),
    "managers/base.py": frozenset({"ManagerBase.reset", "ManagerTermBase.reset", "assign_columns_"}),
    "managers/command.py": frozenset({"compute", "reset", "command"}),
    "managers/curriculum.py": frozenset({"compute"}),
    "managers/event.py": frozenset({"apply_reset", "apply_interval", "reset"}),
    "managers/metrics.py": frozenset({"compute", "record_episode_end", "reset"}),
    "managers/noise.py": frozenset({"add_"}),
    "managers/null.py": EVERY_FUNCTION,
    "managers/observation.py": frozenset({"compute", "reset"}),
    "managers/reward.py": frozenset({"compute", "record_episode_end", "reset"}),
    "managers/termination.py": frozenset({"compute", "record_episode_end"}),
    # terms: every function of a term module runs per step (constructors are marked)
    "mdp/commands.py": EVERY_FUNCTION,
    "mdp/events.py": EVERY_FUNCTION,
    "mdp/math.py": EVERY_FUNCTION,
    "mdp/metrics.py": EVERY_FUNCTION,
    "mdp/observations.py": EVERY_FUNCTION,
    "mdp/rewards.py": EVERY_FUNCTION,
    "mdp/term_bases.py": EVERY_FUNCTION,
    "mdp/terminations.py": EVERY_FUNCTION,
    "tasks/tracking/command.py": EVERY_FUNCTION,
    "tasks/tracking/mdp.py": EVERY_FUNCTION,
    # the collector and the learner update
    "runner/collector.py": frozenset(
        {"Collector.step", "Collector.random_step", "Collector.collect", "Collector._record_transition"}
    ),
    # an iteration's device work is queued without a sync (the overlap of collector and learner needs it)
    "runner/schedule.py": frozenset({"IterationSchedule.run"}),
    "runner/distributed.py": frozenset({"DataParallelRanks._average_gradients"}),
    "runner/iteration_clock.py": frozenset(
        {"IterationClock.mark_collected", "IterationClock.mark_learn_started", "IterationClock.mark_learned"}
    ),
    # the evaluation rollout's step (replayed as a CUDA graph on CUDA)
    "runner/evaluate.py": frozenset({"_RolloutStep.step"}),
    "algos/agent.py": frozenset(
        {"act", "end_episodes", "_update_step"}
        # base-class helpers the algorithms' update steps call (calls are followed within a module only)
        | {"_normalized_groups", "_advance_lr_schedule", "_record_losses", "_autocast", "_policy_noise"}
    ),
    "algos/execution.py": frozenset({"update", "replay_update", "replay_updates", "publish_policy"}),
    "algos/sac.py": frozenset({"act", "_stochastic_action", "forward", "_update_step"}),
    "algos/flashsac.py": frozenset({"act", "_stochastic_action", "end_episodes", "_update_step"}),
    # the update's math, called through its parts
    "algos/update_math.py": EVERY_FUNCTION,
    "algos/sac_math.py": EVERY_FUNCTION,
    "algos/flashsac_math.py": EVERY_FUNCTION,
    "algos/flashsac_networks.py": frozenset(
        {"forward", "backward", "project_", "project_to_unit_norm", "refresh_bf16_weight_copies"}
    ),
    "algos/distributional.py": EVERY_FUNCTION,
    "algos/lr_schedule.py": frozenset({"LrSchedule.factor_tensor"}),
    "algos/networks.py": EVERY_FUNCTION,
    "algos/normalizer.py": frozenset({"RunningObsNormalizer.update", "RunningObsNormalizer.forward"}),
    "replay/buffer.py": frozenset({"DeviceReplayBuffer.add", "DeviceReplayBuffer.sample"}),
    "running_stats.py": EVERY_FUNCTION,
    # the terrain curriculum's per-episode-end update and spawn origins (run in the env's reset of finished rows)
    "terrain/curriculum.py": frozenset(
        {
            "TerrainCurriculum.update",
            "TerrainCurriculum.origins",
            "TerrainCurriculum.level_distribution",
            "TerrainCurriculum.mean_level",
        }
    ),
    # terrain terms (height scans, the curriculum's level update) and the spawn on each env's tile
    "terrain/mdp.py": EVERY_FUNCTION,
    "terrain/scene.py": frozenset({"TerrainScene.place"}),
}
"""trainrt's hot entry points: module path (relative to the package) -> function names or ``EVERY_FUNCTION``.

A name is ``Class.method`` or a bare name (every function or method of that name in the module). Calls are
followed within a module only, so a method that another module calls per step is listed here itself. A new
module with per-step code gets an entry; the static test fails for entries that no longer exist.
"""


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


HOST_VALUED_TORCH_CALLS = frozenset({"torch.compiler.is_compiling", "torch.cuda.is_current_stream_capturing"})
"""``torch.*`` functions that return a Python value without touching a tensor (a test on them never syncs)."""


def _is_torch_call(call: ast.Call) -> bool:
    func = call.func
    if ast.unparse(func) in HOST_VALUED_TORCH_CALLS:
        return False
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
    """Collects the hot-path violations inside one function body (nested functions included, unless cold)."""

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


_Function = ast.FunctionDef | ast.AsyncFunctionDef


def _module_functions(tree: ast.Module) -> list[tuple[str, _Function]]:
    """``(qualified name, node)`` of the module's functions and class methods (``Class.method``)."""
    found: list[tuple[str, _Function]] = []

    def visit(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.append((prefix + node.name, node))
            elif isinstance(node, ast.ClassDef):
                visit(node.body, f"{prefix}{node.name}.")

    visit(tree.body, "")
    return found


def _referenced_names(node: _Function) -> set[str]:
    """Names a function calls, reads as attributes or spells as strings (``f()``, ``self.prop``, ``part("f")``)."""
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Name):
            names.add(sub.func.id)
        elif isinstance(sub, ast.Attribute):
            names.add(sub.attr)
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str) and sub.value.isidentifier():
            names.add(sub.value)  # parts looked up by name (compiled update parts)
    return names


def hot_functions(tree: ast.Module, entry_points: str | Collection[str]) -> list[str]:
    """Qualified names of the functions reachable from ``entry_points`` within the module, cold ones excluded.

    ``entry_points`` is ``EVERY_FUNCTION`` or names (``Class.method`` or a bare name matching every function
    and method of that name); reachability follows calls and attribute reads whose name is a function of the
    module (a name-based over-approximation: ``self.reset()`` reaches every ``reset`` in the file).
    """
    functions = _module_functions(tree)
    by_name: dict[str, list[tuple[str, _Function]]] = {}
    for qualname, node in functions:
        by_name.setdefault(node.name, []).append((qualname, node))
    if entry_points == EVERY_FUNCTION:
        pending = list(functions)
    else:
        wanted = set(entry_points)
        pending = [(q, n) for q, n in functions if q in wanted or n.name in wanted]
    reached: dict[str, _Function] = {}
    while pending:
        qualname, node = pending.pop()
        if qualname in reached or _is_cold(node):
            continue
        reached[qualname] = node
        for name in _referenced_names(node):
            pending.extend(by_name.get(name, ()))
    return sorted(reached)


def missing_entry_points(source: str, entry_points: str | Collection[str]) -> list[str]:
    """Entry-point names that match no function of ``source`` (renamed or removed)."""
    if entry_points == EVERY_FUNCTION:
        return []
    functions = _module_functions(ast.parse(source))
    known = {q for q, _ in functions} | {n.name for _, n in functions}
    return sorted(set(entry_points) - known)


def scan_source(
    source: str, filename: str = "<snippet>", entry_points: str | Collection[str] = EVERY_FUNCTION
) -> list[str]:
    """Return the hot-path violations in the functions of ``source`` reachable from ``entry_points``.

    The default scans every function; ``@cold_path`` functions are skipped (and not followed) either way.
    Module-level statements run once at import and are not scanned.
    """
    tree = ast.parse(source, filename=filename)
    nodes = dict(_module_functions(tree))
    scanner = _Scanner(filename)
    for node in sorted((nodes[q] for q in hot_functions(tree, entry_points)), key=lambda n: n.lineno):
        for stmt in node.body:
            scanner.visit(stmt)
    return scanner.violations
