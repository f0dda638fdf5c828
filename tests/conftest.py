"""Shared test setup: keep Jupyter, IPython and matplotlib out of $HOME; headless plots;
hypothesis profiles (tests/hypothesis_profiles.py)."""

from __future__ import annotations

import os
import tempfile

from . import hypothesis_profiles  # noqa: F401  (loads the `ci` or `dev` profile)

_HOME = tempfile.mkdtemp(prefix="pagedkv-test-home-")
for _var, _sub in (
    ("JUPYTER_CONFIG_DIR", "jupyter-config"),
    ("JUPYTER_RUNTIME_DIR", "jupyter-runtime"),
    ("IPYTHONDIR", "ipython"),
    ("MPLCONFIGDIR", "matplotlib"),
):
    os.environ.setdefault(_var, os.path.join(_HOME, _sub))
os.environ.setdefault("MPLBACKEND", "Agg")
