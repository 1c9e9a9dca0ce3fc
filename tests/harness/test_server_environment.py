"""``mlflow server`` reads its options from the environment as well as its command line: under
``--no-auth`` the environment forms of the refused options are refused too and those of the
allowed ones are checked like their flags (loopback names only in the allowed hosts); with users,
the checks that stop another web page acting through a user's browser hold in both forms; a few
workers at most; user names are 3-64 characters. Every check runs before anything starts."""

from __future__ import annotations

import pytest

from harness.server.server_options import OPTION_VARIABLES, SHORT_FLAGS
from harness.server.tracking_server import parse
from harness.server.users import main as add_user
from tests.helpers import assert_one_line_error

SERVER_VARIABLES = [variable for variable in OPTION_VARIABLES.values() if variable] + ["GUNICORN_CMD_ARGS"]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch):
    """No server option of the developer's shell leaks into a case."""
    for variable in SERVER_VARIABLES + ["WEB_CONCURRENCY", "FORWARDED_ALLOW_IPS"]:
        monkeypatch.delenv(variable, raising=False)


def test_the_table_names_every_option_of_the_installed_mlflow_server():
    from mlflow.cli import server

    options = {parameter.opts[0]: parameter.envvar for parameter in server.params}
    assert options == OPTION_VARIABLES
    shorts = {short: parameter.opts[0] for parameter in server.params for short in parameter.opts[1:]}
    assert shorts == SHORT_FLAGS


@pytest.mark.parametrize(
    "variable, value",
    [
        ("MLFLOW_SERVER_CORS_ALLOWED_ORIGINS", "*"),
        ("MLFLOW_SERVER_CORS_ALLOWED_ORIGINS", "https://evil.example"),
        ("MLFLOW_SERVER_DISABLE_SECURITY_MIDDLEWARE", "true"),
        ("MLFLOW_GUNICORN_OPTS", "--bind 0.0.0.0:5013"),
        ("MLFLOW_UVICORN_OPTS", "--host 0.0.0.0"),
        ("MLFLOW_SERVE_ARTIFACTS", "false"),
        ("MLFLOW_WORKSPACE_STORE_URI", "sqlite:////tmp/other.db"),
        ("GUNICORN_CMD_ARGS", "--bind 0.0.0.0:5013"),
        ("UVICORN_HOST", "0.0.0.0"),
        ("FORWARDED_ALLOW_IPS", "*"),
    ],
)
def test_no_auth_refuses_a_refused_option_given_through_the_environment(variable, value, monkeypatch):
    monkeypatch.setenv(variable, value)
    assert_one_line_error(lambda: parse(["--no-auth"]), f"{variable} is set", "--no-auth")


@pytest.mark.parametrize(
    "argv, variable, value, fragment",
    [
        (["--no-auth", "--allowed-hosts=*"], None, None, "--allowed-hosts=*: * is not a loopback name"),
        (["--no-auth", "--allowed-hosts", "localhost,team-host"], None, None, "team-host is not a loopback name"),
        (["--no-auth"], "MLFLOW_SERVER_ALLOWED_HOSTS", "*", "MLFLOW_SERVER_ALLOWED_HOSTS (--allowed-hosts)=*"),
        (["--no-auth"], "MLFLOW_SERVER_ALLOWED_HOSTS", "evil.example", "evil.example is not a loopback name"),
        (["--no-auth", "--workers", "64"], None, None, "--workers=64: give 1 to 16 workers"),
        (["--no-auth", "-w", "0"], None, None, "--workers=0: give 1 to 16 workers"),
        (["--no-auth"], "MLFLOW_WORKERS", "1000", "MLFLOW_WORKERS (--workers)=1000: give 1 to 16"),
        (["--workers=17"], None, None, "--workers=17: give 1 to 16"),
        (["--no-auth", "--x-frame-options=NONE"], None, None, "click-jacking"),
        (["--no-auth"], "MLFLOW_SERVER_X_FRAME_OPTIONS", "NONE", "click-jacking"),
        ([], "MLFLOW_SERVER_DISABLE_SECURITY_MIDDLEWARE", "true", "security middleware"),
        (["--disable-security-middleware"], None, None, "security middleware"),
        ([], "MLFLOW_SERVER_CORS_ALLOWED_ORIGINS", "*", "'*' lets any web page"),
        (["--cors-allowed-origins=https://a.example,*"], None, None, "'*' lets any web page"),
        ([], "MLFLOW_REGISTRY_STORE_URI", "sqlite:////tmp/x.db", "MLFLOW_REGISTRY_STORE_URI is set"),
        ([], "MLFLOW_DEFAULT_ARTIFACT_ROOT", "/tmp/open", "set by make server itself"),
        (["-p", "5002"], None, None, "--port: set by make server itself"),
    ],
)
def test_a_value_that_widens_access_is_one_line_in_either_form(argv, variable, value, fragment, monkeypatch):
    if variable:
        monkeypatch.setenv(variable, value)
    assert_one_line_error(lambda: parse(argv), fragment)


def test_what_stays_open_to_each_mode(monkeypatch):
    monkeypatch.setenv("MLFLOW_BACKEND_STORE_URI", "sqlite:////tmp/ignored.db")  # the harness sets its own
    monkeypatch.setenv("MLFLOW_SERVER_ALLOWED_HOSTS", "localhost,127.0.0.1:5001,[::1]:5001")
    monkeypatch.setenv("MLFLOW_WORKERS", "4")
    monkeypatch.setenv("MLFLOW_SERVER_X_FRAME_OPTIONS", "DENY")
    assert parse(["--no-auth", "--allowed-hosts=localhost", "--workers", "16"])[1][-1] == "16"
    monkeypatch.setenv("MLFLOW_SERVER_CORS_ALLOWED_ORIGINS", "https://dashboard.example")
    monkeypatch.setenv("MLFLOW_SERVER_ALLOWED_HOSTS", "team-host,team-host:5001")
    monkeypatch.setenv("GUNICORN_CMD_ARGS", "--timeout 120")
    assert parse(["--host", "0.0.0.0", "--allowed-hosts=team-host"])[1] == ["--allowed-hosts=team-host"]


@pytest.mark.parametrize("name", ["ab", "a", "x" * 65, "admin", "a b"])
def test_a_user_name_outside_3_to_64_characters_is_refused_before_the_server_is_asked(name, capsys):
    assert add_user([name, "--url", "http://127.0.0.1:9"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [f"error: NAME={name}: use 3-64 letters, digits or . _ @ - (and not 'admin')"]


def test_a_user_name_of_3_and_of_64_characters_passes_the_name_check(capsys):
    for name in ("abc", "a" * 64):
        assert add_user([name, "--url", "http://127.0.0.1:9"]) == 2  # no server there: the next check
        assert "the server does not answer" in capsys.readouterr().err
