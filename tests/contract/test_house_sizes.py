"""The house's size limits: no source file over 600 lines and no class over 400, so no module or class grows
back into a trunk a newcomer has to read whole."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = sorted((ROOT / "packages").glob("*/src/**/*.py"))
MAX_FILE_LINES = 600
MAX_CLASS_LINES = 400


def oversized(
    files: list[Path], max_file: int = MAX_FILE_LINES, max_class: int = MAX_CLASS_LINES
) -> list[str]:
    """Each file over ``max_file`` lines and each class over ``max_class``, as ``path[:Class]: lines``."""
    found = []
    for path in files:
        text = path.read_text()
        name = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        if (lines := len(text.splitlines())) > max_file:
            found.append(f"{name}: {lines} lines")
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.ClassDef) and (size := node.end_lineno - node.lineno + 1) > max_class:
                found.append(f"{name}:{node.name}: {size} lines")
    return found


def test_no_source_file_or_class_is_over_its_limit():
    assert len(SOURCES) > 100  # both packages' sources were found
    assert oversized(SOURCES) == [], "split these (a concern of their own in a module of its own)"


def test_the_limits_are_counted_as_lines_of_the_file_and_of_the_class(tmp_path):
    body = "\n".join(f"    x{i} = {i}" for i in range(5))
    (tmp_path / "small.py").write_text(f"class Small:\n{body}\n")
    (tmp_path / "big.py").write_text(f"class Big:\n{body}\n\n\n" + "y = 1\n" * 4)
    files = sorted(tmp_path.glob("*.py"))
    assert oversized(files, max_file=12, max_class=6) == []  # big.py: 12 lines; each class: 6
    assert oversized(files, max_file=11, max_class=5) == [
        f"{tmp_path / 'big.py'}: 12 lines",
        f"{tmp_path / 'big.py'}:Big: 6 lines",
        f"{tmp_path / 'small.py'}:Small: 6 lines",
    ]
