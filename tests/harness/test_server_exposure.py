"""What the team server exposes: ``--no-auth`` stays on 127.0.0.1 whatever else is passed (a list
of options that cannot widen who reaches it, nothing else), and the artifacts it stores are the
starting user's alone (files 0600, folders 0700, those already there too)."""

from __future__ import annotations

import stat
import time

import pytest
import requests
from mlflow.tracking import MlflowClient

from harness.server.secret_files import private_tree
from harness.server.tracking_server import main, parse, start_mlflow_server, stop_process_group
from tests.harness.test_server import free_port
from tests.helpers import assert_one_line_error


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    "argv, name",
    [
        (["--no-auth", "--gunicorn-opts=--bind 0.0.0.0:5013"], "--gunicorn-opts"),
        (["--no-auth", "--gunicorn-opts", "--bind 0.0.0.0:5013"], "--gunicorn-opts"),
        (["--no-auth", "--uvicorn-opts=--host 0.0.0.0"], "--uvicorn-opts"),
        (["--no-auth", "--waitress-opts=--listen=*:5013"], "--waitress-opts"),
        (["--no-auth", "--cors-allowed-origins=*"], "--cors-allowed-origins"),
        (["--no-auth", "--disable-security-middleware"], "--disable-security-middleware"),
        (["--no-auth", "--dev"], "--dev"),
        (["--gunicorn-opts=--bind 0.0.0.0:5013", "--no-auth"], "--gunicorn-opts"),
    ],
)
def test_no_auth_refuses_every_option_not_known_safe_in_one_line(argv, name):
    assert_one_line_error(lambda: parse(argv), f"{name} with --no-auth: only --workers")


def test_a_refused_option_starts_nothing(capsys, tmp_path):
    argv = ["--no-auth", "--gunicorn-opts=--bind 0.0.0.0:5013"]
    assert main([*argv, "--postgres-dir", str(tmp_path / "pg"), "--secrets-dir", str(tmp_path / "s")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --gunicorn-opts with --no-auth"), lines
    assert not (tmp_path / "pg").exists() and not (tmp_path / "s").exists()


@pytest.mark.parametrize("variable", ["MLFLOW_GUNICORN_OPTS", "MLFLOW_UVICORN_OPTS", "GUNICORN_CMD_ARGS"])
def test_no_auth_refuses_web_server_options_from_the_environment(variable, monkeypatch):
    monkeypatch.setenv(variable, "--bind 0.0.0.0:5013")
    assert_one_line_error(lambda: parse(["--no-auth"]), f"{variable} is set")


def test_no_auth_passes_the_known_safe_options_and_auth_any_other():
    args, extra = parse(["--no-auth", "--workers", "2", "--allowed-hosts=localhost", "--static-prefix", "/mlflow"])
    assert args.no_auth and extra == ["--workers", "2", "--allowed-hosts=localhost", "--static-prefix", "/mlflow"]
    assert parse(["--gunicorn-opts=--timeout 120"])[1] == ["--gunicorn-opts=--timeout 120"]  # with users: allowed


def test_a_private_tree_narrows_what_is_there(tmp_path):
    folder = tmp_path / "artifacts"
    (folder / "1" / "run").mkdir(parents=True, mode=0o755)
    (folder / "1" / "run" / "model.ckpt").write_text("weights")
    (folder / "1" / "run" / "model.ckpt").chmod(0o644)
    private_tree(folder)
    assert {mode(path) for path in [folder, *folder.rglob("*")] if path.is_dir()} == {0o700}
    assert mode(folder / "1" / "run" / "model.ckpt") == 0o600


@pytest.mark.slow
def test_the_server_keeps_old_and_new_artifacts_private(tmp_path):
    artifacts = tmp_path / "artifacts"
    (artifacts / "old").mkdir(parents=True)
    (artifacts / "old" / "a.txt").write_text("from an older server")
    (artifacts / "old" / "a.txt").chmod(0o644)
    port = free_port()
    server = start_mlflow_server(
        f"sqlite:///{tmp_path / 'server.db'}", artifacts, "127.0.0.1", port, extra=["--workers", "1"]
    )
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            try:
                if requests.get(f"{url}/health", timeout=1).ok:
                    break
            except requests.RequestException:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "mlflow server did not start"
            time.sleep(0.5)
        client = MlflowClient(url)
        run = client.create_run(client.create_experiment("private"))
        client.log_text(run.info.run_id, "predictions", "predictions/dev.csv")
    finally:
        stop_process_group(server)
    files = [path for path in artifacts.rglob("*") if path.is_file()]
    assert any(path.name == "dev.csv" for path in files)
    assert {mode(path) for path in files} == {0o600}
    assert {mode(path) for path in [artifacts, *artifacts.rglob("*")] if path.is_dir()} == {0o700}
