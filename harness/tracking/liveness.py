"""Which process owns a RUNNING run, and marking the runs whose process died.

A run killed with ``kill -9`` (or by the OOM killer, or a power cut) cannot close itself: it
stays RUNNING forever. Every run the harness starts carries the host, pid and start time of its
process in tags; whenever the harness starts a run on a store it marks KILLED every RUNNING run
of this host whose process is gone (the start time tells a reused pid from the original one).
Runs of other hosts, and runs without these tags, are left alone: nothing here can tell.
"""

from __future__ import annotations

import os
import socket

import psutil
from mlflow.entities import ViewType
from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

HOST_TAG, PID_TAG, STARTED_TAG = "harness.host", "harness.pid", "harness.pid_started"
ENDED_TAG = "harness.ended"
STARTED_TOLERANCE = 1.0  # seconds; process start times are read from /proc at 10 ms resolution


def process_started(pid: int) -> float | None:
    """Start time (epoch seconds) of process ``pid``, None when there is no such process."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None


def process_tags() -> dict[str, str]:
    """Tags naming this process: host, pid and start time."""
    pid = os.getpid()
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), STARTED_TAG: f"{process_started(pid):.2f}"}


def owner_alive(tags: dict[str, str]) -> bool | None:
    """True when the process named by a run's tags still runs, False when it is gone, None when
    the tags do not say (no tags, another host, unreadable values)."""
    if tags.get(HOST_TAG) != socket.gethostname():
        return None
    try:
        pid, started = int(tags[PID_TAG]), float(tags[STARTED_TAG])
    except (KeyError, ValueError):
        return None
    actual = process_started(pid)
    return actual is not None and abs(actual - started) < STARTED_TOLERANCE


def mark_dead_runs(client: MlflowClient, parent_run_id: str | None = None) -> list[str]:
    """Mark KILLED every RUNNING run (of the whole store, or the children of ``parent_run_id``)
    whose process on this host has died. Returns their run ids."""
    experiments = [experiment.experiment_id for experiment in client.search_experiments(view_type=ViewType.ALL)]
    if not experiments:
        return []
    query = "attributes.status = 'RUNNING'"
    if parent_run_id:
        query += f" and tags.`mlflow.parentRunId` = '{parent_run_id}'"
    marked = []
    for run in client.search_runs(experiments, query, run_view_type=ViewType.ALL, max_results=1000):
        if owner_alive(run.data.tags) is False:
            try:
                client.set_tag(
                    run.info.run_id,
                    ENDED_TAG,
                    f"process {run.data.tags[PID_TAG]} died; marked KILLED by process {os.getpid()}",
                )
                client.set_terminated(run.info.run_id, "KILLED")
            except MlflowException:  # a team server's run this user may not change: its owner's next start marks it
                continue
            marked.append(run.info.run_id)
    return marked
