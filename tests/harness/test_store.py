"""The run store: tracking URIs refused in one line before anything is created, a health check
that reports a dead server quickly, and a fresh SQLite store that several runs can start on at once."""

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from harness.tracking.store import check_uri, ensure_experiment, prepare_store, server_problem, sqlite_path
from tests import preloaded

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "configs" / "pretrain" / "smoke.yaml"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def refused(uri: str) -> str:
    with pytest.raises(UserError) as raised:
        check_uri(uri)
    message = str(raised.value)
    assert "\n" not in message and message.startswith(f"MLFLOW_TRACKING_URI={uri}: "), message
    return message


@pytest.mark.parametrize(
    "uri, fragment",
    [
        ("notascheme://somewhere/x", "unknown scheme 'notascheme'"),
        ("file:///tmp/mlruns", "file stores are not supported"),
        ("/tmp/mlruns", "file stores are not supported"),
        ("sqlite://", "name a database file"),
        ("sqlite:///:memory:", "name a database file"),
    ],
    ids=["unknown-scheme", "file-uri", "bare-path", "sqlite-memory", "sqlite-memory-file"],
)
def test_unusable_uris_are_refused_in_one_line(uri, fragment):
    assert fragment in refused(uri)


def test_sqlite_in_a_missing_folder_is_refused_and_not_created(tmp_path):
    folder = tmp_path / "nonexistent" / "dir"
    message = refused(f"sqlite:///{folder / 'mlflow.db'}")
    assert f"folder {folder} does not exist" in message
    assert not (tmp_path / "nonexistent").exists()


def test_a_file_that_is_not_sqlite_is_refused(tmp_path):
    notes = tmp_path / "notes.db"
    notes.write_text("hello, not a database\n")
    assert "is not a SQLite database" in refused(f"sqlite:///{notes}")
    assert notes.read_text() == "hello, not a database\n"


def test_sqlite_paths_relative_and_absolute(tmp_path):
    assert sqlite_path("sqlite:///mlflow.db") == Path("mlflow.db")
    assert sqlite_path(f"sqlite:///{tmp_path}/m.db?timeout=5") == tmp_path / "m.db"
    assert sqlite_path("http://localhost:5000") is None
    check_uri(f"sqlite:///{tmp_path / 'new.db'}")  # a new file in an existing folder is fine
    assert not (tmp_path / "new.db").exists()


def test_a_server_that_is_down_is_reported_within_seconds():
    uri = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    assert server_problem(uri) == "connection refused"
    message = refused(uri)
    assert "the tracking server does not answer" in message and "unset MLFLOW_TRACKING_URI" in message
    assert time.monotonic() - started < 15


def test_a_server_that_never_answers_times_out():
    with socket.socket() as silent:  # accepts connections (backlog) but never replies
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        assert server_problem(uri, timeout=(1.0, 0.5)) == "no answer within 0.5 s"


def test_prepare_store_creates_the_tables_once(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    prepare_store(uri)
    assert (tmp_path / "mlflow.db").stat().st_size > 0
    assert ensure_experiment("a", uri) == ensure_experiment("a", uri)


@pytest.mark.slow
def test_four_pretrain_runs_at_once_on_a_fresh_store_all_finish(tmp_path, real_mrpc_dir):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri, "MRPC_DIR": str(real_mrpc_dir), "OMP_NUM_THREADS": "1"}
    flags = [
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2",
        "--trainer.limit_val_batches=1",
        "--data.max_sentences=100",
        "--samples_every_n_steps=0",
        "--trainer.enable_progress_bar=false",
    ]
    processes = [
        subprocess.Popen(
            preloaded.command(
                "pretrain",
                "fit",
                "--config",
                str(SMOKE),
                *flags,
                f"--trainer.default_root_dir={tmp_path / str(number)}",
                env=env,
            ),
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for number in range(4)
    ]
    errors = [process.communicate(timeout=300)[1] for process in processes]
    assert [process.returncode for process in processes] == [0] * 4, "\n".join(e[-1500:] for e in errors)
    client = MlflowClient(uri)
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert sorted(run.info.status for run in runs) == ["FINISHED"] * 4
