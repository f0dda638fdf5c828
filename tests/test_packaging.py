"""environment.yml (conda / Binder) and pyproject.toml must declare the same dependencies."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None

ROOT = Path(__file__).resolve().parents[1]
CONDA_ONLY = {"python", "pip"}  # the interpreter and installer conda needs to be told about


def _normalize(requirement: str) -> tuple[str, str]:
    """('prometheus-client', '>=0.20') from 'prometheus_client>=0.20' (PEP 503 names)."""
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(.*?)\s*", requirement)
    assert match, f"cannot parse requirement {requirement!r}"
    name, spec = match.groups()
    return re.sub(r"[-_.]+", "-", name).lower(), spec.replace(" ", "")


def _pyproject() -> dict:
    text = (ROOT / "pyproject.toml").read_text()
    if tomllib is None:
        import pytest

        pytest.skip("tomllib needs Python >= 3.11")
    return tomllib.loads(text)


def test_environment_yml_matches_pyproject():
    project = _pyproject()["project"]
    declared = list(project["dependencies"])
    for extra, requirements in project["optional-dependencies"].items():
        if extra != "train":  # torch, for `make train-model` only: never part of the lab environment
            declared += requirements
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert env["channels"] == ["conda-forge"]
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    conda_pkgs = dict(_normalize(d) for d in conda)
    assert "python" in conda_pkgs and conda_pkgs["python"] == ">=3.10"
    assert project["requires-python"] == ">=3.10"
    expected = dict(_normalize(d) for d in declared)
    got = {k: v for k, v in conda_pkgs.items() if k not in CONDA_ONLY}
    assert got == expected, (
        f"only in pyproject: {sorted(set(expected) - set(got))}; "
        f"only in environment.yml: {sorted(set(got) - set(expected))}; "
        f"different bounds: {sorted(k for k in set(got) & set(expected) if got[k] != expected[k])}"
    )


def test_binder_installs_the_package():
    post_build = (ROOT / "postBuild").read_text()
    assert "pip install" in post_build and "-e ." in post_build
