"""Every rule the code and tests cite exists in docs/design.md, nothing points outside the
repository, and every module, class and method the docs and docstrings name exists."""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pkgutil
import re
import textwrap
from pathlib import Path

import pagedkv

ROOT = Path(__file__).resolve().parents[1]
DESIGN = (ROOT / "docs" / "design.md").read_text()
SOURCES = sorted(
    [*ROOT.glob("pagedkv/**/*.py"), *ROOT.glob("tests/**/*.py"), *ROOT.glob("notebooks/*.ipynb")]
)


def _numbered_rules() -> dict[int, str]:
    """{N: first line of rule N} from the "Rules of the page pool" list."""
    section = DESIGN.split("## Rules of the page pool", 1)[1].split("\n## ", 1)[0]
    return {int(n): text for n, text in re.findall(r"^(\d+)\. \*\*(.+?)\*\*", section, re.M)}


def _citations() -> list[tuple[str, str]]:
    """(file, cited text) for every rule-number or section-name citation of docs/design.md."""
    found = []
    for path in SOURCES:
        text = path.read_text()
        rel = str(path.relative_to(ROOT))
        for match in re.finditer(r"docs/design\.md,? rules? (\d+)(?: and (\d+))?", text):
            found += [(rel, f"rule {n}") for n in match.groups() if n]
        for match in re.finditer(r'docs/design\.md, \\?"([^"\\]+)\\?"', text):
            found.append((rel, " ".join(match.group(1).split())))  # a name may wrap a line
    return found


def test_rules_are_numbered_one_to_nine_in_order():
    assert list(_numbered_rules()) == list(range(1, 10))


def test_every_cited_rule_and_section_exists():
    rules = _numbered_rules()
    citations = _citations()
    assert len(citations) > 20  # the pattern still finds the citations
    headings = set(re.findall(r"^#+ (.+)$", DESIGN, re.M))
    answers = set(re.findall(r"^- \*\*(.+?)\.\*\*", DESIGN, re.M))
    for rel, cited in citations:
        if cited.startswith("rule "):
            assert int(cited.split()[1]) in rules, f"{rel} cites {cited}, which docs/design.md lacks"
        else:
            assert cited in headings | answers, f"{rel} cites {cited!r}, not a heading or answer"


def test_nothing_cites_a_file_outside_the_repository():
    texts = [*ROOT.glob("pagedkv/data/*.txt"), *ROOT.glob("notebooks/**/*.ipynb")]  # the corpus too
    for path in [*SOURCES, *texts, ROOT / "README.md", *ROOT.glob("docs/*.md"), ROOT / "CONTRIBUTING.md"]:
        if path.exists():
            text = path.read_text()
            for outside in ("../" + "shared", "DESIGN" + ".md"):  # split: this file must pass too
                assert outside not in text, f"{path.relative_to(ROOT)} cites {outside}"


# ---- every module, class and method named in backticks exists ---------------------------------

TOP_FOLDERS = ("pagedkv", "tests", "tools", "docs", "notebooks", "classroom")  # a path starting so is ours
# The names docs and docstrings give a pagedkv object in passing: `pool.page(7)`, `seqs.add`.
VARIABLES = {
    "pool": ("KVCachePool",),
    "seqs": ("SequenceManager",),
    "manager": ("SequenceManager", "DurableSequenceManager", "LockedManager"),
    "model": ("TinyLM",),
    "run": ("ScenarioRun",),
    "report": ("Report",),
    "locked": ("LockedManager",),
    "plan": ("StepPlan",),
    "output": ("SchedulerOutput",),
    "engine": ("AttentionEngine", "ServiceEngine"),
}
OTHER_FILES = ("json", "md", "toml", "yml", "yaml", "txt", "npz", "png", "cfg", "ipynb")


