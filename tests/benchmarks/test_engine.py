"""The Ray engine's local instance as the suite starts it (slow: a Ray instance of its own)."""

import os

import pytest

from benchmarks.engine.ray_cluster import RayEngine

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


def test_the_local_instance_admits_only_the_study(monkeypatch, capsys):
    """Ray's servers listen on every interface. Before, a local instance had whatever
    authentication the environment chose: none under RAY_AUTH_MODE=disabled (any process that
    reached the port joined it and could run code as this user), else the token file
    ``~/.ray/auth_token`` (0644). Now it holds a fresh token of its own, in no file."""
    import subprocess
    import sys

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    engine = RayEngine(jobs=1)
    try:
        assert engine.result(engine.submit(lambda: 1, (), {"num_cpus": 1})) == 1  # the study's own tasks run
        import ray

        address = ray.get_runtime_context().gcs_address
        outsider = {name: value for name, value in os.environ.items() if not name.startswith("RAY_AUTH")}
        joined = subprocess.run(
            [sys.executable, "-c", f"import ray; ray.init(address={address!r}, logging_level=40); print('joined')"],
            env={**outsider, "RAY_AUTH_MODE": "disabled"},
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert joined.returncode != 0 and "joined" not in joined.stdout
    finally:
        engine.close()
    assert "admits only this study's processes" in capsys.readouterr().out
    assert os.environ["RAY_AUTH_MODE"] == "disabled" and "RAY_AUTH_TOKEN" not in os.environ  # restored


def test_the_suites_sigterm_handler_survives_rays_start(monkeypatch):
    """ray.init installs its own SIGTERM handler (sys.exit): the suite then left its parent FAILED
    instead of cancelling its tasks as Ctrl-C does."""
    import signal
    import time

    from harness.interruption import SIGNALLED, Terminated, on_sigterm

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    previous = signal.signal(signal.SIGTERM, on_sigterm)
    engine = RayEngine(jobs=1)
    try:
        engine.start()
        assert signal.getsignal(signal.SIGTERM) is on_sigterm
        with pytest.raises(Terminated):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)
    finally:
        engine.close()
        signal.signal(signal.SIGTERM, previous)
        SIGNALLED.clear()  # this worker goes on: a SIGTERM left seen names every later Ctrl-C SIGTERM
