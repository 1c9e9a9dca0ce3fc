"""The MLflow run store: where runs go, which tracking URIs the harness accepts, a health check
for tracking servers (down, needs credentials, forbidden), and a store (and its experiments)
created once, under a file lock, before any run starts.

Credentials for a server with users are MLflow's own: ``MLFLOW_TRACKING_USERNAME`` and
``MLFLOW_TRACKING_PASSWORD`` (or a token, ``~/.mlflow/credentials``: whatever MLflow's client
reads). A 401 or 403 is one line naming the variable to set or the permission missing.

MLflow creates and migrates a SQLite store's tables on first use, with no lock: several
processes starting together on a fresh store race (``table runs already exists``, ``duplicate
column name``, alembic's ``expected to match one row``). :func:`prepare_store` lets the first
process do it while the others wait, and experiments are created under the same lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse, urlsplit, urlunsplit

import requests
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode
from mlflow.tracking import MlflowClient
from mlflow.utils.credentials import get_default_host_creds, read_mlflow_creds
from mlflow.utils.rest_utils import http_request

from harness.errors import UserError
from harness.tracking.experiment_names import experiment_name
from harness.tracking.views import prepare_experiment

SERVER_SCHEMES = ("http", "https")
DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
HOSTED_SCHEMES = ("databricks", "databricks-uc")
HEALTH_TIMEOUT = (3.0, 5.0)  # seconds to connect, to answer: a down server is reported within ~8 s
SQLITE_HEADER = b"SQLite format 3\x00"
URI_VARIABLE = "MLFLOW_TRACKING_URI"
USER_VARIABLE, PASSWORD_VARIABLE = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"
WRITE_PERMISSIONS = ("EDIT", "MANAGE")  # what logging a run into an existing experiment needs
REPO_ROOT = Path(__file__).resolve().parents[2]
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


def tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI``, else ``sqlite:///<repo root>/mlflow.db``; refused when it holds a
    password (:func:`check_no_password`): the URI is printed in links, written to the cells' logs
    and shipped to Ray's workers."""
    return check_no_password(os.environ.get(URI_VARIABLE) or f"sqlite:///{REPO_ROOT / 'mlflow.db'}")


def check_no_password(uri: str) -> str:
    """``uri``, or a one-line UserError when its user part holds a password (never shown)."""
    try:
        parts = urlsplit(uri)
        password = parts.password
    except ValueError:  # a malformed port or host: not this check's concern
        return uri
    if not password:
        return uri
    address = parts.netloc.rpartition("@")[2]  # host[:port]
    server = scheme_of(uri) in SERVER_SCHEMES
    shown = urlunsplit(parts._replace(netloc=f"{parts.username}:…@{address}"))
    bare = urlunsplit(parts._replace(netloc=address if server else f"{parts.username}@{address}"))
    where = (
        f"{PASSWORD_VARIABLE} (and the user in {USER_VARIABLE})"
        if server
        else "the database's own password file or variable (PostgreSQL: ~/.pgpass or PGPASSWORD)"
    )
    raise UserError(
        f"{URI_VARIABLE}={shown} holds a password, which would be printed in links, logs and Ray's "
        f"environment: set {URI_VARIABLE}={bare} and the password in {where}"
    )


