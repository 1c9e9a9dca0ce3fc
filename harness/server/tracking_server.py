"""A team's tracking server (``make server``): ``mlflow server`` with MLflow's basic-auth app, on
a PostgreSQL backend store, with a proxied artifact root.

``python -m pretrain.team_server [--host 127.0.0.1] [--port 5001] [--no-auth]`` (this module's
:func:`main`, given the stages' experiments and encoder models to create):
- store: ``BACKEND_STORE_URI=postgresql://…`` as given, else a closed local PostgreSQL cluster
  (:mod:`harness.server.postgres`); the URI reaches ``mlflow server`` through its environment, never its
  command line, and is printed without its password;
- users: MLflow's basic-auth app (:mod:`harness.server.auth`): the admin password and the Flask
  secret key generated into 0600 files under ``.cache/server/``, every request authenticated,
  new users READ by default, users stored in the same database; ``make server-user`` adds users;
- artifacts: stored under ``ARTIFACTS_DESTINATION`` (default ``.cache/mlflow-artifacts/``) and
  proxied (``mlflow-artifacts:/`` URIs) under the same permissions, so clients need no file access;
- ``--no-auth`` (no users, anyone who reaches the port can do anything) is for 127.0.0.1 only: a
  non-loopback host, or any server option but a few that cannot widen who reaches it, is refused
  in one line, in a flag or in the environment (:mod:`harness.server.server_options`, which also
  bounds what a server with users takes);
- artifact files are 0600 in 0700 folders, those already there too.

The console shows where the secrets are, never a secret. Ctrl-C (or SIGTERM) stops the MLflow
server, then the cluster.
"""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import requests
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from harness.server.auth import ADMIN, AuthFiles, is_loopback
from harness.server.postgres import DATA_DIR, SECRETS_DIR, LocalPostgres
from harness.server.postgres import free_port as free_port  # re-exported
from harness.server.secret_files import private_tree
from harness.server.server_options import check_server_options
from harness.tracking.store import REPO_ROOT, ensure_experiment

DEFAULT_PORT = 5001
ARTIFACTS_DIR = REPO_ROOT / ".cache" / "mlflow-artifacts"


@dataclass(frozen=True)
class Team:
    """What the server creates as its admin at start, so that no user manages it for having been
    first: the stages' experiments and encoder models. The caller names them (harness imports no
    stage): ``pretrain.team_server`` reads them from the family registry."""

    experiments: tuple[str, ...] = ()
    models: dict[str, str] = field(default_factory=dict)  # registered model name → its description


ARTIFACT_UMASK = 0o077  # the server's artifact files 0600, its folders 0700


def without_password(uri: str) -> str:
    """``uri`` with any password replaced by ``***`` (for the console)."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    netloc = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def start_mlflow_server(
    backend_uri: str,
    artifacts: Path,
    host: str,
    port: int,
    log=None,
    extra: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen:
    """``mlflow server`` in its own process group (so one signal stops its workers too), the store URI
    in its environment (``MLFLOW_BACKEND_STORE_URI``), without MLflow's GenAI job runner (seven
    consumer processes this harness never uses) unless ``MLFLOW_SERVER_ENABLE_JOB_EXECUTION`` says otherwise.
    The artifacts are the starting user's alone: what is there is narrowed to 0600 files in 0700
    folders, and the server writes new ones so (its umask)."""
    private_tree(artifacts)
    command = [
        sys.executable,
        "-m",
        "mlflow",
        "server",
        "--artifacts-destination",
        str(artifacts),
        "--host",
        host,
        "--port",
        str(port),
        *(extra or []),
    ]
    environment = {
        **os.environ,
        **(env or {}),
        "MLFLOW_BACKEND_STORE_URI": backend_uri,
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": os.environ.get("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false"),
    }
    for name in ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_ADMIN_PASSWORD"):
        environment.pop(name, None)  # a client's credentials are no business of the server's
    return subprocess.Popen(
        command,
        start_new_session=True,
        env=environment,
        stdout=log,
        umask=ARTIFACT_UMASK,
        stderr=subprocess.STDOUT if log else None,
    )


def wait_healthy(url: str, process: subprocess.Popen, timeout: float = 120.0) -> None:
    """Wait until ``url``/health answers; a server that exits first is a one-line error."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise UserError(f"mlflow server exited with status {process.returncode} before it answered at {url}")
        try:
            if requests.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.5)
    raise UserError(f"mlflow server did not answer at {url}/health within {timeout:.0f} s")


def check_locked(url: str, admin_password: str) -> None:
    """The door works: a request without credentials is refused (401), the admin's is served."""
    search = f"{url}/api/2.0/mlflow/experiments/search?max_results=1"
    anonymous = requests.get(search, timeout=10).status_code
    admin = requests.get(search, auth=(ADMIN, admin_password), timeout=10).status_code
    if anonymous != 401 or admin != 200:
        raise UserError(
            f"the auth app is not guarding {url}: anonymous {anonymous}, admin {admin} (expected 401 and 200); stopping"
        )


