"""The team server's door, without starting it: secret files only their owner can read, the admin
password from MLFLOW_ADMIN_PASSWORD at the first start only, no auth only on loopback, passwords
never printed, the health check's one line for each refusal. (The server itself, its users and
its database: tests/ui/test_server.py.)"""

from __future__ import annotations

import stat

import pytest

from harness.datasets.registry import dataset_name
from harness.errors import UserError
from harness.server.auth import AUTH_CACHE_SECONDS, AuthFiles, is_loopback
from harness.server.secret_files import read_secret, secret
from harness.server.tracking_server import main, without_password
from harness.tracking.store import denial
from pretrain.cli import PretrainCLI
from pretrain.encoders.registry import model_name
from pretrain.families import pretrained_families
from pretrain.team_server import team


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_a_secret_is_generated_once_into_a_0600_file_in_a_0700_folder(tmp_path):
    path = tmp_path / "server" / "admin.password"
    value, created = secret(path)
    assert created and len(value) >= 32 and mode(path) == 0o600 and mode(path.parent) == 0o700
    assert secret(path) == (value, False)  # the same secret at the next start


def test_a_secret_file_others_could_read_is_refused(tmp_path):
    path = tmp_path / "key"
    secret(path)
    path.chmod(0o644)
    with pytest.raises(UserError, match=rf"^{path}: mode 0644 lets other users read a secret; `chmod 600 {path}`"):
        read_secret(path)


def test_the_admin_password_comes_from_the_variable_at_the_first_start_only(tmp_path, monkeypatch):
    files = AuthFiles(tmp_path / "server")
    monkeypatch.setenv("MLFLOW_ADMIN_PASSWORD", "a-team-chosen-password")
    notes = files.prepare("postgresql://mlflow@127.0.0.1:5432/mlflow")
    assert read_secret(files.admin_password) == "a-team-chosen-password"
    assert notes == [f"admin password: from MLFLOW_ADMIN_PASSWORD, kept in {files.admin_password}"]
    monkeypatch.setenv("MLFLOW_ADMIN_PASSWORD", "another-password-later")
    assert "read at the first start only" in files.prepare("postgresql://mlflow@127.0.0.1:5432/mlflow")[0]
    assert read_secret(files.admin_password) == "a-team-chosen-password"
    config = files.config.read_text()
    assert "default_permission = READ" in config and "password" not in config.replace("admin_username", "")
    assert all(mode(path) == 0o600 for path in files.folder.iterdir())
    env = files.server_env()
    assert (
        env["MLFLOW_AUTH_ADMIN_PASSWORD"] == "a-team-chosen-password"
        and len(env["MLFLOW_FLASK_SERVER_SECRET_KEY"]) == 64
    )


def test_mlflow_reads_the_config_with_its_credential_cache_on(tmp_path, monkeypatch):
    from mlflow.server.auth.config import read_auth_config

    files = AuthFiles(tmp_path / "server")
    files.prepare("postgresql://mlflow@127.0.0.1:5432/mlflow")
    monkeypatch.setenv("MLFLOW_AUTH_CONFIG_PATH", str(files.config))
    config = read_auth_config()
    assert config.auth_cache_ttl_seconds == AUTH_CACHE_SECONDS > 0  # MLflow's default 0: a hash check per request
    assert (config.default_permission, config.admin_username) == ("READ", "admin")


@pytest.mark.parametrize(
    "value, message", [("short", "needs at least 12 characters"), ("password1234", "MLflow's old published default")]
)
def test_a_weak_admin_password_is_refused_in_one_line(tmp_path, monkeypatch, value, message):
    monkeypatch.setenv("MLFLOW_ADMIN_PASSWORD", value)
    with pytest.raises(UserError, match=rf"^MLFLOW_ADMIN_PASSWORD: .*{message}"):
        AuthFiles(tmp_path).prepare("postgresql://mlflow@127.0.0.1:5432/mlflow")


def test_a_backend_uri_is_printed_without_its_password():
    assert without_password("postgresql://mlflow:s3cret@db:5432/mlflow") == "postgresql://mlflow:***@db:5432/mlflow"
    assert without_password("postgresql://mlflow@127.0.0.1:5432/mlflow") == "postgresql://mlflow@127.0.0.1:5432/mlflow"


def test_loopback_hosts():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1")
    assert not is_loopback("0.0.0.0") and not is_loopback("::") and not is_loopback("10.1.2.3")


@pytest.mark.parametrize(
    "argv, message",
    [
        (
            ["--host", "0.0.0.0", "--no-auth"],
            "error: --host 0.0.0.0 with --no-auth: anyone who reaches the port could read, change and delete every run",
        ),
        (["--app-name", "basic-auth"], "error: --app-name: set by make server itself"),
    ],
)
def test_an_open_door_is_refused_in_one_line_before_anything_starts(argv, message, capsys, tmp_path):
    assert main([*argv, "--postgres-dir", str(tmp_path / "pg"), "--secrets-dir", str(tmp_path / "s")]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), lines
    assert not (tmp_path / "pg").exists() and not (tmp_path / "s").exists()


def test_a_refusal_names_the_variable_to_set_or_the_permission(monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.mlflow/credentials
    assert denial(401, "read experiments").startswith(
        "the tracking server needs credentials (401): export MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
    )
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ada")
    assert denial(401, "read experiments") == (
        "the tracking server rejected the password of "
        "MLFLOW_TRACKING_USERNAME=ada (401): check MLFLOW_TRACKING_PASSWORD"
    )
    assert denial(403, "call /api/2.0/mlflow/runs/delete").startswith(
        "MLFLOW_TRACKING_USERNAME=ada may not call /api/2.0/mlflow/runs/delete on this tracking server (403 forbidden)"
    )


def test_the_resources_the_server_creates_are_the_stages_own():
    """The experiments the stages log to, and the models ``register_encoder`` adds versions to."""
    created = team()
    assert created.experiments == (PretrainCLI.experiment, dataset_name({}))  # finetune runs: the data set's name
    assert set(created.models) == {
        model_name(family, stage, smoke)
        for family in pretrained_families()
        for stage in ("general", "task")
        for smoke in (False, True)
    }
    assert {"elmo-encoder", "elmo-encoder-smoke"} <= set(created.models)  # a toy never takes a real name
    assert "hf-encoder" not in created.models  # published encoders are not pretrained here


def test_a_request_refused_during_a_run_is_named_in_one_line(monkeypatch):
    from mlflow.exceptions import MlflowException, RestException

    from harness.tracking.store import auth_denial

    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://team-host:5001")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ada")
    refused = MlflowException(
        "API request to endpoint /api/2.0/mlflow/runs/log-batch failed with error code 403 != 200."
        " Response body: 'Permission denied'"
    )
    try:
        raise RuntimeError("the trainer's own wrapper") from refused
    except RuntimeError as wrapped:
        assert auth_denial(wrapped) == (
            "http://team-host:5001: MLFLOW_TRACKING_USERNAME=ada may not call "
            "/api/2.0/mlflow/runs/log-batch on this tracking server (403 forbidden): "
            "ask its admin"
        )
    assert "(401)" in auth_denial(RestException({"error_code": "UNAUTHENTICATED", "message": "who are you"}))
    assert auth_denial(MlflowException("RESOURCE_DOES_NOT_EXIST: no run")) is None
    assert auth_denial(ValueError("not MLflow's")) is None
