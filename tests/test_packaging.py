"""environment.yml (conda / Binder) and pyproject.toml must declare the same dependencies."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = None

ROOT = Path(__file__).resolve().parents[1]
CONDA_ONLY = {"python", "pip"}  # the interpreter and installer conda needs to be told about
CONDA_NAMES = {"python-xxhash": "xxhash"}  # conda-forge name -> PyPI name, where they differ


def _normalize(requirement: str) -> tuple[str, str]:
    """('prometheus-client', '>=0.20') from 'prometheus_client>=0.20' (PEP 503 names)."""
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(.*?)\s*", requirement)
    assert match, f"cannot parse requirement {requirement!r}"
    name, spec = match.groups()
    name = re.sub(r"[-_.]+", "-", name).lower()
    return CONDA_NAMES.get(name, name), spec.replace(" ", "")


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
        # torch, for `make train-model` only, and jupyterhub, for `make hub` only: neither is part
        # of the learners' environment (on a hub or Binder, the hub runs outside it)
        if extra not in ("train", "hub"):
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


def _post_build_calls(tmp_path: Path) -> list[list[str]]:
    """Run postBuild with `python`, `python3`, `pip` and `nbgrader` replaced by recorders;
    return the argument lists they were called with (nothing is installed or written)."""
    bin_dir, log = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    for name in ("python", "python3", "pip", "nbgrader"):
        fake = bin_dir / name
        fake.write_text(f'#!/bin/sh\nprintf "%s\\037" {name} "$@" >> "{log}"\nprintf "\\n" >> "{log}"\n')
        fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    subprocess.run(["bash", str(ROOT / "postBuild")], cwd=ROOT, env=env, check=True, timeout=60)
    return [line.rstrip("\037").split("\037") for line in log.read_text().splitlines() if line]


def test_binder_post_build_installs_pagedkv_with_what_environment_yml_provides(tmp_path):
    """postBuild is valid bash, makes exactly one pip call with options pip accepts, installs
    this directory's pagedkv, and (with --no-deps) environment.yml already holds its
    runtime dependencies."""
    from pip._internal.commands import create_command  # pip's own parser: bad flags exit

    post_build = ROOT / "postBuild"
    assert os.access(post_build, os.X_OK), "Binder runs postBuild as an executable"
    subprocess.run(["bash", "-n", str(post_build)], check=True, timeout=60)
    calls = _post_build_calls(tmp_path)
    pip_calls = [c for c in calls if c[1:4] == ["-m", "pip", "install"] or c[:2] == ["pip", "install"]]
    # Then the student version of the exercises (docs/teaching.md: the Binder link opens it).
    release = [c for c in calls if c[:3] == ["nbgrader", "generate_assignment", "exercises"]]
    assert len(pip_calls) == 1 and pip_calls + release == calls, f"expected one pip install, got {calls}"
    assert len(release) == 1 and "--CourseDirectory.release_directory=build/release" in release[0]
    argv = pip_calls[0][4:] if pip_calls[0][0] != "pip" else pip_calls[0][2:]
    options, targets = create_command("install").parse_args(argv)
    installed = [*options.editables, *targets]
    assert len(installed) == 1, f"postBuild should install pagedkv only, got {installed}"
    target = (ROOT / installed[0]).resolve()
    assert (
        tomllib is None
        or tomllib.loads((target / "pyproject.toml").read_text())["project"]["name"] == "pagedkv"
    )
    if options.ignore_dependencies:  # --no-deps: conda must already have installed them
        env = yaml.safe_load((ROOT / "environment.yml").read_text())
        conda = {_normalize(d)[0] for d in env["dependencies"] if isinstance(d, str)}
        runtime = {_normalize(d)[0] for d in _pyproject()["project"]["dependencies"]}
        assert runtime <= conda, f"postBuild uses --no-deps but environment.yml lacks {runtime - conda}"
