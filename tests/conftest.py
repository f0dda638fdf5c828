"""Shared test setup: keep Jupyter, IPython and matplotlib out of $HOME; headless plots;
hypothesis profiles (tests/hypothesis_profiles.py); notebook kernels on a second
floating-point machine (tests/second_machine.py)."""

from __future__ import annotations

import os
import tempfile

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
# For child processes: the kernels strict nbval starts compute as a second machine would
# (tests/test_notebook_numbers.py says why); so do xdist's workers, started after this, while
# a run without xdist computes natively (this process imported numpy to read its CPU features).
for _var, _value in environment().items():
    os.environ.setdefault(_var, _value)
