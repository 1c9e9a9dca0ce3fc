"""What version of the code produced a result: a content hash of the harness's own source, so a
benchmark never reuses a cell computed by other code, and the git commit for people to read."""

from __future__ import annotations

import functools
import hashlib
import subprocess

from harness.tracking.runs import REPO_ROOT

# The packages whose code decides a number, and the file that pins the libraries they run on.
SOURCE_PACKAGES = ("harness", "pretrain", "downstream", "benchmarks")
PINS = "pyproject.toml"


@functools.cache
def source_version() -> str:
    """sha256 over every ``.py`` file of the harness's packages and the dependency pins: committed
    or not, any change to the code gives another version (a commit that touches no code does not)."""
    digest = hashlib.sha256()
    files = sorted(path for package in SOURCE_PACKAGES for path in (REPO_ROOT / package).rglob("*.py"))
    pins = REPO_ROOT / PINS
    for path in [*files, *([pins] if pins.is_file() else [])]:
        digest.update(path.relative_to(REPO_ROOT).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


@functools.cache
def git_commit() -> str | None:
    """``<commit>`` or ``<commit>+dirty`` of the repository, None outside git."""

    def git(*arguments: str) -> str:
        return subprocess.run(
            ["git", *arguments], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no", "--", *SOURCE_PACKAGES)
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("+dirty" if dirty else "")
