"""Static hot-path check: no host syncs or tensor-valued branches outside ``@cold_path`` functions.

Scans the env, managers, terms, tasks, algorithms, replay and runner with ``ast``. Flags ``.item()``, ``.cpu()``, ``.tolist()``,
``.numpy()``, ``nonzero``, ``masked_select``, one-argument ``torch.where``, any ``bool(...)``, and
``if``/``while``/``assert``/conditional expressions whose test calls a tensor reduction or predicate (``.any()``,
``.all()``, ``torch.*`` ...), and ``int()``/``float()`` of such calls. Names cannot be typed statically, so
branches on plain names, attributes and comparisons are trusted (config flags, shapes, ``is None``).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from trainrt.hotpath import scan_source

SRC = Path(__file__).resolve().parents[1] / "src" / "trainrt"
SCANNED_DIRS = ("managers", "envs", "mdp", "tasks", "algos", "replay", "runner")


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
