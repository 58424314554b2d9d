"""The managers see the env through `ManagedEnv`: they import no env module, and the env has what it declares."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import torch
from managers_toy_scene import make_env, toy_cfg

import simcore
from trainrt.managers import ManagedEnv

MANAGERS_DIR = Path(__file__).resolve().parents[1] / "src" / "trainrt" / "managers"


def _imported_modules(path: Path) -> list[str]:
    """Every module ``path`` imports, at any depth (``if TYPE_CHECKING:`` blocks included)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append("." * node.level + node.module)
    return found


def test_no_manager_module_imports_the_envs_package():
    files = sorted(MANAGERS_DIR.glob("*.py"))
    assert len(files) > 5, "the managers' sources were not found"
    offending = {
        f"{path.name}: {module}"
        for path in files
        for module in _imported_modules(path)
        if module == "trainrt.envs" or module.startswith(("trainrt.envs.", "..envs"))
    }
    assert offending == set(), "the env imports the managers, never the other way round"


def test_the_env_has_every_attribute_the_managers_read():
    env = make_env(toy_cfg())
    declared = typing.get_type_hints(
        ManagedEnv, globalns={"torch": torch, "simcore": simcore, "Any": typing.Any}
    )
    assert set(declared) == {
        "num_envs",
        "device",
        "seed",
        "rng",
        "step_dt",
        "backend",
        "robot",
        "state_cache",
    }
    missing = [name for name in declared if not hasattr(env, name)]
    assert missing == []
    assert isinstance(env.num_envs, int) and isinstance(env.seed, int) and isinstance(env.step_dt, float)
    assert isinstance(env.device, torch.device) and isinstance(env.rng, torch.Generator)
    assert isinstance(env.backend, simcore.SimBackend)
