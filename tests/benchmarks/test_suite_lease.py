"""One suite per benchmark and store at a time: a second identical suite stops in one line before
any work (otherwise every cell would run twice, under two parents, without a word)."""

import os
import socket
from pathlib import Path
from types import SimpleNamespace

import pytest

from benchmarks.engine.suite_lease import check_parent_free, one_suite
from benchmarks.suite import main as suite_main
from harness.errors import UserError
from harness.tracking.liveness import process_tags

REPO = Path(__file__).resolve().parents[2]
QUICK = REPO / "configs" / "benchmarks" / "quick.yaml"


def test_a_second_suite_on_the_same_store_stops_in_one_line(monkeypatch, tmp_path, capsys):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    with one_suite("quick", uri):  # the first suite, still running
        code = suite_main(["--config", str(QUICK), "--jobs", "1", "--results-dir", str(tmp_path / "results")])
    error = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and error[-1].startswith(f"error: benchmark 'quick' already runs on {uri} (process {os.getpid()}")
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "results").exists()  # nothing was done
    with one_suite("quick", uri):  # released with the first suite
        pass
    with one_suite("quick", f"sqlite:///{tmp_path / 'other.db'}"), one_suite("default", uri):  # others run
        pass


def parent(status: str, **tags) -> SimpleNamespace:
    return SimpleNamespace(info=SimpleNamespace(status=status, run_id="p1"), data=SimpleNamespace(tags=tags))


def test_a_parent_a_live_suite_holds_is_not_resumed():
    alive = process_tags()
    with pytest.raises(UserError, match=r"already runs on s \(parent run p1, process \d+ on "):
        check_parent_free(parent("RUNNING", **alive), "quick", "s")
    check_parent_free(parent("FINISHED", **alive), "quick", "s")
    check_parent_free(parent("RUNNING", **{**alive, "harness.pid": "999999999"}), "quick", "s")  # died
    with pytest.raises(UserError, match="on elsewhere"):  # another host: its suite may well run
        check_parent_free(parent("RUNNING", **{**alive, "harness.host": "elsewhere"}), "quick", "s")
    assert socket.gethostname() != "elsewhere"
