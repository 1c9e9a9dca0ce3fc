"""What ``make server`` lets through to ``mlflow server``, from its command line and from its
environment alike: ``mlflow server`` reads most of its options from variables too
(``MLFLOW_SERVER_CORS_ALLOWED_ORIGINS`` is ``--cors-allowed-origins``), and its web servers read
their own (``GUNICORN_CMD_ARGS``, ``UVICORN_*``), so a check of the flags alone leaves the door the
environment opens. Each option is checked once, in whichever form it comes.

- every server: the options this harness sets (store, artifacts, host, port, app) come from it
  alone; at most :data:`MAX_WORKERS` workers; no switched-off security middleware, no ``*`` CORS
  origin and no ``--x-frame-options=NONE`` (each lets another web page act with a user's browser);
- ``--no-auth`` (no users: it must stay on 127.0.0.1): only :data:`NO_AUTH_OPTIONS`, with loopback
  names only in ``--allowed-hosts``, and no web server options in the environment.

Variables the harness sets for the server itself (the store URI, the auth app's settings) are
overwritten in the server's environment, so a value of the user's there is no option.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from harness.errors import UserError
from harness.server.auth import is_loopback

# Every option of ``mlflow server`` (MLflow 3.17) and the variable it also reads, None where it
# reads none; a test holds this to the installed MLflow's own command.
OPTION_VARIABLES = {
    "--backend-store-uri": "MLFLOW_BACKEND_STORE_URI",
    "--read-replica-backend-store-uri": "MLFLOW_READ_REPLICA_BACKEND_STORE_URI",
    "--registry-store-uri": "MLFLOW_REGISTRY_STORE_URI",
    "--default-artifact-root": "MLFLOW_DEFAULT_ARTIFACT_ROOT",
    "--serve-artifacts": "MLFLOW_SERVE_ARTIFACTS",
    "--artifacts-only": "MLFLOW_ARTIFACTS_ONLY",
    "--artifacts-destination": "MLFLOW_ARTIFACTS_DESTINATION",
    "--host": "MLFLOW_HOST",
    "--port": "MLFLOW_PORT",
    "--workers": "MLFLOW_WORKERS",
    "--static-prefix": "MLFLOW_STATIC_PREFIX",
    "--allowed-hosts": "MLFLOW_SERVER_ALLOWED_HOSTS",
    "--cors-allowed-origins": "MLFLOW_SERVER_CORS_ALLOWED_ORIGINS",
    "--disable-security-middleware": "MLFLOW_SERVER_DISABLE_SECURITY_MIDDLEWARE",
    "--x-frame-options": "MLFLOW_SERVER_X_FRAME_OPTIONS",
    "--gunicorn-opts": "MLFLOW_GUNICORN_OPTS",
    "--waitress-opts": None,
    "--uvicorn-opts": "MLFLOW_UVICORN_OPTS",
    "--dev": None,
    "--expose-prometheus": "MLFLOW_EXPOSE_PROMETHEUS",
    "--app-name": None,
    "--trace-archival-config": "MLFLOW_TRACE_ARCHIVAL_CONFIG",
    "--secrets-cache-ttl": None,
    "--secrets-cache-max-size": None,
    "--workspace-store-uri": "MLFLOW_WORKSPACE_STORE_URI",
    "--enable-workspaces": None,
}
SHORT_FLAGS = {"-w": "--workers", "-h": "--host", "-p": "--port"}
OWN_FLAGS = (
    "--app-name",
    "--backend-store-uri",
    "--artifacts-destination",
    "--default-artifact-root",
    "--registry-store-uri",
    "--host",
    "--port",
)  # set by this module; ARGS may not override them
# Variables the harness sets in the server's environment itself (a user's value is overwritten).
HARNESS_VARIABLES = ("MLFLOW_BACKEND_STORE_URI",)
# What ``--no-auth`` lets through to ``mlflow server``: options that cannot widen who reaches it
# (a server option not named here, such as --gunicorn-opts='--bind 0.0.0.0:…', is refused).
NO_AUTH_OPTIONS = ("--workers", "-w", "--static-prefix", "--allowed-hosts", "--x-frame-options", "--expose-prometheus")
# The web servers' own variables (refused with ``--no-auth``: they can bind other addresses or
# trust forwarded client addresses); uvicorn reads WEB_CONCURRENCY and FORWARDED_ALLOW_IPS.
NO_AUTH_VARIABLE_PREFIXES = ("GUNICORN_", "UVICORN_", "WEB_CONCURRENCY", "FORWARDED_ALLOW_IPS")
MAX_WORKERS = 16
FALSE_WORDS = ("", "0", "false", "no", "off")


def flag_values(extra: list[str]) -> list[tuple[str, str]]:
    """``(flag, value)`` of every option in ``extra``: ``--a=1`` and ``--a 1`` give ``("--a", "1")``
    (short flags by their long name); a switch's value is ``"true"``."""
    found = []
    for index, argument in enumerate(extra):
        if not argument.startswith("-"):
            continue
        name, equals, value = argument.partition("=")
        name = SHORT_FLAGS.get(name, name)
        if not equals:
            following = extra[index + 1] if index + 1 < len(extra) else None
            value = following if following is not None and not following.startswith("-") else "true"
        found.append((name, value))
    return found