def _documents() -> list[tuple[str, str]]:
    """(where, text) for each doc page and every docstring of the package."""
    out = [(str(p.relative_to(ROOT)), p.read_text()) for p in _doc_pages()]
    for path in sorted(ROOT.glob("pagedkv/**/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node, clean=False)
                if doc:
                    name = getattr(node, "name", "module")
                    out.append((f"{path.relative_to(ROOT)} ({name})", doc))
    return out


def _doc_pages() -> list[Path]:
    return [*sorted(ROOT.glob("docs/*.md")), ROOT / "README.md", ROOT / "CONTRIBUTING.md"]


@functools.cache
def _package() -> tuple[dict[str, list[type]], dict[str, list[str]]]:
    """{class name: pagedkv classes of that name}, {module basename: dotted module names}."""
    classes: dict[str, list[type]] = {}
    modules: dict[str, list[str]] = {}
    names = [m.name for m in pkgutil.walk_packages(pagedkv.__path__, "pagedkv.")]
    for name in ["pagedkv", *names]:
        if name.endswith("__main__"):
            continue  # running it is the CLI
        module = importlib.import_module(name)
        modules.setdefault(name.rsplit(".", 1)[-1], []).append(name)
        for obj in vars(module).values():
            if inspect.isclass(obj) and obj.__module__ == name and obj not in classes.get(obj.__name__, []):
                classes.setdefault(obj.__name__, []).append(obj)
    return classes, modules


def _class_has(cls: type, attr: str) -> bool:
    """`attr` is a member, a declared field or an attribute its methods assign (`self.attr = ...`)."""
    if hasattr(cls, attr):
        return True
    for klass in cls.__mro__:
        if attr in vars(klass).get("__annotations__", {}):
            return True
        if klass.__module__.startswith("pagedkv"):
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr == attr:
                        return True
    return False


def _module_has(dotted: str, attrs: list[str]) -> bool:
    """`dotted` (a pagedkv module) has the attribute chain `attrs`, submodules included."""
    try:
        obj: object = importlib.import_module(dotted)
    except ImportError:
        return False
    for attr in attrs:
        if hasattr(obj, attr):
            obj = getattr(obj, attr)
        elif inspect.ismodule(obj) and _module_has(f"{obj.__name__}.{attr}", []):
            obj = importlib.import_module(f"{obj.__name__}.{attr}")
        elif inspect.isclass(obj):
            return _class_has(obj, attr)  # Class.attribute: deeper parts are values, unchecked
        else:
            return False
    return True


def resolves(span: str) -> bool | None:
    """Whether a backticked span that names something of this repository names something that
    exists; None when it names nothing here (numpy, vLLM, a shell command). The rules:

    - `a/b.py`: a path from the repository root when it starts with one of its top folders
      (pagedkv/, tests/, ...), else from pagedkv/ when it starts with one of its folders
      (core/pool.py); any other path is another project's (vllm/v1/request.py), not checked.
    - `b.py`: the name of a file under pagedkv/, tests/ or tools/.
    - `X.y.z` (call parentheses dropped): `pagedkv.mod.name` must import and resolve; when X
      is a pagedkv class, `y` must be its member, field or assigned attribute; when X is a
      pagedkv module's last name (`costs.table`) or a variable the docs use for a pagedkv
      object (`pool.page`, VARIABLES), `y...` must resolve on one of those.
    """
    span = re.sub(r"\(.*\)$", "", span.strip())
    if span.endswith(".py"):
        if "/" not in span:
            return any(next(ROOT.glob(f"{top}/**/{span}"), None) for top in ("pagedkv", "tests", "tools"))
        first = span.split("/", 1)[0]
        if first in TOP_FOLDERS:
            return (ROOT / span).is_file()
        if (ROOT / "pagedkv" / first).is_dir():
            return (ROOT / "pagedkv" / span).is_file()
        return None
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+", span) or span.rsplit(".", 1)[1] in OTHER_FILES:
        return None
    head, *attrs = span.split(".")
    classes, modules = _package()
    if head == "pagedkv":
        return any(_module_has(".".join(["pagedkv", *attrs[:k]]), attrs[k:]) for k in range(len(attrs) + 1))
    candidates = [_class_has(c, attrs[0]) for c in classes.get(head, [])]
    candidates += [_module_has(m, attrs) for m in modules.get(head, [])]
    candidates += [_class_has(c, attrs[0]) for name in VARIABLES.get(head, ()) for c in classes.get(name, [])]
    return any(candidates) if candidates else None


def test_the_resolver_refuses_made_up_names_and_takes_real_ones():
    made_up = [
        "KVCachePool.no_such_verb",
        "pagedkv.core.no_such_module",
        "pagedkv.viz.no_such_plot",
        "no_such_module.py",
        "pagedkv/core/" + "no_such.py",  # split: this file's own paths are checked too
        "core/no_such.py",
        "pool.no_such_query()",
        "costs.no_such_function",
    ]
    real = [
        "KVCachePool.get_new_blocks",
        "PoolSnapshot.owner",  # a dataclass field
        "TinyLM.card",  # assigned in __init__
        "pagedkv.viz.plot_pool",
        "pagedkv.core.slot_mapping.slot_mapping",
        "pool.py",
        "core/slot_mapping.py",
        "pagedkv/core/pool.py",
        "tests/test_docs.py",
        "pool.page(7)",
        "costs.bytes_per_token",
    ]
    assert [s for s in made_up if resolves(s) is not False] == []
    assert [s for s in real if resolves(s) is not True] == []
    assert resolves("np.take") is None and resolves("vllm/v1/request.py") is None
    classes, _ = _package()
    assert [name for names in VARIABLES.values() for name in names if name not in classes] == []


def test_every_module_and_method_named_in_backticks_exists():
    missing = []
    for where, text in _documents():
        for match in re.finditer(r"`([^`\n]+)`", text):
            if resolves(match.group(1)) is False:
                missing.append(f"{where}: `{match.group(1)}`")
    assert not missing, "named but not found:\n" + "\n".join(missing)


def test_every_path_into_the_package_exists():
    """A path such as pagedkv/core/pool.py, backticked or not, in any doc page or source file."""
    missing = []
    for path in [*_doc_pages(), *SOURCES]:
        for match in re.finditer(r"(?<![\w/])pagedkv/[\w/]+\.py\b", path.read_text()):
            if not (ROOT / match.group(0)).is_file():
                missing.append(f"{path.relative_to(ROOT)}: {match.group(0)}")
    assert not missing, "paths to no file:\n" + "\n".join(missing)


# ---- every relative link in the notebooks opens ------------------------------------------------

LINK = re.compile(r"\]\(([^)\s]+)\)")


def _notebook_links() -> list[tuple[Path, str]]:
    """(file, link target) of every relative link in the notebooks' markdown cells and in
    notebooks/README.md (web addresses and in-page anchors left out; the copies a running
    JupyterLab keeps in .ipynb_checkpoints/ are not the notebooks)."""
    import nbformat

    found = []
    pages = sorted(p for p in ROOT.glob("notebooks/**/*.ipynb") if ".ipynb_checkpoints" not in p.parts)
    for path in [*pages, ROOT / "notebooks" / "README.md"]:
        if path.suffix == ".ipynb":
            cells = nbformat.read(path, as_version=4).cells
            text = "\n".join(c.source for c in cells if c.cell_type == "markdown")
        else:
            text = path.read_text()
        for target in LINK.findall(text):
            if not re.match(r"[a-z]+:|#", target):
                found.append((path, target.split("#")[0]))
    return found


def _served_root() -> Path:
    """The folder `make lab` serves (the Makefile's LAB_ARGS root_dir, from the repository)."""
    makefile = (ROOT / "Makefile").read_text()
    match = re.search(r"^LAB_ARGS\s*:?=.*--ServerApp\.root_dir=(\S+)", makefile, re.M)
    assert match, "the Makefile's LAB_ARGS sets no root_dir"
    return (ROOT / match.group(1)).resolve()


def test_every_relative_link_in_the_notebooks_opens_in_the_repository_and_in_make_lab():
    """A link is relative to its notebook's folder (JupyterLab, GitHub and Binder resolve it
    so): it names a file that exists, inside the folder JupyterLab serves."""
    links = _notebook_links()
    assert any("docs/vllm_map.md" in target for _, target in links)  # the pattern finds them
    served, bad = _served_root(), []
    for path, target in links:
        resolved = (path.parent / target).resolve()
        if not resolved.is_file() or not resolved.is_relative_to(served):
            bad.append((str(path.relative_to(ROOT)), target))
    assert not bad, bad


def _anchor(heading: str) -> str:
    """The id JupyterLab gives a markdown heading: its rendered text, each space a '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link shows its text
    return re.sub(r"`|\*\*?", "", text).strip().replace(" ", "-")


def test_every_link_to_a_notebook_section_names_a_heading_of_that_notebook():
    """A core notebook sends the learner to its deep dive's section with a link like
    `05b_preemption_deep_dive.ipynb#2.-Swap-bytes`: a renamed heading would leave the link
    opening the notebook at its top, silently. The anchor must be a heading's id there."""
    from urllib.parse import unquote

    import nbformat

    pages = sorted(p for p in ROOT.glob("notebooks/*.ipynb"))
    headings = {
        p.name: {
            _anchor(line.lstrip("#"))
            for cell in nbformat.read(p, as_version=4).cells
            if cell.cell_type == "markdown"
            for line in cell.source.splitlines()
            if re.match(r"#{1,6} ", line)
        }
        for p in pages
    }
    links = [
        (path.name, target)
        for path in pages
        for target in LINK.findall(path.read_text().replace("\\n", "\n"))
        if re.match(r"\d\w*\.ipynb#", target)
    ]
    assert len(links) >= 5  # the core notebooks link into their deep dives
    bad = [(name, t) for name, t in links if unquote(t.split("#")[1]) not in headings[t.split("#")[0]]]
    assert not bad, bad
