"""What the Makefile's install stamp is named after: a hash of what an install depends on in
``pyproject.toml`` — the build requirements, ``requires-python``, the dependency lists (extras
included) and the package list — never its modification time, so a checkout, a version bump or
an edited description does not reinstall the venv, and a changed dependency always does.

Standard library only: ``make`` runs it with the system Python before the venv exists.
``python3 harness/dependency_hash.py [pyproject.toml]`` prints 16 hex digits.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path


def install_inputs(text: str) -> object:
    """The parts of a pyproject.toml an install depends on; the whole text where ``tomllib`` is
    missing (Python 3.10): still its content, not its mtime."""
    try:
        import tomllib  # Python >= 3.11
    except ModuleNotFoundError:
        return text
    document = tomllib.loads(text)
    project, setuptools = document.get("project", {}), document.get("tool", {}).get("setuptools", {})
    return {
        "build-system": document.get("build-system", {}),
        "requires-python": project.get("requires-python"),
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": project.get("optional-dependencies", {}),
        "packages": setuptools.get("packages"),
        "package-data": setuptools.get("package-data"),
    }


def dependency_hash(text: str) -> str:
    """16 hex digits of sha256 over :func:`install_inputs` (key order and TOML layout do not matter)."""
    canonical = json.dumps(install_inputs(text), sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]


if __name__ == "__main__":
    print(dependency_hash(Path(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml").read_text(encoding="utf-8")))
