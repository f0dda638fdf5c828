"""The house rules that lint alone does not state: functions of at most 60 lines and modules
of at most 350 (docs/design.md, "The house"), and the habits of a package others install
(one version, type hints that ship, a changelog entry for it, pre-commit running `make lint`)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pagedkv

ROOT = Path(__file__).resolve().parents[1]
MAX_FUNCTION_LINES = 60
MAX_MODULE_LINES = 350


def _function_lengths(source: str) -> list[tuple[str, int]]:
    """(qualified name, lines from its first decorator to its last line) for every function,
    nested ones included.

    Example: "def f():\\n    return 1\\n" -> [("f", 2)]
    """
    found = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = prefix
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    first = min([child.lineno, *(d.lineno for d in child.decorator_list)])
                    found.append((name, (child.end_lineno or child.lineno) - first + 1))
                name += "."
            walk(child, name)

    walk(ast.parse(source), "")
    return found


def _oversized() -> list[str]:
    offenders = []
    for path in sorted((ROOT / "pagedkv").rglob("*.py")):
        rel = path.relative_to(ROOT)
        source = path.read_text()
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            offenders.append(f"{rel}: {lines} lines (module)")
        for name, length in _function_lengths(source):
            if length > MAX_FUNCTION_LINES:
                offenders.append(f"{rel}: {name} is {length} lines")
    return offenders


def test_the_measure_counts_decorators_and_nested_functions():
    source = "@cache\ndef f():\n    def g():\n        return 1\n    return g\n\n"
    source += "class C:\n    def m(self):\n        pass\n"
    assert _function_lengths(source) == [("f", 5), ("f.g", 2), ("C.m", 2)]


def test_functions_and_modules_keep_to_their_size():
    offenders = _oversized()
    assert not offenders, "over the size rules:\n" + "\n".join(offenders)


def test_one_version_and_it_ships_with_its_type_hints():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'^dynamic = \["version"\]$', pyproject, re.M)
    assert 'version = { attr = "pagedkv.__version__" }' in pyproject
    assert re.fullmatch(r"\d+\.\d+\.\d+", pagedkv.__version__)
    assert (ROOT / "pagedkv" / "py.typed").exists() and '"py.typed"' in pyproject
    assert f"## {pagedkv.__version__} - " in (ROOT / "CHANGELOG.md").read_text()


def test_pre_commit_runs_the_commands_of_make_lint():
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nlint: ", 1)[1].split("\n\n", 1)[0].splitlines()[1:]
    commands = [line.strip().replace("$(BIN)", ".venv/bin") for line in recipe]
    hooks = re.findall(r"^\s+entry: (.+)$", (ROOT / ".pre-commit-config.yaml").read_text(), re.M)
    assert commands == hooks and len(hooks) == 4
