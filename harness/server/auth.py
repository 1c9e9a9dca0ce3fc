"""MLflow's basic-auth app as the team server runs it (``mlflow server --app-name basic-auth``).

What MLflow 3.17 does by itself (read in ``mlflow/server/auth/``): it creates the admin user
before any worker opens the port, from ``MLFLOW_AUTH_ADMIN_PASSWORD``, and refuses to start
without one (there is no default admin password any more; an old store whose admin still has
``password1234`` is rotated to the configured one at start, and that password never logs in);
``/signup`` and user creation need an admin; the Flask secret key (CSRF) must be set and stable.

What this module adds: the admin password and the Flask secret key generated once into 0600
files under ``.cache/server/`` (``MLFLOW_ADMIN_PASSWORD`` at the first start gives the admin
password instead), handed to the server in its environment only; an auth config with
``default_permission = READ`` whose users live in the backend store's own database; MLflow's
fail-closed switch on, so a route without a permission check is refused rather than open; and
MLflow's credential cache on (``auth_cache_ttl_seconds``, off by default), without which every
request of every run pays a password hash check.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import socket
from pathlib import Path

from harness.errors import UserError
from harness.server.secret_files import private_folder, read_secret, secret, write_secret

ADMIN = "admin"
DEFAULT_PERMISSION = "READ"
ADMIN_PASSWORD_VARIABLES = ("MLFLOW_ADMIN_PASSWORD", "MLFLOW_AUTH_ADMIN_PASSWORD")
MIN_PASSWORD = 12  # MLflow's own rule (mlflow.utils.validation._validate_password)
# A verified (user, password) is kept this long in each server worker, so a request costs a
# lookup instead of a password hash check (werkzeug's scrypt: ~0.1 s of CPU here, per request
# without it). Changes through the API (password, deletion) drop the entry at once on the worker
# that made them; on other workers the old password may still pass for up to this long.
AUTH_CACHE_SECONDS = 60


class AuthFiles:
    """The auth app's secrets and config in ``folder`` (mode 0700)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder).resolve()
        self.admin_password = self.folder / "admin.password"
        self.secret_key = self.folder / "flask-secret.key"
        self.config = self.folder / "basic_auth.ini"

    def prepare(self, database_uri: str) -> list[str]:
        """Create what is missing; write the config for ``database_uri``. Returns notes for the console
        (paths and what happened, never a secret)."""
        private_folder(self.folder)
        notes = []
        given = next(((name, os.environ[name]) for name in ADMIN_PASSWORD_VARIABLES if os.environ.get(name)), None)
        if not self.admin_password.exists():
            if given:
                name, value = given
                if len(value) < MIN_PASSWORD:
                    raise UserError(f"{name}: the admin password needs at least {MIN_PASSWORD} characters")
                if value == "password1234":
                    raise UserError(f"{name}: that is MLflow's old published default; choose another password")
                write_secret(self.admin_password, value)
                notes.append(f"admin password: from {name}, kept in {self.admin_password}")
            else:
                write_secret(self.admin_password, secrets.token_urlsafe(24))
                notes.append(f"admin password: generated into {self.admin_password}")
        elif given and given[1] != read_secret(self.admin_password):
            notes.append(
                f"{given[0]} is read at the first start only; the admin password is the one in {self.admin_password}"
            )
        secret(self.secret_key, secrets.token_hex(32))
        # The config names the database (its URI may hold a password: hence 0600); no admin password
        # in it: the server gets that in its environment.
        write_secret(
            self.config,
            "\n".join(
                [
                    "[mlflow]",
                    f"default_permission = {DEFAULT_PERMISSION}",
                    f"database_uri = {database_uri.replace('%', '%%')}",
                    f"admin_username = {ADMIN}",
                    "authorization_function = mlflow.server.auth:authenticate_request_basic_auth",
                    "grant_default_workspace_access = false",
                    f"auth_cache_ttl_seconds = {AUTH_CACHE_SECONDS}",
                ]
            ),
        )
        return notes

    def server_env(self) -> dict[str, str]:
        """The ``mlflow server`` process's auth settings (its environment is readable only by its user)."""
        return {
            "MLFLOW_AUTH_CONFIG_PATH": str(self.config),
            "MLFLOW_AUTH_ADMIN_USERNAME": ADMIN,
            "MLFLOW_AUTH_ADMIN_PASSWORD": read_secret(self.admin_password),
            "MLFLOW_FLASK_SERVER_SECRET_KEY": read_secret(self.secret_key),
            "MLFLOW_BASIC_AUTH_FAIL_CLOSED": "true",
        }

    def secrets(self) -> list[str]:
        """Every secret value this folder holds (what tests grep logs and runs for)."""
        return [read_secret(path) for path in (self.admin_password, self.secret_key) if path.exists()]


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address) resolves only to loopback addresses."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        addresses = {info[4][0] for info in socket.getaddrinfo(host, None)}
    except socket.gaierror:
        return False
    return bool(addresses) and all(ipaddress.ip_address(address.split("%")[0]).is_loopback for address in addresses)
