"""An import that races or dies leaves a whole store (``benchmarks.results_files.import_lease``):
two imports of one folder at once add its cells once (the second stops in one line); an import
killed at any point leaves a parent that liveness marks KILLED, and the same import run again
completes it (cells, ``study.json``, FINISHED), so that the study exports whole; a disk that
fills during an import is one line, and the import run again after completes it."""

from __future__ import annotations

import errno
import multiprocessing
import os
import threading
from itertools import count

import pytest
from mlflow.tracking import MlflowClient

from benchmarks.__main__ import main
from benchmarks.results_files import store_transfer
from benchmarks.results_files.folder import CELLS_DIR
from harness.tracking.lease import lease
from harness.tracking.liveness import mark_dead_runs
from tests.benchmarks.test_results_files import make_folder
from tests.helpers import all_runs

FORK = multiprocessing.get_context("fork")


@pytest.fixture
def store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("ENCODER_EXPERIMENTS", raising=False)
    return uri


def die(*args, **kwargs):
    os._exit(9)  # SIGKILL's effect: no handler, no cleanup


def import_killed_at(point: str, folder) -> None:
    """In a forked child: import ``folder``, dying at ``point``."""
    calls = count()
    if point == "before study.json":
        MlflowClient.log_dict = die
    elif point == "inside the third cell":
        log_text = MlflowClient.log_text
        MlflowClient.log_text = lambda self, *args, **kwargs: (
            die() if next(calls) == 4 else log_text(self, *args, **kwargs)
        )
    elif point == "before the parent finishes":
        set_terminated = MlflowClient.set_terminated
        MlflowClient.set_terminated = lambda self, run_id, status=None, end_time=None: (
            die() if end_time is None else set_terminated(self, run_id, status, end_time)
        )
    store_transfer.import_folders([folder])
    os._exit(0)


def in_child(target, *args) -> int:
    process = FORK.Process(target=target, args=args)
    process.start()
    process.join(300)
    return process.exitcode


def finished_cells(tmp_path) -> list:
    return [
        run
        for run in all_runs(tmp_path)
        if run.data.tags.get("cell_hash") and run.info.lifecycle_stage == "active" and run.info.status == "FINISHED"
    ]


def parents(tmp_path) -> list:
    return [
        run
        for run in all_runs(tmp_path)
        if run.data.tags.get("stage") == "benchmark" and run.info.lifecycle_stage == "active"
    ]


@pytest.mark.parametrize(
    "point",
    [
        "before study.json",
        pytest.param("inside the third cell", marks=pytest.mark.slow),
        pytest.param("before the parent finishes", marks=pytest.mark.slow),
    ],
)
def test_an_import_killed_at_any_point_is_marked_killed_and_completed_by_the_next(point, tmp_path, store, capsys):
    folder = make_folder(tmp_path / "a")
    assert in_child(import_killed_at, point, folder) == 9
    client = MlflowClient(store)
    [parent] = parents(tmp_path)
    assert parent.info.status == "RUNNING"
    assert parent.info.run_id in mark_dead_runs(client)  # its process is gone: not RUNNING forever
    if point == "before study.json":  # export names what to do, not "run before results files existed"
        assert main(["export", "--benchmark", "tiny", "--out", str(tmp_path / "early")]) == 2
        assert f"run `python -m benchmarks import {folder}` again" in capsys.readouterr().err
    assert main(["import", str(folder)]) == 0
    assert "nothing new" not in capsys.readouterr().out
    [completed] = parents(tmp_path)
    assert completed.info.run_id == parent.info.run_id and completed.info.status == "FINISHED"
    assert [artifact.path for artifact in client.list_artifacts(parent.info.run_id)] == ["study.json"]
    assert not [run for run in all_runs(tmp_path) if run.info.status == "RUNNING"]  # the half cell too
    cells = finished_cells(tmp_path)
    assert len(cells) == 6 and len({run.data.tags["cell_hash"] for run in cells}) == 6
    assert main(["export", "--benchmark", "tiny", "--out", str(tmp_path / "out")]) == 0
    assert len(list((tmp_path / "out" / CELLS_DIR).glob("*.json"))) == 6
    assert main(["import", str(folder)]) == 0 and "nothing new" in capsys.readouterr().out


def import_after_planning(folder, barrier) -> None:
    """In a forked child: import ``folder``, waiting after its plan (what the store holds) for the
    other child to have planned too, so that without a lease both would add every cell."""
    plan_import = store_transfer.plan_import

    def planned_then_wait(*args, **kwargs):
        plan = plan_import(*args, **kwargs)
        try:
            barrier.wait(timeout=15)
        except threading.BrokenBarrierError:
            pass  # the other import stopped at the lease
        return plan

    store_transfer.plan_import = planned_then_wait
    os._exit(main(["import", str(folder)]))


def create_store(uri: str) -> None:
    """In a forked child: create the store's tables (two processes creating them at once collide)."""
    MlflowClient(uri).search_experiments()
    os._exit(0)


def test_two_imports_of_one_folder_at_once_add_its_cells_once(tmp_path, store):
    folder = make_folder(tmp_path / "a")
    assert in_child(create_store, store) == 0
    barrier = FORK.Barrier(2)
    children = [FORK.Process(target=import_after_planning, args=(folder, barrier)) for _ in range(2)]
    for child in children:
        child.start()
    for child in children:
        child.join(300)
    assert sorted(child.exitcode for child in children) in ([0, 0], [0, 2])
    cells = finished_cells(tmp_path)
    assert len(cells) == 6 and len({run.data.tags["cell_hash"] for run in cells}) == 6
    assert len(parents(tmp_path)) == 1


def test_an_import_while_the_lease_is_held_is_one_line(tmp_path, store, capsys):
    folder = make_folder(tmp_path / "a")
    with lease("benchmark", "tiny", store, "import of elsewhere"):
        assert main(["import", str(folder)]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    holder = f"(import of elsewhere, process {os.getpid()}"
    assert line.startswith(f"error: benchmark 'tiny' already runs on {store} {holder}")
    assert not finished_cells(tmp_path)


def test_a_disk_that_fills_during_an_import_is_one_line_and_the_next_import_completes(
    tmp_path, store, capsys, monkeypatch
):
    folder = make_folder(tmp_path / "a")
    log_text, calls = MlflowClient.log_text, count()

    def full_disk(self, run_id, text, path):
        if next(calls) == 5:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(tmp_path / "artifacts" / path))
        return log_text(self, run_id, text, path)

    monkeypatch.setattr(MlflowClient, "log_text", full_disk)
    assert main(["import", str(folder)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(lines)
    assert "no space left" in lines[-1] and "run the same import again" in lines[-1]
    assert not finished_cells(tmp_path) and not [run for run in all_runs(tmp_path) if run.info.status == "RUNNING"]
    monkeypatch.setattr(MlflowClient, "log_text", log_text)
    assert main(["import", str(folder)]) == 0
    assert len(finished_cells(tmp_path)) == 6 and [run.info.status for run in parents(tmp_path)] == ["FINISHED"]
