"""A team's tracking server: ``mlflow server`` on a PostgreSQL backend store with a proxied
artifact root (``make server``).

``python -m harness.server [--host 127.0.0.1] [--port 5001]``:
- ``BACKEND_STORE_URI=postgresql://user:pass@host:5432/db`` set: that database is the store;
- unset: a local PostgreSQL cluster under ``.cache/postgres/`` (Debian's server binaries,
  ``/usr/lib/postgresql/<version>/bin``), created on first use, listening on 127.0.0.1 only, on a
  free port, with database ``mlflow`` for role ``mlflow`` (trust authentication: nothing but this
  machine can reach it, and only the MLflow server connects). PostgreSQL refuses to run as root,
  so under root the cluster runs as the ``postgres`` user (Debian's package creates it; else
  ``nobody``), which then owns ``.cache/postgres/``.
- artifacts: the server stores them under ``ARTIFACTS_DESTINATION`` (default
  ``.cache/mlflow-artifacts/``) and proxies them (``mlflow-artifacts:/`` URIs), so clients need
  no access to that folder.

Ctrl-C (or SIGTERM) stops the MLflow server, then the cluster.
"""

from __future__ import annotations

import argparse
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

from harness.errors import UserError
from harness.tracking import REPO_ROOT

DEFAULT_PORT = 5001
DATA_DIR = REPO_ROOT / ".cache" / "postgres"
ARTIFACTS_DIR = REPO_ROOT / ".cache" / "mlflow-artifacts"
ROLE = DATABASE = "mlflow"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def postgres_bin() -> Path:
    """The newest Debian PostgreSQL server ``bin`` folder, else the one of ``initdb`` on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(Path(path).parts[4]))
    initdb = found[-1] if found else shutil.which("initdb")
    if not initdb:
        raise UserError("PostgreSQL server binaries not found (initdb): `apt-get install postgresql`, "
                        "or set BACKEND_STORE_URI=postgresql://… to use an existing database")
    return Path(initdb).parent


def service_user() -> str | None:
    """The unprivileged user the cluster runs as when this process is root (None: run as ourselves)."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
            return name
        except KeyError:
            continue
    raise UserError("running as root and neither a `postgres` nor a `nobody` user exists for PostgreSQL")


class LocalPostgres:
    """A PostgreSQL cluster in ``directory`` on ``127.0.0.1:port``, run as :func:`service_user`."""

    def __init__(self, directory: Path = DATA_DIR, port: int | None = None):
        self.directory = Path(directory).resolve()
        self.data = self.directory / "data"
        self.port = port or free_port()
        self.bin = postgres_bin()
        self.user = service_user()

    @property
    def uri(self) -> str:
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{DATABASE}"

    def run(self, *command: str) -> subprocess.CompletedProcess:
        prefix = ["runuser", "-u", self.user, "--"] if self.user else []
        process = subprocess.run([*prefix, *command], capture_output=True, text=True)
        if process.returncode != 0:
            log = self.directory / "postgres.log"
            raise UserError(f"{Path(command[0]).name} failed (exit {process.returncode}): "
                            f"{(process.stderr or process.stdout).strip().splitlines()[-1:]}; see {log}")
        return process

    def start(self) -> "LocalPostgres":
        """Create the cluster on first use, start it and create the ``mlflow`` database."""
        self.directory.mkdir(parents=True, exist_ok=True)
        if self.user:
            shutil.chown(self.directory, self.user)
            self.directory.chmod(0o700)
        if not (self.data / "PG_VERSION").is_file():
            self.run(str(self.bin / "initdb"), "-D", str(self.data), "-U", ROLE, "--auth=trust", "--encoding=UTF8",
                     "--no-locale")
        options = f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories=''"
        self.run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.directory / "postgres.log"),
                 "-o", options, "-w", "-t", "60", "start")
        self.create_database()
        return self

    def create_database(self) -> None:
        import psycopg  # noqa: PLC0415 - only the server needs the driver (MLflow's too)

        with psycopg.connect(host="127.0.0.1", port=self.port, user=ROLE, dbname="postgres",
                             autocommit=True) as connection:
            if connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
                connection.execute(f"CREATE DATABASE {DATABASE}")

    def stop(self) -> None:
        if (self.data / "postmaster.pid").is_file():
            self.run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")


def start_mlflow_server(backend_uri: str, artifacts: Path, host: str, port: int, log=None,
                        extra: list[str] | None = None) -> subprocess.Popen:
    """``mlflow server`` in its own process group (so one signal stops its workers too), without
    MLflow's GenAI job runner (seven consumer processes this harness never uses) unless
    ``MLFLOW_SERVER_ENABLE_JOB_EXECUTION`` says otherwise."""
    artifacts.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_uri,
               "--artifacts-destination", str(artifacts), "--host", host, "--port", str(port), *(extra or [])]
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": os.environ.get("MLFLOW_SERVER_ENABLE_JOB_EXECUTION",
                                                                              "false")}
    return subprocess.Popen(command, start_new_session=True, env=env, stdout=log,
                            stderr=subprocess.STDOUT if log else None)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="MLflow tracking server on PostgreSQL (make server)")
    parser.add_argument("--host", default=os.environ.get("HOST") or "127.0.0.1")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT") or DEFAULT_PORT))
    parser.add_argument("--backend-store-uri", default=os.environ.get("BACKEND_STORE_URI") or None)
    parser.add_argument("--artifacts-destination", type=Path,
                        default=Path(os.environ.get("ARTIFACTS_DESTINATION") or ARTIFACTS_DIR))
    parser.add_argument("--postgres-dir", type=Path, default=DATA_DIR)
    args, extra = parser.parse_known_args(argv)  # anything else goes to `mlflow server` (--allowed-hosts …)
    database, server = None, None
    signal.signal(signal.SIGTERM, interrupt)
    try:
        backend = args.backend_store_uri
        if not backend:
            database = LocalPostgres(args.postgres_dir).start()
            backend = database.uri
            print(f"PostgreSQL  {backend}  (cluster {database.data}, as {database.user or 'this user'})", flush=True)
        url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}"
        server = start_mlflow_server(backend, args.artifacts_destination.resolve(), args.host, args.port, extra=extra)
        wait_healthy(url, server)
        print("\n".join([
            f"MLflow server  http://{args.host}:{args.port}  (artifacts in {args.artifacts_destination.resolve()})",
            f"  this machine:  export MLFLOW_TRACKING_URI={url}",
            f"  a team:        export MLFLOW_TRACKING_URI=http://{socket.gethostname()}:{args.port}"
            + ("" if args.host not in ("127.0.0.1", "localhost") else
               "  (start with HOST=0.0.0.0 and --allowed-hosts for other machines)"),
            "  Ctrl-C stops the server and the database.",
        ]), flush=True)
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


if __name__ == "__main__":
    sys.exit(main())