def create_team_resources(url: str, admin_password: str, team: Team) -> None:
    """Create the stages' experiments and encoder models as the admin, so that no user manages
    (and may delete) them for having been first (MLflow gives a creator MANAGE): users get what
    ``make server-user`` grants."""
    os.environ["MLFLOW_TRACKING_USERNAME"], os.environ["MLFLOW_TRACKING_PASSWORD"] = ADMIN, admin_password
    for name in team.experiments:
        ensure_experiment(name, url)
    client = MlflowClient(url)
    for name, description in team.models.items():
        try:
            client.create_registered_model(name, description=description)
        except MlflowException as error:
            if error.error_code != "RESOURCE_ALREADY_EXISTS":
                raise


def stop_process_group(process: subprocess.Popen, grace: float = 5.0) -> None:
    """SIGINT the server's process group (what Ctrl-C sends; MLflow's parent process ignores
    SIGTERM), then SIGKILL whatever is left of the group (its job consumers) after ``grace`` s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    process.wait()


def interrupt(signal_number, frame):
    """SIGTERM stops the server the way Ctrl-C does."""
    raise KeyboardInterrupt


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description="MLflow tracking server with users, on PostgreSQL (make server)")
    parser.add_argument("--host", default=os.environ.get("HOST") or "127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or DEFAULT_PORT))
    parser.add_argument("--backend-store-uri", default=os.environ.get("BACKEND_STORE_URI") or None)
    parser.add_argument(
        "--artifacts-destination", type=Path, default=Path(os.environ.get("ARTIFACTS_DESTINATION") or ARTIFACTS_DIR)
    )
    parser.add_argument("--postgres-dir", type=Path, default=DATA_DIR)
    parser.add_argument(
        "--secrets-dir",
        type=Path,
        default=SECRETS_DIR,
        help="where the generated passwords and keys are kept (mode 0700, files 0600)",
    )
    parser.add_argument(
        "--no-auth", action="store_true", help="no users: anyone who reaches the port may do anything (127.0.0.1 only)"
    )
    args, extra = parser.parse_known_args(argv)  # anything else goes to `mlflow server` (--allowed-hosts …)
    if args.no_auth and not is_loopback(args.host):
        raise UserError(
            f"--host {args.host} with --no-auth: anyone who reaches the port could read, change and "
            f"delete every run; drop --no-auth (users and passwords) or serve on 127.0.0.1"
        )
    check_server_options(args.no_auth, extra)  # the flags and their forms in the environment
    return args, extra


def main(argv: list[str] | None = None, team: Team = Team()) -> int:
    """Run the server until Ctrl-C or SIGTERM; ``team``: what it creates as its admin at start."""
    database, server = None, None
    signal.signal(signal.SIGTERM, interrupt)
    try:
        args, extra = parse(argv)
        backend, env = args.backend_store_uri, {}
        if not backend:
            database = LocalPostgres(args.postgres_dir, args.secrets_dir).start()
            backend, env = database.uri, database.client_env
            print(
                f"PostgreSQL  {backend}  (cluster {database.data}, as {database.user or 'this user'}; password "
                f"authentication, 127.0.0.1 only; role password in {database.password_file})",
                flush=True,
            )
        else:
            print(f"PostgreSQL  {without_password(backend)}  (BACKEND_STORE_URI, as given)", flush=True)
        auth = None if args.no_auth else AuthFiles(args.secrets_dir)
        if auth:
            for note in auth.prepare(backend):
                print(f"auth        {note}", flush=True)
            env.update(auth.server_env())
            extra = ["--app-name", "basic-auth", *extra]
        url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}"
        server = start_mlflow_server(
            backend, args.artifacts_destination.resolve(), args.host, args.port, extra=extra, env=env
        )
        wait_healthy(url, server)
        if auth:
            check_locked(url, env["MLFLOW_AUTH_ADMIN_PASSWORD"])
            create_team_resources(url, env["MLFLOW_AUTH_ADMIN_PASSWORD"], team)
        print("\n".join(summary(args, url, auth)), flush=True)
        server.wait()
        return server.returncode or 0
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\nstopping …", flush=True)
        return 0
    finally:
        if server is not None:
            stop_process_group(server)
        if database is not None:
            database.stop()


def summary(args: argparse.Namespace, url: str, auth: AuthFiles | None) -> list[str]:
    team = f"http://{socket.gethostname()}:{args.port}"
    lines = [f"MLflow server  http://{args.host}:{args.port}  (artifacts in {args.artifacts_destination.resolve()})"]
    if auth:
        lines += [
            "  users:         every request needs a user; new users can read every experiment (READ)",
            f"  admin:         user {ADMIN}, password in {auth.admin_password} (readable only by you)",
            "  add a user:    make server-user NAME=<name> ROLE=read|edit|manage"
            + ("" if args.port == DEFAULT_PORT else f" PORT={args.port}")
            + "  (prints what the user exports)",
        ]
    else:
        lines += [f"  no users (--no-auth): anyone who reaches 127.0.0.1:{args.port} can read, change and delete runs"]
    lines += [
        f"  this machine:  export MLFLOW_TRACKING_URI={url}",
        f"  a team:        export MLFLOW_TRACKING_URI={team}"
        + (
            "  (start with HOST=0.0.0.0 and --allowed-hosts for other machines)"
            if is_loopback(args.host)
            else "  (plain HTTP: put TLS in front, docs/server.md)"
        ),
        "  Ctrl-C stops the server and the database.",
    ]
    return lines


if __name__ == "__main__":
    sys.exit(
        "error: start the team server with `make server` (python -m pretrain.team_server), which names "
        "the stages' experiments and encoder models"
    )
