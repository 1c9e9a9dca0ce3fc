"""``make server`` as root from a folder only root may enter (a checkout under root's 0700 home,
a ``mktemp -d`` folder): the database account cannot reach the cluster's folder there, so the
cluster lives in a folder of its own that it can reach, and starts (in root's folder initdb could
not read its password file, and the team server would not start)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import psycopg
import pytest

from harness.server.postgres import HOST_ROOT, LocalPostgres, service_user

pytestmark = pytest.mark.slow


def test_the_cluster_starts_from_a_folder_only_root_may_enter(postgres_binaries, capsys):
    if os.getuid() != 0 or not service_user():
        pytest.skip("needs root, which runs the cluster as another user")
    base = Path(tempfile.mkdtemp(prefix="root-only-"))  # 0700, root's
    cluster = LocalPostgres(base / "checkout" / ".cache" / "postgres", base / "checkout" / ".cache" / "server")
    try:
        cluster.start()
        try:
            assert cluster.directory.parent == HOST_ROOT and oct(HOST_ROOT.stat().st_mode & 0o777) == "0o711"
            assert oct(cluster.directory.stat().st_mode & 0o777) == "0o700"
            password = cluster.password_file.read_text().strip()
            with psycopg.connect(
                host="127.0.0.1",
                port=cluster.port,
                user="mlflow",
                password=password,
                dbname="mlflow",
                connect_timeout=10,
            ) as connection:
                assert connection.execute("SELECT 1").fetchone() == (1,)
        finally:
            cluster.stop()
        assert f"cannot enter {base / 'checkout' / '.cache'}" in capsys.readouterr().out
        assert oct(base.stat().st_mode & 0o777) == "0o700"  # nothing above was opened
    finally:
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(cluster.directory, ignore_errors=True)
