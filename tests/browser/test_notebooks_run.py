"""Every notebook, opened in JupyterLab in Chromium, runs start to end with "Run All Cells".

Checked twice, independently: in the page (every code cell got an execution number, no output
shows a traceback or a widget that failed to display) and in the notebook the page saves
(execution counts 1..N in order, no output of type "error"). A self-check first proves the
checks see an error and do not mistake a warning for one.
"""

from __future__ import annotations

import json

import pytest

from .labserver import NOTEBOOKS

pytestmark = pytest.mark.browser

NOTEBOOK_NAMES = sorted(path.name for path in NOTEBOOKS.glob("[0-9]*.ipynb"))


def _saved_code_cells(jupyterlab, name: str) -> list[dict]:
    """The code cells with source, as the page saved them (contents API)."""
    model = jupyterlab.api("GET", f"/api/contents/notebooks/{name}?content=1&type=notebook")
    return [c for c in model["content"]["cells"] if c["cell_type"] == "code" and "".join(c["source"]).strip()]


def _check_ran_cleanly(nb, jupyterlab, name: str) -> None:
    assert nb.error_outputs() == [], f"{name} shows an error output"
    nb.save()
    code = _saved_code_cells(jupyterlab, name)
    errors = [
        f"{o['ename']}: {o['evalue']}" for c in code for o in c["outputs"] if o["output_type"] == "error"
    ]
    assert errors == [], f"{name} saved error outputs"
    counts = [c["execution_count"] for c in code]
    assert counts == list(range(1, len(code) + 1)), f"{name}: not every code cell ran: {counts}"
    shown = [p for p in nb.prompts() if p != "[ ]:"]
    hidden = [c["metadata"].get("jupyter", {}).get("source_hidden", False) for c in code]
    visible = [n for n, hide in zip(counts, hidden) if not hide]  # a hidden source shows no prompt
    assert shown == [f"[{n}]:" for n in visible], f"{name}: page prompts {shown}"


def test_there_are_notebooks_to_run():
    assert NOTEBOOK_NAMES, f"no numbered notebooks in {NOTEBOOKS}"


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_run_all_cells_completes_without_errors(open_notebook, jupyterlab, name):
    nb = open_notebook(name)
    nb.run_all()
    _check_ran_cleanly(nb, jupyterlab, name)


def _write_notebook(path, sources: list[str]) -> None:
    cells = [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": src}
        for src in sources
    ]
    path.write_text(
        json.dumps(
            {
                "cells": cells,
                "nbformat": 4,
                "nbformat_minor": 5,
                "metadata": {
                    "kernelspec": {
                        "name": "python3",
                        "display_name": "Python 3 (ipykernel)",
                        "language": "python",
                    }
                },
            }
        )
    )


def test_the_checks_catch_an_error_and_pass_a_warning(open_notebook, jupyterlab):
    """The oracle of the test above: a raising cell is caught, a warning on stderr is not."""
    name = "zz_selfcheck_error.ipynb"  # written only into the server's temporary copy
    _write_notebook(
        jupyterlab.notebook_dir / name,
        [
            "import warnings\nwarnings.warn('a warning is not an error')",
            "print('fine')",
            "raise ValueError('deliberate')",
            "print('never runs')",
        ],
    )
    nb = open_notebook(name)
    nb.run_all()
    errors = nb.error_outputs()
    assert len(errors) == 1 and "ValueError" in errors[0] and "deliberate" in errors[0]
    assert nb.prompts() == ["[1]:", "[2]:", "[3]:", "[ ]:"]
    with pytest.raises(AssertionError, match="shows an error output"):
        _check_ran_cleanly(nb, jupyterlab, name)

    clean = "zz_selfcheck_warning.ipynb"
    _write_notebook(
        jupyterlab.notebook_dir / clean,
        [
            "import sys, warnings\nwarnings.warn('careful')\nprint('to stderr', file=sys.stderr)",
            "print('fine')",
        ],
    )
    nb = open_notebook(clean)
    nb.run_all()
    _check_ran_cleanly(nb, jupyterlab, clean)


def test_every_relative_link_in_the_notebooks_is_served(jupyterlab):
    """The notebooks' links (into docs/, or to another notebook) open in `make lab`'s
    JupyterLab: the server has each linked file at the path the link gives relative to its
    notebook."""
    import posixpath

    from ..test_docs import _notebook_links
    from .labserver import ROOT

    links = _notebook_links()
    assert links
    for path, target in links:
        served = posixpath.normpath(posixpath.join(path.parent.relative_to(ROOT).as_posix(), target))
        model = jupyterlab.api("GET", f"/api/contents/{served}?content=0")
        assert model["type"] in ("file", "notebook"), (path.name, target)  # docs, or another notebook
