"""A password in ``MLFLOW_TRACKING_URI`` would be printed in every link, written to the cells' logs
and shipped in Ray's runtime environment: it is refused in one line that never shows it, pointing
to ``MLFLOW_TRACKING_USERNAME``/``MLFLOW_TRACKING_PASSWORD``."""

from pathlib import Path

import pytest

from benchmarks.engine.ray_cluster import worker_environment
from benchmarks.suite import main as suite_main
from harness.cli.tracked_cli import run_cli
from harness.tracking.store import tracking_uri
from pretrain.cli import PretrainCLI
from tests.helpers import assert_one_line_error

REPO = Path(__file__).resolve().parents[2]
SECRET = "s3cret-pw"


@pytest.mark.parametrize(
    "uri, bare, where",
    [
        (
            f"http://ada:{SECRET}@127.0.0.1:5001",
            "MLFLOW_TRACKING_URI=http://127.0.0.1:5001",
            "MLFLOW_TRACKING_PASSWORD",
        ),
        (f"https://ada:{SECRET}@team.example/mlflow", "=https://team.example/mlflow", "MLFLOW_TRACKING_USERNAME"),
        (
            f"postgresql://mlflow:{SECRET}@127.0.0.1:5432/mlflow",
            "=postgresql://mlflow@127.0.0.1:5432/mlflow",
            "PGPASSWORD",
        ),
    ],
)
def test_a_password_in_the_uri_is_refused_without_showing_it(monkeypatch, uri, bare, where):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    message = assert_one_line_error(tracking_uri, "holds a password", bare, where)
    assert SECRET not in message
    assert_one_line_error(worker_environment, "holds a password")  # nothing secret reaches Ray


@pytest.mark.parametrize("uri", ["http://ada@127.0.0.1:5001", "http://127.0.0.1:5001", "sqlite:////tmp/m.db"])
def test_a_uri_without_a_password_is_used_as_given(monkeypatch, uri):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    assert tracking_uri() == uri


def test_the_stages_stop_in_one_line_before_any_work(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"http://ada:{SECRET}@127.0.0.1:9")
    monkeypatch.chdir(tmp_path)
    code = run_cli(PretrainCLI, ["fit", "--config", str(REPO / "configs/pretrain/smoke.yaml")])
    assert code == 2
    assert (
        suite_main(
            [
                "--config",
                str(REPO / "configs/benchmarks/quick.yaml"),
                "--jobs",
                "1",
                "--results-dir",
                str(tmp_path / "results"),
            ]
        )
        == 2
    )
    output = capsys.readouterr()
    assert SECRET not in output.out + output.err
    errors = [line for line in output.err.splitlines() if line.startswith("error:")]
    assert len(errors) == 2 and all("holds a password" in line for line in errors), output.err
