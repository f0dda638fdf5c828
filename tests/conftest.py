"""Shared test setup: keep Jupyter, IPython and matplotlib out of $HOME; headless plots;
hypothesis profiles (tests/hypothesis_profiles.py); notebook kernels on a second
floating-point machine (tests/second_machine.py)."""

from __future__ import annotations

import os
import tempfile

import pytest

from . import hypothesis_profiles  # noqa: F401  (loads the `ci` or `dev` profile)
from .second_machine import environment

_HOME = tempfile.mkdtemp(prefix="pagedkv-test-home-")
for _var, _sub in (
    ("JUPYTER_CONFIG_DIR", "jupyter-config"),
    ("JUPYTER_RUNTIME_DIR", "jupyter-runtime"),
    ("IPYTHONDIR", "ipython"),
    ("MPLCONFIGDIR", "matplotlib"),
):
    os.environ.setdefault(_var, os.path.join(_HOME, _sub))
os.environ.setdefault("MPLBACKEND", "Agg")
# Child processes only: this process has imported numpy already (environment() reads its CPU
# features), so the unit tests compute natively and the kernels strict nbval starts compute as
# a second machine would (tests/test_notebook_numbers.py says why).
for _var, _value in environment().items():
    os.environ.setdefault(_var, _value)


def pytest_collection_modifyitems(config, items):
    """Groups for `pytest-xdist --dist loadgroup` (the Makefile): the browser tests share one
    group, so one worker starts one JupyterLab and one Chromium for all of them; every other
    test is grouped by its file (a notebook's cells run in order in one kernel, and a file's
    module fixtures are built once). Without xdist the marks do nothing."""
    for item in items:
        group = "browser" if item.get_closest_marker("browser") else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
