"""The Ray engine's local instance as the suite starts it (slow: a Ray instance of its own)."""

import os

import pytest

from benchmarks.engine import RayEngine

pytestmark = pytest.mark.slow


def test_tasks_run_at_the_suites_own_niceness(monkeypatch):
    """Ray raises its workers' niceness by 15: the study's cells then lost the CPU to any ordinary
    process (the process pool ran them at the suite's own). Also under ``nice -n 5 make test``."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    engine = RayEngine(jobs=1)
    try:
        handle = engine.submit(lambda: os.nice(0), (), {"num_cpus": 1})
        assert engine.result(handle) == os.nice(0)
    finally:
        engine.close()
