"""Runs whose process died are marked KILLED the next time the harness starts a run; live runs,
runs of other hosts and runs without process tags are left alone."""

import os
import socket
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from harness.tracking.liveness import (
    ENDED_TAG,
    HOST_TAG,
    PID_TAG,
    STARTED_TAG,
    mark_dead_runs,
    owner_alive,
    process_tags,
)
from harness.tracking.store import ensure_experiment, prepare_store


def dead_process_tags() -> dict[str, str]:
    """Tags of a process that has exited (its pid is free, or reused with another start time)."""
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    return {HOST_TAG: socket.gethostname(), PID_TAG: child.stdout.strip(), STARTED_TAG: "1000000000.00"}


def test_owner_alive_reads_host_pid_and_start_time():
    mine = process_tags()
    assert mine[PID_TAG] == str(os.getpid()) and owner_alive(mine) is True
    assert owner_alive({**mine, STARTED_TAG: str(float(mine[STARTED_TAG]) - 60)}) is False  # a reused pid
    assert owner_alive(dead_process_tags()) is False
    assert owner_alive({**mine, HOST_TAG: "another-host"}) is None
    assert owner_alive({}) is None and owner_alive({**mine, PID_TAG: "x"}) is None


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> str:
    """One fresh SQLite store for this module (creating one takes seconds)."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('liveness') / 'mlflow.db'}"
    prepare_store(uri)
    return uri


@pytest.mark.slow
def test_dead_runs_are_marked_killed_and_the_others_left_alone(store):
    uri, client = store, MlflowClient(store)
    experiment = ensure_experiment("pretrain", uri)
    other = ensure_experiment("mrpc", uri)
    runs = {
        "dead": client.create_run(experiment, tags=dead_process_tags()),
        "dead-child": client.create_run(other, tags={**dead_process_tags(), "mlflow.parentRunId": "p"}),
        "alive": client.create_run(experiment, tags=process_tags()),
        "other-host": client.create_run(experiment, tags={**dead_process_tags(), HOST_TAG: "another-host"}),
        "untagged": client.create_run(experiment),
        "finished": client.create_run(experiment, tags=dead_process_tags()),
    }
    ids = {name: run.info.run_id for name, run in runs.items()}
    client.set_terminated(ids["finished"], "FINISHED")
    assert sorted(mark_dead_runs(client)) == sorted([ids["dead"], ids["dead-child"]])
    status = {name: client.get_run(run_id).info.status for name, run_id in ids.items()}
    assert status == {
        "dead": "KILLED",
        "dead-child": "KILLED",
        "alive": "RUNNING",
        "other-host": "RUNNING",
        "untagged": "RUNNING",
        "finished": "FINISHED",
    }
    assert "died" in client.get_run(ids["dead"]).data.tags[ENDED_TAG]
    assert mark_dead_runs(client) == []


@pytest.mark.slow
def test_marking_can_be_limited_to_the_children_of_a_parent(store):
    client = MlflowClient(store)
    experiment = ensure_experiment("children", store)
    child = client.create_run(experiment, tags={**dead_process_tags(), "mlflow.parentRunId": "parent-a"})
    stranger = client.create_run(experiment, tags={**dead_process_tags(), "mlflow.parentRunId": "parent-b"})
    assert mark_dead_runs(client, parent_run_id="parent-a") == [child.info.run_id]
    assert client.get_run(stranger.info.run_id).info.status == "RUNNING"
    client.set_terminated(stranger.info.run_id, "FINISHED")  # leave the shared store with no dead run
