"""A tracking server that is down at the start, or goes away during a run: one line, quickly, with
the local checkpoints kept and the command that continues the run (resuming itself is checked in
tests/pretrain/test_resume.py). The server is a real ``mlflow server`` on a free local port with a
SQLite backend in a temporary folder."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from harness.cli.tracked_cli import run_cli
from pretrain.cli import PretrainCLI
from tests import preloaded

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"
QUICK = [
    "--samples_every_n_steps=0",
    "--trainer.enable_progress_bar=false",
    "--trainer.log_every_n_steps=1",
    "--data.max_sentences=200",
    "--trainer.limit_val_batches=2",
]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server(folder: Path, port: int) -> subprocess.Popen:
    """``mlflow server`` in its own process group (it starts workers), answering /health."""
    server = subprocess.Popen(
        [
            str(Path(sys.executable).with_name("mlflow")),
            "server",
            "--backend-store-uri",
            f"sqlite:///{folder / 'server.db'}",
            "--artifacts-destination",
            str(folder / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if requests.get(f"http://127.0.0.1:{port}/health", timeout=1).ok:
                return server
        except requests.RequestException:
            pass
        assert server.poll() is None, "mlflow server exited at start"
        time.sleep(0.5)
    stop_server(server)
    pytest.fail("mlflow server did not answer within 120 s")


def stop_server(server: subprocess.Popen) -> None:
    try:
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    server.wait(timeout=30)


def test_a_server_down_at_the_start_is_one_line_within_seconds(tmp_path, monkeypatch, capsys):
    uri = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.chdir(tmp_path)
    started = time.monotonic()
    code = run_cli(PretrainCLI, ["fit", "--config", str(SMOKE)])
    elapsed = time.monotonic() - started
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and elapsed < 15, (code, elapsed)
    assert [line for line in lines if line.startswith("error:")] == [lines[-1]]
    assert lines[-1].startswith(f"error: MLFLOW_TRACKING_URI={uri}: the tracking server does not answer")


@pytest.mark.slow
def test_a_server_killed_mid_run_ends_the_run_in_one_line_keeping_its_checkpoints(tmp_path, real_mrpc_dir):
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MRPC_DIR": str(real_mrpc_dir), "OMP_NUM_THREADS": "1"}
    server, run = start_server(tmp_path, port), None
    try:
        run = subprocess.Popen(
            preloaded.command("pretrain", "fit", "--config", str(SMOKE), *QUICK, "--trainer.max_epochs=1000", env=env),
            cwd=tmp_path,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 240
        while not list(tmp_path.glob("checkpoints/pretrain/*/last.ckpt")):
            assert run.poll() is None and time.monotonic() < deadline, "the run ended before its first checkpoint"
            time.sleep(0.1)
        stop_server(server)
        killed = time.monotonic()
        stderr = run.communicate(timeout=300)[1]
        assert time.monotonic() - killed < 90
    finally:
        stop_server(server)
        if run is not None and run.poll() is None:
            run.kill()
    assert run.returncode == 1, stderr[-3000:]
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr and [line for line in lines if line.startswith("error:")] == [lines[-1]]
    (last,) = tmp_path.glob("checkpoints/pretrain/*/last.ckpt")
    assert lines[-1].startswith(f"error: tracking server {uri} stopped answering during the run")
    assert f"--ckpt_path={last}" in lines[-1]
