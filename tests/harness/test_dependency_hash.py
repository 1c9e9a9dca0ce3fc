"""The Makefile's install stamp follows pyproject.toml's dependency lists, never its mtime."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.dependency_hash import dependency_hash

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def test_hash_ignores_what_an_install_does_not_depend_on():
    reworded = PYPROJECT.replace('version = "0.1.0"', 'version = "0.2.0"').replace(
        "description = ", "description = 'x' #"
    )
    assert dependency_hash(reworded + "\n# a comment\n") == dependency_hash(PYPROJECT)


def test_hash_changes_with_a_dependency_or_an_extra():
    assert '"scipy>=1.11"' in PYPROJECT
    assert dependency_hash(PYPROJECT.replace('"scipy>=1.11"', '"scipy>=1.12"')) != dependency_hash(PYPROJECT)
    assert dependency_hash(PYPROJECT.replace('"pytest>=8"', '"pytest>=8", "hypothesis"')) != dependency_hash(PYPROJECT)


@pytest.mark.skipif(shutil.which("make") is None, reason="needs make")
def test_make_reinstalls_only_when_the_dependencies_change(tmp_path):
    for name in ("Makefile", "pyproject.toml", "harness/dependency_hash.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / f".installed-{dependency_hash(PYPROJECT)}").touch()

    def up_to_date() -> bool:  # make -q: exit 0 when the target needs no work
        return subprocess.run(["make", "-q", "install"], cwd=tmp_path, capture_output=True).returncode == 0

    assert up_to_date()
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.replace('version = "0.1.0"', 'version = "0.1.1"'))
    assert up_to_date()  # newer and edited, same dependencies: no reinstall
    (tmp_path / "pyproject.toml").write_text(PYPROJECT.replace('"scipy>=1.11"', '"scipy>=1.12"'))
    assert not up_to_date()
