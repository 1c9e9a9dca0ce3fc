"""The MLflow runs of task attempts. Every run a study's task starts carries the id of the suite
process that dispatched it (``harness.driver``) and the node it ran on (``harness.node``). Within
one study each cell and stage is dispatched once, so a RUNNING run with the same settings hash and
the same driver is a lost attempt (its worker or node died): the retry marks it KILLED before it
starts, and the driver marks KILLED whatever of its own is still RUNNING when it stops."""

from __future__ import annotations

import os
import socket
import uuid
from pathlib import Path

from mlflow.entities import ViewType
from mlflow.tracking import MlflowClient

from harness.tracking.liveness import ENDED_TAG, mark_dead_runs
from harness.tracking.runs import CHECKPOINT_DIR_TAG, tracking_uri
from harness.training.checkpoints import LAST

DRIVER_TAG, NODE_TAG = "harness.driver", "harness.node"


def new_driver_id() -> str:
    """An id for this suite process: ``<host>-<pid>-<random>``."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


def node_name() -> str:
    """The Ray node this code runs on (``<ip>/<node id>``: nodes on one machine share an IP), else
    this host's name."""
    try:
        import ray

        if ray.is_initialized():
            return f"{ray.util.get_node_ip_address()}/{ray.get_runtime_context().get_node_id()}"
    except Exception:  # noqa: BLE001 - outside Ray
        pass
    return socket.gethostname()


def attempt_tags(driver: str) -> dict[str, str]:
    return {DRIVER_TAG: driver, NODE_TAG: node_name()}


def _end(client: MlflowClient, runs: list, reason: str) -> list[str]:
    ended = []
    for run in runs:
        client.set_tag(run.info.run_id, ENDED_TAG, reason)
        client.set_terminated(run.info.run_id, "KILLED")
        ended.append(run.info.run_id)
    return ended


def _experiment_ids(client: MlflowClient) -> list[str]:
    return [experiment.experiment_id for experiment in client.search_experiments(view_type=ViewType.ALL)]


def end_lost_attempts(cell_hash: str, driver: str) -> list[str]:
    """Mark KILLED the RUNNING runs of earlier attempts at this cell or stage. Returns their ids."""
    client = MlflowClient(tracking_uri())
    query = f"tags.cell_hash = '{cell_hash}' and tags.`{DRIVER_TAG}` = '{driver}' and attributes.status = 'RUNNING'"
    runs = client.search_runs(_experiment_ids(client), query, max_results=100)
    return _end(client, runs, f"attempt lost (its worker or node died); retried on {node_name()}")


def end_driver_runs(driver: str, reason: str) -> list[str]:
    """Mark KILLED every run of ``driver``'s tasks still RUNNING (cancelled, or lost for good)."""
    client = MlflowClient(tracking_uri())
    experiments = _experiment_ids(client)
    if not experiments:
        return []
    runs = client.search_runs(
        experiments, f"tags.`{DRIVER_TAG}` = '{driver}' and attributes.status = 'RUNNING'", max_results=10_000
    )
    return _end(client, runs, reason)


def end_cancelled_runs(driver: str, since_ms: int) -> list[str]:
    """Mark KILLED the runs of ``driver``'s tasks that ended FAILED after ``since_ms`` (epoch ms),
    when the driver cancelled them: Lightning turns the task's interrupt into an exit, which the
    CLI records as a failure."""
    client = MlflowClient(tracking_uri())
    experiments = _experiment_ids(client)
    if not experiments:
        return []
    runs = [
        run
        for run in client.search_runs(
            experiments, f"tags.`{DRIVER_TAG}` = '{driver}' and attributes.status = 'FAILED'", max_results=10_000
        )
        if (run.info.end_time or 0) >= since_ms
    ]
    return _end(client, runs, "cancelled by the suite (Ctrl-C, or another task failed)")


def finished_child(experiment_id: str, cell_hash: str, parent: str) -> str | None:
    """The FINISHED run of this cell under ``parent`` (an attempt that finished but whose worker
    died before it could say so), None if there is none."""
    client = MlflowClient(tracking_uri())
    runs = client.search_runs(
        [experiment_id],
        f"tags.cell_hash = '{cell_hash}' and attributes.status = 'FINISHED' and tags.mlflow.parentRunId = '{parent}'",
        max_results=1,
    )
    return runs[0].info.run_id if runs else None


def stopped_attempt_checkpoint(experiment_id: str, cell_hash: str) -> Path | None:
    """The ``last.ckpt`` of the newest stopped (KILLED) attempt at this stage that this machine
    holds, once the RUNNING runs whose process died are marked KILLED; None when there is none. A
    study stopped (Ctrl-C, a lost worker, the machine's session ending) resumes a stage from
    there: the same settings hash means the same settings, data and code."""
    client = MlflowClient(tracking_uri())
    mark_dead_runs(client)
    runs = client.search_runs(
        [experiment_id],
        f"tags.cell_hash = '{cell_hash}' and attributes.status = 'KILLED'",
        order_by=["attributes.start_time DESC"],
        max_results=20,
    )
    for run in runs:
        folder = run.data.tags.get(CHECKPOINT_DIR_TAG)
        if folder and (Path(folder) / LAST).is_file():
            return Path(folder) / LAST
    return None
