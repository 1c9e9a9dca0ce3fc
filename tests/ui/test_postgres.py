"""Upgrading a team server: a cluster an older ``make server`` created (``initdb --auth=trust``,
``mlflow`` its superuser) is moved aside, kept, and its ``mlflow`` database copied into a closed
cluster, where the MLflow role needs its password and is no longer a superuser."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import psycopg
import pytest

from harness.server.postgres import LocalPostgres, postgres_bin, service_user

pytestmark = pytest.mark.slow


def open_cluster(directory: Path) -> None:
    """What harness/server/tracking_server.py made before this version: trust for everyone, role mlflow a superuser."""
    user = service_user()
    prefix = ["runuser", "-u", user, "--"] if user else []
    directory.mkdir(mode=0o700)
    if user:
        subprocess.run(["chown", user, str(directory)], check=True)
    data, binaries = directory / "data", postgres_bin()
    subprocess.run(
        [
            *prefix,
            str(binaries / "initdb"),
            "-D",
            str(data),
            "-U",
            "mlflow",
            "--auth=trust",
            "--encoding=UTF8",
            "--no-locale",
        ],
        check=True,
        capture_output=True,
    )
    cluster = LocalPostgres(directory, directory.parent / "unused")
    cluster.pg_ctl_start(f"-c listen_addresses=127.0.0.1 -c port={cluster.port} -c unix_socket_directories=''")
    try:
        with psycopg.connect(
            host="127.0.0.1", port=cluster.port, user="mlflow", dbname="postgres", autocommit=True
        ) as connection:
            connection.execute("CREATE DATABASE mlflow")
        with psycopg.connect(
            host="127.0.0.1", port=cluster.port, user="mlflow", dbname="mlflow", autocommit=True
        ) as connection:
            connection.execute("CREATE TABLE runs (run_uuid text PRIMARY KEY, name text)")
            connection.execute("INSERT INTO runs VALUES ('0123', 'elmo·2x256·full·mrpc·s0')")
    finally:
        cluster.stop()


def test_an_open_cluster_of_an_older_make_server_is_migrated_into_a_closed_one(postgres_binaries, capsys):
    base = Path(tempfile.mkdtemp(prefix="postgres-upgrade-"))
    base.chmod(0o755)
    try:
        open_cluster(base / "postgres")
        cluster = LocalPostgres(base / "postgres", base / "secrets").start()
        try:
            password = cluster.password_file.read_text().strip()
            with pytest.raises(psycopg.OperationalError, match="password"):
                psycopg.connect(
                    host="127.0.0.1",
                    port=cluster.port,
                    user="mlflow",
                    dbname="mlflow",
                    passfile="/nonexistent",
                    password="",
                    connect_timeout=5,
                )
            with psycopg.connect(
                host="127.0.0.1", port=cluster.port, user="mlflow", password=password, dbname="mlflow"
            ) as connection:
                assert connection.execute("SELECT run_uuid, name FROM runs").fetchall() == [
                    ("0123", "elmo·2x256·full·mrpc·s0")
                ]  # the runs came along
                assert connection.execute("SELECT rolsuper FROM pg_roles WHERE rolname = 'mlflow'").fetchone() == (
                    False,
                )
                owner = connection.execute("SELECT tableowner FROM pg_tables WHERE tablename = 'runs'").fetchone()
                assert owner == ("mlflow",)
        finally:
            cluster.stop()
        kept = list((base / "postgres").glob("data.open-*"))
        assert len(kept) == 1 and (kept[0] / "PG_VERSION").is_file()  # the old cluster is kept, not deleted
        printed = capsys.readouterr().out
        assert "trusts every local connection" in printed and f"old, open cluster is kept in {kept[0]}" in printed
        assert not cluster.is_open()
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)
