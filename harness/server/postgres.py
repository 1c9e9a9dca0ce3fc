"""The team server's own PostgreSQL cluster, closed to every other local user.

Created on first use under ``.cache/postgres/`` from Debian's server binaries
(``/usr/lib/postgresql/<version>/bin``):
- it listens on 127.0.0.1 only (a free port), with no Unix socket;
- every connection needs a password (scram-sha-256); ``pg_hba.conf`` is rewritten at each start
  with no ``trust`` line for any connection type, and the start checks the rules in force;
- the bootstrap superuser ``postgres`` has a generated password, used only to set the cluster up;
- MLflow connects as role ``mlflow``, which owns database ``mlflow`` and nothing else: not a
  superuser, no role or database creation, no server-file roles (so no ``COPY … TO PROGRAM``, no
  ``pg_read_file``);
- both passwords live in 0600 files of the starting user (:mod:`harness.server.secret_files`); clients
  (MLflow's server) read the role's from a ``.pgpass`` file named by ``PGPASSFILE``, never from a
  command line.

PostgreSQL refuses to run as root: under root the cluster runs as the ``postgres`` user (Debian's
package creates it; else ``nobody``), which then owns ``.cache/postgres/``. A cluster made by an
older ``make server`` (trust authentication, ``mlflow`` as its superuser) is moved aside, kept,
and its ``mlflow`` database copied into a new, closed cluster (:meth:`LocalPostgres.migrate`).
When that user cannot enter the checkout (under root's 0700 home, in a ``mktemp -d`` folder), the
cluster lives in a folder of its own under :data:`HOST_ROOT` (root's, 0711: it may enter its own
folder there and list nothing), named by the checkout's path, and ``make server`` says so.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

from harness.errors import UserError
from harness.server.secret_files import private_folder, secret, write_secret
from harness.tracking.store import REPO_ROOT

DATA_DIR = REPO_ROOT / ".cache" / "postgres"
SECRETS_DIR = REPO_ROOT / ".cache" / "server"
SUPERUSER = "postgres"
ROLE = DATABASE = "mlflow"
HBA = """\
# Written by harness/server/postgres.py at every start (edits are replaced): a password (scram-sha-256)
# over TCP on 127.0.0.1 for every connection; anything else is rejected. No trust, no socket.
host    all  all  127.0.0.1/32  scram-sha-256
host    all  all  all           reject
local   all  all                reject
"""
ROLE_LIMITS = "NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS LOGIN"
SERVER_FILE_ROLES = ("pg_execute_server_program", "pg_read_server_files", "pg_write_server_files")


HOST_ROOT = Path("/var/lib/lm-transfer-bench")


def reachable_by(user: str, folder: Path) -> bool:
    """Whether ``user`` may enter ``folder`` (its nearest existing ancestor) and every folder above it."""
    while not folder.exists():
        folder = folder.parent
    return subprocess.run(["runuser", "-u", user, "--", "test", "-x", str(folder)], capture_output=True).returncode == 0


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def postgres_bin() -> Path:
    """The newest Debian PostgreSQL server ``bin`` folder, else the one of ``initdb`` on PATH."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda path: int(Path(path).parts[4]))
    initdb = found[-1] if found else shutil.which("initdb")
    if not initdb:
        raise UserError(
            "PostgreSQL server binaries not found (initdb): `apt-get install postgresql`, "
            "or set BACKEND_STORE_URI=postgresql://… to use an existing database"
        )
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
    """A closed PostgreSQL cluster in ``directory`` on ``127.0.0.1:port``, run as :func:`service_user`,
    its passwords in ``secrets``."""

    def __init__(self, directory: Path = DATA_DIR, secrets: Path = SECRETS_DIR, port: int | None = None):
        self.directory = Path(directory).resolve()
        self.data = self.directory / "data"
        self.secrets = Path(secrets).resolve()
        self.port = port or free_port()
        self.bin = postgres_bin()
        self.user = service_user()
        self.superuser_file = self.secrets / "postgres-superuser.password"
        self.password_file = self.secrets / "postgres-mlflow.password"
        self.passfile = self.secrets / "pgpass"

    @property
    def uri(self) -> str:
        """The backend store URI, without the password (libpq reads it from :attr:`passfile`)."""
        return f"postgresql://{ROLE}@127.0.0.1:{self.port}/{DATABASE}"

    @property
    def client_env(self) -> dict[str, str]:
        """What a client process (MLflow's server) needs in its environment to log in as ``mlflow``."""
        return {"PGPASSFILE": str(self.passfile)}

    def run(self, *command: str) -> subprocess.CompletedProcess:
        prefix = ["runuser", "-u", self.user, "--"] if self.user else []
        process = subprocess.run([*prefix, *command], capture_output=True, text=True)
        if process.returncode != 0:
            log = self.directory / "postgres.log"
            raise UserError(
                f"{Path(command[0]).name} failed (exit {process.returncode}): "
                f"{(process.stderr or process.stdout).strip().splitlines()[-1:]}; see {log}"
            )
        return process

    def give(self, path: Path) -> None:
        """Hand ``path`` to the service user (a no-op when we are it)."""
        if self.user:
            shutil.chown(path, self.user, pwd.getpwnam(self.user).pw_gid)

    def stage(self, name: str, value: str) -> Path:
        """A 0600 file of the service user in the cluster's own 0700 folder, for a tool that runs as
        that user and reads a secret from a file (initdb, pg_restore); delete it right after use."""
        path = self.directory / name
        path.unlink(missing_ok=True)
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as handle:
            handle.write(value + "\n")
        self.give(path)
        return path

    def start(self) -> LocalPostgres:
        """Create the cluster on first use (or migrate an open one), write its access rules, start
        it, and set up role and database; then check that the rules in force trust no one."""
        if (
            self.user
            and not (self.data / "PG_VERSION").is_file()
            and not reachable_by(self.user, self.directory.parent)
        ):
            self.move_to_host_folder()
        self.directory.mkdir(parents=True, exist_ok=True)
        self.give(self.directory)
        self.directory.chmod(0o700)
        private_folder(self.secrets)
        superuser_password, _ = secret(self.superuser_file)
        password, _ = secret(self.password_file)
        write_secret(self.passfile, f"127.0.0.1:*:{DATABASE}:{ROLE}:{password}")
        if (self.data / "PG_VERSION").is_file() and self.is_open():
            self.migrate(superuser_password)
        elif not (self.data / "PG_VERSION").is_file():
            self.initdb(superuser_password)
        self.write_rules()
        self.pg_ctl_start(f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories=''")
        self.set_up(superuser_password, password)
        return self

    def move_to_host_folder(self) -> None:
        """Keep the cluster where the service user can reach it: a folder of its own under
        :data:`HOST_ROOT`, named by the configured folder (the same one at every start)."""
        requested = self.directory
        HOST_ROOT.mkdir(mode=0o711, parents=True, exist_ok=True)
        HOST_ROOT.chmod(0o711)
        self.directory = HOST_ROOT / hashlib.sha256(str(requested).encode()).hexdigest()[:16]
        self.data = self.directory / "data"
        print(
            f"PostgreSQL  user {self.user} cannot enter {requested.parent} (a folder above it is only root's): "
            f"the cluster lives in {self.directory}",
            flush=True,
        )

    def is_open(self) -> bool:
        """Whether the cluster was made by an older ``make server``: trust rules, no superuser password."""
        hba = self.data / "pg_hba.conf"
        rules = [line.split() for line in hba.read_text().splitlines() if line.strip() and not line.startswith("#")]
        return any("trust" in rule for rule in rules)

    def initdb(self, superuser_password: str) -> None:
        """``initdb`` with a superuser password (read from a 0600 file inside the cluster's own 0700
        folder, deleted right after) and scram-sha-256 for every rule it writes."""
        staged = self.stage(".superuser-password", superuser_password)
        try:
            self.run(
                str(self.bin / "initdb"),
                "-D",
                str(self.data),
                "-U",
                SUPERUSER,
                "--auth=scram-sha-256",
                f"--pwfile={staged}",
                "--encoding=UTF8",
                "--no-locale",
            )
        finally:
            staged.unlink(missing_ok=True)

    def write_rules(self) -> None:
        hba = self.data / "pg_hba.conf"
        hba.write_text(HBA)
        self.give(hba)
        hba.chmod(0o600)

    def pg_ctl_start(self, options: str) -> None:
        self.run(
            str(self.bin / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.directory / "postgres.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )

    def connect(self, user: str, password: str, database: str = "postgres"):
        import psycopg  # only the server needs the driver (MLflow's too)

        return psycopg.connect(
            host="127.0.0.1",
            port=self.port,
            user=user,
            password=password,
            dbname=database,
            autocommit=True,
            connect_timeout=10,
        )

    def set_up(self, superuser_password: str, password: str) -> None:
        """As the superuser: role ``mlflow`` with exactly its limits and current password (sent as a
        SCRAM verifier, never in clear), its database, and a check of the rules in force."""
        from psycopg import sql

        with self.connect(SUPERUSER, superuser_password) as connection:
            verifier = connection.pgconn.encrypt_password(password.encode(), ROLE.encode(), b"scram-sha-256").decode()
            exists = connection.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (ROLE,)).fetchone()
            statement = "ALTER ROLE {} WITH " if exists else "CREATE ROLE {} WITH "
            connection.execute(
                sql.SQL(statement + ROLE_LIMITS + " PASSWORD {}").format(sql.Identifier(ROLE), sql.Literal(verifier))
            )
            for granted in SERVER_FILE_ROLES:
                connection.execute(sql.SQL("REVOKE {} FROM {}").format(sql.Identifier(granted), sql.Identifier(ROLE)))
            if connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
                connection.execute(
                    sql.SQL("CREATE DATABASE {} OWNER {}").format(sql.Identifier(DATABASE), sql.Identifier(ROLE))
                )
            connection.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(sql.Identifier(DATABASE)))
            methods = {
                row[0] for row in connection.execute("SELECT auth_method FROM pg_hba_file_rules WHERE error IS NULL")
            }
            if methods - {"scram-sha-256", "reject"}:
                raise UserError(
                    f"{self.data / 'pg_hba.conf'}: rules in force allow {sorted(methods)}; "
                    f"only scram-sha-256 is accepted"
                )

    def migrate(self, superuser_password: str) -> None:
        """An open cluster from an older ``make server``: start it reachable only through a Unix
        socket in its own 0700 folder, dump database ``mlflow``, move the old cluster aside (kept as
        ``data.open-<time>``), create a closed one and restore the dump into it, owned by ``mlflow``."""
        socket_dir = self.directory / "migration-socket"
        socket_dir.mkdir(mode=0o700, exist_ok=True)
        self.give(socket_dir)
        dump = self.directory / "mlflow-before-migration.dump"
        print(
            f"PostgreSQL  {self.data} trusts every local connection (an older make server made it): "
            f"copying database {DATABASE} into a closed cluster …",
            flush=True,
        )
        self.pg_ctl_start(f"-c listen_addresses='' -c unix_socket_directories={socket_dir} -c port={self.port}")
        try:
            self.run(
                str(self.bin / "pg_dump"),
                "-h",
                str(socket_dir),
                "-p",
                str(self.port),
                "-U",
                ROLE,
                "--format=custom",
                "--no-owner",
                "--no-privileges",
                "-f",
                str(dump),
                DATABASE,
            )
        finally:
            self.stop()
        kept = self.data.with_name(f"data.open-{time.strftime('%Y%m%d-%H%M%S')}")
        self.data.rename(kept)
        self.initdb(superuser_password)
        self.write_rules()
        self.pg_ctl_start(f"-c listen_addresses=127.0.0.1 -c port={self.port} -c unix_socket_directories=''")
        try:
            password = secret(self.password_file)[0]
            self.set_up(superuser_password, password)
            staged = self.stage(".restore-pgpass", f"127.0.0.1:*:{DATABASE}:{ROLE}:{password}")
            restore = [
                str(self.bin / "pg_restore"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.port),
                "-U",
                ROLE,
                "-d",
                DATABASE,
                "--no-owner",
                "--no-privileges",
                "--exit-on-error",
                str(dump),
            ]
            prefix = ["runuser", "-u", self.user, "--"] if self.user else []
            process = subprocess.run([*prefix, "env", f"PGPASSFILE={staged}", *restore], capture_output=True, text=True)
            staged.unlink(missing_ok=True)
            if process.returncode != 0:
                raise UserError(
                    f"pg_restore into the closed cluster failed: {process.stderr.strip()[-300:]}; "
                    f"the old cluster is kept in {kept}, the dump in {dump}"
                )
        finally:
            self.stop()
        socket_dir.rmdir()
        print(
            f"PostgreSQL  migrated: the old, open cluster is kept in {kept} (delete it once you have checked "
            f"the runs), the dump in {dump}",
            flush=True,
        )

    def stop(self) -> None:
        if (self.data / "postmaster.pid").is_file():
            self.run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