def scheme_of(uri: str) -> str:
    """``sqlite``, ``http``, … (a ``+driver`` suffix dropped); ``""`` for a bare path."""
    return urlparse(uri).scheme.split("+")[0].lower()


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (relative to the working directory unless the
    URI has four slashes); None for other schemes."""
    if scheme_of(uri) != "sqlite":
        return None
    location = uri.split("://", 1)[1].split("?", 1)[0]
    return Path(location[1:]) if location.startswith("/") else Path(location)


def check_uri(uri: str) -> None:
    """Refuse, in one line, a tracking URI this harness cannot use — before anything is created.

    Accepted: ``sqlite:///<file>`` in an existing folder, ``http(s)://`` servers that answer,
    SQL databases (``postgresql://``, ``mysql://``, ``mssql://``) and Databricks.
    """
    flag = f"{URI_VARIABLE}={uri}"
    scheme = scheme_of(uri)
    if scheme in ("", "file"):
        raise UserError(
            f"{flag}: file stores are not supported (MLflow 3 deprecates them); "
            f"use sqlite:///<folder>/mlflow.db or an http(s):// tracking server"
        )
    if scheme == "sqlite":
        check_sqlite(uri, flag)
    elif scheme in SERVER_SCHEMES:
        problem = server_problem(uri)
        if problem:
            raise UserError(
                f"{flag}: the tracking server does not answer ({problem}); "
                f"start it, or unset {URI_VARIABLE} to use the local SQLite store"
            )
        problem = access_problem(uri)
        if problem:
            raise UserError(f"{flag}: {problem}")
    elif scheme not in DATABASE_SCHEMES + HOSTED_SCHEMES:
        known = ", ".join(f"{name}://" for name in ("sqlite", *SERVER_SCHEMES, *DATABASE_SCHEMES[1:], "databricks"))
        raise UserError(f"{flag}: unknown scheme '{scheme}'; use one of {known}")


def check_sqlite(uri: str, flag: str) -> None:
    path = sqlite_path(uri)
    if path is None or str(path) in ("", ":memory:") or not uri.startswith("sqlite:///"):
        raise UserError(
            f"{flag}: name a database file, e.g. sqlite:////abs/path/mlflow.db "
            f"(an in-memory store loses every run when the process ends)"
        )
    if not path.parent.is_dir():
        raise UserError(f"{flag}: folder {path.parent} does not exist; create it or choose another path")
    if path.is_dir():
        raise UserError(f"{flag}: {path} is a folder, not a database file")
    if path.is_file() and path.stat().st_size > 0:
        with path.open("rb") as handle:
            if handle.read(len(SQLITE_HEADER)) != SQLITE_HEADER:
                raise UserError(f"{flag}: {path} is not a SQLite database; point at another file")


def server_problem(uri: str, timeout: tuple[float, float] = HEALTH_TIMEOUT) -> str | None:
    """None when the server at ``uri`` answers its ``/health`` endpoint (any HTTP answer counts:
    a proxy or an auth error still means it is up), else what went wrong, in a few words."""
    try:
        requests.get(uri.rstrip("/") + "/health", timeout=timeout)
    except requests.exceptions.ConnectTimeout:
        return f"no connection within {timeout[0]:g} s"
    except requests.exceptions.ReadTimeout:
        return f"no answer within {timeout[1]:g} s"
    except requests.exceptions.ConnectionError as error:
        reason = str(error)
        return "connection refused" if "refused" in reason.lower() else type(error).__name__
    except requests.exceptions.RequestException as error:
        return type(error).__name__
    return None


def server_request(uri: str, endpoint: str, **params) -> requests.Response:
    """One GET to the server with MLflow's own credentials, no retries, the health check's timeouts."""
    return http_request(
        get_default_host_creds(uri),
        endpoint,
        "GET",
        max_retries=0,
        timeout=HEALTH_TIMEOUT[1],
        raise_on_status=False,
        params=params,
    )


def user_name() -> str | None:
    return read_mlflow_creds().username or None


def denial(status: int, action: str) -> str:
    """What a 401 or 403 from the server means for this client, in one line."""
    user = user_name()
    if status == 401 and not user:
        return (
            f"the tracking server needs credentials (401): export {USER_VARIABLE} and {PASSWORD_VARIABLE} "
            f"(its admin creates users: make server-user NAME=<you>)"
        )
    if status == 401:
        return f"the tracking server rejected the password of {USER_VARIABLE}={user} (401): check {PASSWORD_VARIABLE}"
    return f"{USER_VARIABLE}={user} may not {action} on this tracking server (403 forbidden): ask its admin"


def access_problem(uri: str) -> str | None:
    """None when the server lets this client read its experiments, else one line: credentials
    missing or rejected (401), or reading forbidden (403)."""
    try:
        response = server_request(uri, "/api/2.0/mlflow/experiments/search", max_results=1)
    except MlflowException as error:
        return f"the tracking server does not answer ({str(error.message).splitlines()[0][:120]})"
    if response.status_code in (401, 403):
        return denial(response.status_code, "read experiments")
    return None


def write_problem(uri: str, experiment: str) -> str | None:
    """None when this client may log runs into ``experiment`` (or the experiment does not exist
    yet: creating one needs only a login), else one line naming the permission it has and the one
    it needs. Stores without users (SQLite, a server without MLflow's auth app) never refuse."""
    if scheme_of(uri) not in SERVER_SCHEMES or not user_name():
        return None
    try:
        found = server_request(uri, "/api/2.0/mlflow/experiments/get-by-name", experiment_name=experiment)
        if found.status_code in (401, 403):
            return denial(found.status_code, "read experiments")
        if found.status_code != 200:
            return None  # RESOURCE_DOES_NOT_EXIST: the run will create it (and its creator manages it)
        experiment_id = found.json()["experiment"]["experiment_id"]
        answer = server_request(
            uri,
            "/api/3.0/mlflow/users/permissions/get",
            username=user_name(),
            resource_type="experiment",
            resource_id=experiment_id,
        )
        if answer.status_code != 200:
            return None  # no auth app on this server: nothing is refused
        permission = answer.json().get("permission", "")
    except (MlflowException, ValueError, KeyError):  # gone or garbled: the run's own requests will say
        return None
    if permission in WRITE_PERMISSIONS:
        return None
    return (
        f"{USER_VARIABLE}={user_name()} has {permission or 'no'} permission on experiment '{experiment}' of "
        f"{uri}; logging a run needs EDIT: ask the server's admin (make server-user NAME={user_name()} ROLE=edit)"
    )


def check_can_log(uri: str, experiment: str) -> None:
    """Raise :class:`UserError` (one line) when this client may not log runs into ``experiment``."""
    problem = write_problem(uri, experiment)
    if problem:
        raise UserError(problem)


def auth_denial(error: BaseException) -> str | None:
    """The one line for an MLflow request the server refused (401/403) anywhere in ``error``'s
    chain, None when ``error`` is something else."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, MlflowException):
            status = error.get_http_status_code()
            text = str(error)
            for code in (401, 403):
                if f"error code {code}" in text or (status == code and error.error_code != "INTERNAL_ERROR"):
                    endpoint = text.split("endpoint ", 1)[1].split(" ", 1)[0] if "endpoint " in text else "the request"
                    return f"{tracking_uri()}: {denial(code, f'call {endpoint}')}"
        error = error.__cause__ or error.__context__
    return None


@contextlib.contextmanager
def store_lock(uri: str) -> Iterator[None]:
    """Hold an exclusive lock on a SQLite store (``<database>.lock`` beside it); other stores
    synchronise on their own, so this is a no-op for them."""
    path = sqlite_path(uri)
    if path is None:
        yield
        return
    lock_path = path.with_name(path.name + ".lock")
    descriptor = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(descriptor, fcntl.LOCK_UN)
        os.close(descriptor)


def prepare_store(uri: str) -> None:
    """Check ``uri`` (:func:`check_uri`) and create or migrate its store once, under the lock."""
    check_uri(uri)
    with store_lock(uri):
        MlflowClient(uri).search_experiments(max_results=1)  # builds the store: tables, migrations


def artifact_location(uri: str) -> str | None:
    """Artifacts of a local SQLite store live beside the database file (not in the cwd)."""
    if uri.startswith("sqlite:///"):
        database = Path(uri[len("sqlite:///") :])
        return (database.parent / "mlartifacts").resolve().as_uri()
    return None


def ensure_experiment(name: str, uri: str | None = None) -> str:
    """Returns the id of experiment ``name``, creating it (tagged for the "Model training" view).
    Safe when several processes create it at once. A name that is not in its normal form (NFKC,
    visible, 1-256 characters: :mod:`harness.tracking.experiment_names`) is refused in one line."""
    if experiment_name(name, "experiment name") != name:
        raise UserError(f"experiment name {name!r}: write it as {experiment_name(name, 'experiment name')!r}")
    uri = uri or tracking_uri()
    client = MlflowClient(uri)
    check_can_log(uri, name)
    with store_lock(uri):
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            try:
                experiment_id = client.create_experiment(
                    name, artifact_location=artifact_location(uri), tags=EXPERIMENT_KIND
                )
                prepare_experiment(client, experiment_id, name)
                return experiment_id
            except MlflowException as error:  # another process (on a server store) was first
                if error.error_code != ErrorCode.Name(RESOURCE_ALREADY_EXISTS):
                    raise
                experiment = client.get_experiment_by_name(name)
        experiment_id = experiment.experiment_id
        if experiment.tags.get("mlflow.experimentKind") != EXPERIMENT_KIND["mlflow.experimentKind"]:
            client.set_experiment_tag(experiment_id, *next(iter(EXPERIMENT_KIND.items())))
    prepare_experiment(client, experiment_id, name)  # description and saved runs-table views
    return experiment_id