def variable_values(environ: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """``(variable, flag, value)`` of every ``mlflow server`` option set in ``environ`` (a variable
    set to the empty text is unset for MLflow)."""
    return [
        (variable, flag, environ[variable])
        for flag, variable in OPTION_VARIABLES.items()
        if variable and environ.get(variable) and variable not in HARNESS_VARIABLES
    ]


def check_server_options(no_auth: bool, extra: list[str], environ: Mapping[str, str] | None = None) -> None:
    """Refuse, in one line naming the flag or variable, what would open the server further than
    its mode allows (see the module's docstring); ``environ``: the server's environment to be."""
    environ = os.environ if environ is None else environ
    given = [(flag, flag, value) for flag, value in flag_values(extra)]
    given += [(variable, flag, value) for variable, flag, value in variable_values(environ)]
    for source, flag, value in given:
        if flag in OWN_FLAGS:
            raise UserError(
                f"{source if source == flag else f'{source} is set ({flag})'}: set by make server itself; use its "
                "own flags (--host, --port, BACKEND_STORE_URI, ARTIFACTS_DESTINATION, --no-auth)"
            )
        if no_auth and flag not in NO_AUTH_OPTIONS:
            what = f"{source} is set" if source != flag else f"{flag} with --no-auth"
            raise UserError(
                f"{what}: only {', '.join(NO_AUTH_OPTIONS)} may be passed to a server without users (it must "
                f"stay on 127.0.0.1); drop --no-auth (users and passwords) or {source}"
            )
        problem = value_problem(flag, value, no_auth)
        if problem:
            named = source if source == flag else f"{source} ({flag})"
            raise UserError(f"{named}={value}: {problem}")
    if no_auth:
        for variable in sorted(environ):
            if variable.startswith(NO_AUTH_VARIABLE_PREFIXES) and environ[variable]:
                raise UserError(
                    f"{variable} is set: with --no-auth the web server takes no options from the "
                    f"environment (it must stay on 127.0.0.1); unset it or drop --no-auth"
                )


def value_problem(flag: str, value: str, no_auth: bool) -> str | None:
    """What is wrong with ``value`` for ``flag`` in this mode; None when nothing is."""
    if flag == "--workers":
        if not value.isdigit() or not 1 <= int(value) <= MAX_WORKERS:
            return f"give 1 to {MAX_WORKERS} workers (each holds its own connections and memory)"
    elif flag == "--disable-security-middleware" and value.strip().lower() not in FALSE_WORDS:
        return "the security middleware (host and origin checks) stays on: any web page could act as a user; drop it"
    elif flag == "--cors-allowed-origins" and "*" in value:
        return "name the origins; '*' lets any web page send requests to the server; drop it or list them"
    elif flag == "--x-frame-options" and value.strip().upper() == "NONE":
        return "any web page could frame the UI (click-jacking); keep SAMEORIGIN or DENY"
    elif flag == "--allowed-hosts" and no_auth:
        outside = [host for host in value.split(",") if not loopback_name(host.strip())]
        if outside:
            return (
                f"{outside[0].strip() or 'an empty name'} is not a loopback name; a server without users answers "
                "127.0.0.1, localhost and ::1 only (drop --no-auth to serve other names)"
            )
    return None


def loopback_name(host: str) -> bool:
    """Whether ``host`` (``name``, ``name:port``, ``[::1]:port``; no pattern) names loopback only."""
    if not host or "*" in host:
        return False
    if host.startswith("["):
        host = host[1 : host.find("]")] if "]" in host else ""
    elif host.count(":") == 1:
        host = host.partition(":")[0]
    return bool(host) and is_loopback(host)
