"""The benchmark's parent run (``stage=benchmark``): opened (or resumed, when the same settings ran
before) under this process, and closed — FINISHED only once no child is still RUNNING."""

from __future__ import annotations

import json

from mlflow.tracking import MlflowClient

from benchmarks.engine.suite_lease import check_parent_free
from harness.datasets.registry import task_tags
from harness.datasets.types import PairData
from harness.errors import UserError
from harness.interruption import interruption
from harness.protocol import protocol_version
from harness.tracking.liveness import ENDED_TAG, mark_dead_runs, process_tags
from harness.tracking.long_values import param_value, tag_value
from harness.tracking.naming import benchmark_run_name
from harness.tracking.params import flatten
from harness.tracking.runs import ensure_experiment, interrupted_note, tracking_uri
from harness.versioning import git_commit


def open_parent(config: dict, suite_hash: str, data: PairData) -> str:
    """The benchmark's parent run: resumed when this config ran before, else new."""
    client = MlflowClient(tracking_uri())
    experiment_id = ensure_experiment(config["experiment"])
    found = client.search_runs(
        [experiment_id],
        f"tags.suite_hash = '{suite_hash}' and tags.stage = 'benchmark'",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
    if found:
        check_parent_free(found[0], config["name"], tracking_uri())
        run_id = found[0].info.run_id
        client.update_run(run_id, status="RUNNING")
        for key, value in process_tags().items():
            client.set_tag(run_id, key, value)
        if ENDED_TAG in found[0].data.tags:  # how it ended before no longer holds
            client.delete_tag(run_id, ENDED_TAG)
        return run_id
    tags = {
        "stage": "benchmark",
        "suite_hash": suite_hash,
        "benchmark": config["name"],
        "dataset": data.name,
        **task_tags(data),
        "protocol_version": protocol_version(),
        **process_tags(),
    }
    commit = git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    run = client.create_run(experiment_id, run_name=benchmark_run_name(config["name"]), tags=tags)
    params = {key: json.dumps(value) if isinstance(value, list) else value for key, value in flatten(config).items()}
    for key, value in params.items():
        client.log_param(run.info.run_id, key, param_value(client, run.info.run_id, key, str(value)))
    return run.info.run_id


def running_children(client: MlflowClient, parent: str) -> list[str]:
    """Children of ``parent`` still RUNNING once those whose process died are marked KILLED."""
    mark_dead_runs(client, parent_run_id=parent)
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    children = client.search_runs(
        experiments, f"tags.`mlflow.parentRunId` = '{parent}' and attributes.status = 'RUNNING'", max_results=1000
    )
    return [run.info.run_id for run in children]


def close_parent(client: MlflowClient, parent: str) -> None:
    """FINISHED, unless another live process still runs children under it (it closes it then)."""
    still_running = running_children(client, parent)
    if still_running:
        print(
            f"  note: {len(still_running)} child run(s) of {parent} are still RUNNING in another process; "
            f"the parent stays RUNNING"
        )
    else:
        client.set_terminated(parent, "FINISHED")


def abandon_parent(client: MlflowClient, parent: str, error: BaseException) -> None:
    """KILLED after Ctrl-C or SIGTERM (tagged ``harness.ended`` with the signal), else FAILED and
    tagged ``harness.ended`` with the cause, the line the suite prints (best effort: a store that
    went away is marked on the next start)."""
    signal_name = interruption(error)
    try:
        if signal_name:
            client.set_tag(parent, ENDED_TAG, interrupted_note(signal_name))
        client.set_terminated(parent, "KILLED" if signal_name else "FAILED")
        if not signal_name:  # after the status: a note never stands between the run and its end
            client.set_tag(parent, ENDED_TAG, tag_value(client, parent, ENDED_TAG, failure_note(error)))
    except Exception:  # noqa: BLE001 - best effort: a store that went away marks the run on its next start
        pass


def failure_note(error: BaseException) -> str:
    """``failed: <the error's first line>``, named by its type unless it is a user's mistake, whose
    line says it all."""
    text = (str(error).strip().splitlines() or [""])[0]
    return f"failed: {text}" if isinstance(error, UserError) and text else f"failed: {type(error).__name__}: {text}"
