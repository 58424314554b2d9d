"""The package boundary: trainrt uses simcore's public surface only; simcore stands alone."""

import ast
import re
import subprocess
import sys
from pathlib import Path

import simcore

ROOT = Path(__file__).resolve().parents[2]
TRAINRT_SRC = ROOT / "packages" / "trainrt" / "src" / "trainrt"
SIMCORE_SRC = ROOT / "packages" / "simcore" / "src" / "simcore"
BACKEND_PRIVATE = ("mujoco_warp", "warp")


def _imports(path: Path) -> list[tuple[int, str, tuple[str, ...]]]:
    """Return (line, module, imported names) for every import in a file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, ()) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module, tuple(a.name for a in node.names)))
    return found


def boundary_violations(files: list[Path]) -> list[str]:
    """List every import in ``files`` that crosses into simcore internals or backend packages."""
    public = set(simcore.__all__)
    bad = []
    for path in files:
        for line, module, names in _imports(path):
            top = module.split(".")[0]
            where = f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{line}"
            if top == "simcore" and module != "simcore":
                bad.append(f"{where}: imports {module} (only `simcore` public names are allowed)")
            elif module == "simcore":
                bad.extend(f"{where}: simcore has no public name {n!r}" for n in names if n not in public)
            elif top in BACKEND_PRIVATE:
                bad.append(f"{where}: imports backend package {module}; go through simcore")
    return bad


def test_trainrt_imports_only_simcore_public_names():
    files = sorted(TRAINRT_SRC.rglob("*.py"))
    assert files, "no trainrt sources found"
    assert boundary_violations(files) == []


def test_scanner_catches_a_private_import(tmp_path):
    planted = tmp_path / "planted_violation.py"
    planted.write_text(
        "from simcore._src.reset import ResetSpec\nimport mujoco_warp\nfrom simcore import not_a_name\n"
    )
    problems = boundary_violations([planted])
    assert len(problems) == 3
    assert (
        "simcore._src.reset" in problems[0] and "mujoco_warp" in problems[1] and "not_a_name" in problems[2]
    )


def test_simcore_never_imports_trainrt():
    for path in sorted(SIMCORE_SRC.rglob("*.py")):
        for line, module, _ in _imports(path):
            assert module.split(".")[0] != "trainrt", f"{path}:{line} imports {module}"


def test_simcore_works_with_trainrt_absent():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'trainrt' or name.startswith('trainrt.'):\n"
        "            raise ImportError('trainrt is blocked in this test')\n"
        "sys.meta_path.insert(0, Block())\n"
        "import simcore\n"
        "wheel = simcore.PinnedWheel('holosoma==0.0.3', 'holosoma-0.0.3-py3-none-any.whl', 'pinned in trainrt')\n"
        "m = simcore.load_model(simcore.asset_dir(wheel) / 'robots/g1/g1_29dof.xml', pd_from_armature=True)\n"
        "b = simcore.make_backend('mujoco', m, simcore.SimConfig(num_envs=2))\n"
        "b.step()\n"
        "print('ok', tuple(b.qpos.shape))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok (2, 36)"


def test_no_public_simcore_name_mentions_a_robot():
    """simcore is generic: robots (names, poses, assets) are trainrt's data (``trainrt.robots``)."""
    robot_names = re.compile(r"g1|t1|go2|h1|humanoid|unitree|booster", re.IGNORECASE)
    assert [name for name in simcore.__all__ if robot_names.search(name)] == []
    assert not (SIMCORE_SRC / "_src" / "g1.py").exists()
