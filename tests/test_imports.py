"""Imports cost what they use: `import pagedkv` and `python -m pagedkv --help` load numpy and
the core, never the plotting, widget, web or test libraries of the layers above it.

Checked by the modules a fresh interpreter has loaded, never by a timing (a shared machine
is too noisy to assert one): the heavy libraries are what made `--help` cost a second.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

import pagedkv

HEAVY = (
    "matplotlib",
    "ipywidgets",
    "IPython",
    "PIL",
    "fastapi",
    "uvicorn",
    "starlette",
    "pydantic",
    "prometheus_client",
    "httpx",
    "hypothesis",
    "tqdm",
    "threadpoolctl",
)
LAYERS_ABOVE_THE_CORE = (
    "pagedkv.engine",
    "pagedkv.model",
    "pagedkv.viz",
    "pagedkv.bench",
    "pagedkv.service",
    "pagedkv.scenarios",
    "pagedkv.exercises",
)


def _loaded_after(code: str) -> set[str]:
    """Top-level names of the heavy libraries and pagedkv layers loaded after `code` runs in
    a fresh interpreter."""
    report = (
        "import sys\n"
        f"heavy, layers = {HEAVY!r}, {LAYERS_ABOVE_THE_CORE!r}\n"
        "loaded = [m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(layers)]\n"
        "print(' '.join(sorted({m if m.startswith('pagedkv') else m.split('.')[0] for m in loaded})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code + "\n" + report], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return set(done.stdout.split())


def test_import_pagedkv_loads_only_the_core():
    assert _loaded_after("import pagedkv") == set()


def test_help_loads_no_command():
    code = (
        "import contextlib, io, runpy\n"
        "sys_argv = __import__('sys').argv\n"
        "sys_argv[1:] = ['--help']\n"
        "with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n"
        "    runpy.run_module('pagedkv', run_name='__main__')\n"
    )
    assert _loaded_after(code) == set()


@pytest.mark.parametrize("name", pagedkv.__all__)
def test_every_public_name_imports(name):
    module = {}
    exec(f"from pagedkv import {name}", module)  # the statement a reader writes
    assert module[name] is getattr(pagedkv, name)


def test_the_public_surface_lists_what_it_loads_lazily():
    assert set(dir(pagedkv)) >= set(pagedkv.__all__)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        pagedkv.nope  # noqa: B018
