"""pytest's warning filters (``pyproject.toml``): a warning raised in the project's own code fails
its test, a third-party warning named there is ignored, and any other third-party one is shown,
never silently dropped."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WARNING_TESTS = """import warnings


def warn(category, module, message="a warning"):
    warnings.warn_explicit(message, category, f"{module.replace('.', '/')}.py", 1, module=module)


def test_ours_in_harness():
    warn(UserWarning, "harness.cli.console")


def test_ours_in_a_test():
    warn(DeprecationWarning, "tests.downstream.test_heads")


def test_a_named_third_party_one():
    warn(UserWarning, "pytorch_lightning.loops.fit_loop", "The number of training batches (2) is smaller")


def test_an_unnamed_third_party_one():
    warn(DeprecationWarning, "somelibrary.module", "somelibrary warns")


def test_a_module_that_only_starts_like_ours():
    warn(UserWarning, "harnessed")
"""


def test_the_projects_warnings_fail_and_third_party_ones_are_named_or_shown(tmp_path):
    (tmp_path / "test_warnings.py").write_text(WARNING_TESTS)
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:xdist",
            "-c",
            str(REPO / "pyproject.toml"),
            "--rootdir",
            str(tmp_path),
            "-rA",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    failed = {line.split("::")[1].split(" ")[0] for line in run.stdout.splitlines() if line.startswith("FAILED")}
    assert failed == {"test_ours_in_harness", "test_ours_in_a_test"}, run.stdout[-3000:]
    assert "somelibrary warns" in run.stdout and "harnessed" not in failed
    assert "The number of training batches" not in run.stdout
