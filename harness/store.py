"""The MLflow run store: where runs go, which tracking URIs the harness accepts, a health check
for tracking servers, and a store (and its experiments) created once, under a file lock, before
any run starts.

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
from urllib.parse import urlparse

import requests
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import RESOURCE_ALREADY_EXISTS, ErrorCode
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from harness.views import prepare_experiment

SERVER_SCHEMES = ("http", "https")
DATABASE_SCHEMES = ("sqlite", "postgresql", "mysql", "mssql")
HOSTED_SCHEMES = ("databricks", "databricks-uc")
HEALTH_TIMEOUT = (3.0, 5.0)  # seconds to connect, to answer: a down server is reported within ~8 s
SQLITE_HEADER = b"SQLite format 3\x00"
URI_VARIABLE = "MLFLOW_TRACKING_URI"
REPO_ROOT = Path(__file__).resolve().parents[1]
EXPERIMENT_KIND = {"mlflow.experimentKind": "custom_model_development"}


def tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI``, else ``sqlite:///<repo root>/mlflow.db``."""
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{REPO_ROOT / 'mlflow.db'}"


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
        raise UserError(f"{flag}: file stores are not supported (MLflow 3 deprecates them); "
                        f"use sqlite:///<folder>/mlflow.db or an http(s):// tracking server")
    if scheme == "sqlite":
        check_sqlite(uri, flag)
    elif scheme in SERVER_SCHEMES:
        problem = server_problem(uri)
        if problem:
            raise UserError(f"{flag}: the tracking server does not answer ({problem}); "
                            f"start it, or unset {URI_VARIABLE} to use the local SQLite store")
    elif scheme not in DATABASE_SCHEMES + HOSTED_SCHEMES:
        known = ", ".join(f"{name}://" for name in ("sqlite", *SERVER_SCHEMES, *DATABASE_SCHEMES[1:], "databricks"))
        raise UserError(f"{flag}: unknown scheme '{scheme}'; use one of {known}")


def check_sqlite(uri: str, flag: str) -> None:
    path = sqlite_path(uri)
    if path is None or str(path) in ("", ":memory:") or not uri.startswith("sqlite:///"):
        raise UserError(f"{flag}: name a database file, e.g. sqlite:////abs/path/mlflow.db "
                        f"(an in-memory store loses every run when the process ends)")
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
        database = Path(uri[len("sqlite:///"):])
        return (database.parent / "mlartifacts").resolve().as_uri()
    return None


def ensure_experiment(name: str, uri: str | None = None) -> str:
    """Returns the id of experiment ``name``, creating it (tagged for the "Model training" view).
    Safe when several processes create it at once."""
    uri = uri or tracking_uri()
    client = MlflowClient(uri)
    with store_lock(uri):
        experiment = client.get_experiment_by_name(name)
        if experiment is None:
            try:
                experiment_id = client.create_experiment(name, artifact_location=artifact_location(uri),
                                                         tags=EXPERIMENT_KIND)
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
