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


def _text_times_truth(source: str) -> list[int]:
    """Lines that repeat a string or list by a truth value ("s" * (n != 1), [x] * bool(y)):
    the trick CONTRIBUTING.md asks to write as a plain if (counts: `core/plumbing/words.py`).

    Example: 'w = "s" * (n > 1)\\nv = "-" * width\\n' -> [1]
    """
    text = (ast.Constant, ast.JoinedStr, ast.List)
    truth = (ast.Compare, ast.BoolOp)

    def is_truth(node: ast.AST) -> bool:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return True
        called = isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        return isinstance(node, truth) or (called and node.func.id == "bool")

    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            pair = (node.left, node.right), (node.right, node.left)
            if any(isinstance(t, text) and is_truth(k) for t, k in pair):
                found.append(node.lineno)
    return sorted(found)


def test_the_text_times_truth_check_finds_the_trick_and_only_it():
    source = 'w = "s" * (n > 1)\nv = "-" * width\nx = [a] * bool(b)\ny = f"{z}" * (not c)\n'
    assert _text_times_truth(source) == [1, 3, 4]


def test_no_text_is_repeated_by_a_truth_value():
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "pagedkv").rglob("*.py"))
        for line in _text_times_truth(path.read_text())
    ]
    assert not offenders, "write these as plain ifs (or words.count):\n" + "\n".join(offenders)


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
