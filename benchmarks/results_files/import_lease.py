"""An import that races or dies leaves a store whole. One import (or suite) per benchmark and
store at a time: the suite's lease (:mod:`harness.tracking.lease`), so two imports of one
folder cannot both find its cells missing and add them twice. An import's parent carries the
liveness tags every run has, so a killed import's parent is marked KILLED, never RUNNING forever;
and the next import of the same study finds that unfinished parent and completes it (its cells,
its ``study.json``, FINISHED) instead of saying there is nothing new."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from mlflow.tracking import MlflowClient

from benchmarks.results_files.store_copies import IMPORTED_TAG
from harness.diskspace import disk_problem
from harness.errors import UserError
from harness.tracking.lease import busy, lease
from harness.tracking.liveness import ENDED_TAG, HOST_TAG, PID_TAG, mark_dead_runs, owner_alive, process_tags

ORIGIN_PARENT_TAG = "origin_parent_run_id"  # on an import's parent: the parent run the folder was exported from


@contextmanager
def one_import(names: list[str], folders: list[Path], uri: str) -> Iterator[None]:
    """Hold the lease of every benchmark ``names`` gives on store ``uri`` (in one order, so two
    imports never wait on each other) while the block runs, after marking KILLED the runs of this
    host whose process died. A disk that cannot take the import's writes is one line."""
    holder = f"import of {', '.join(str(folder) for folder in folders)}"
    with ExitStack() as stack:
        for name in sorted(set(names)):
            stack.enter_context(lease("benchmark", name, uri, holder))
        try:
            mark_dead_runs(MlflowClient(uri))
            yield
        except (UserError, KeyboardInterrupt):
            raise
        except Exception as error:
            problem = disk_problem(error)
            if problem is None:
                raise
            raise UserError(
                f"{problem}: the import stopped; free space and run the same import again (it completes "
                f"what this one wrote, nothing is imported twice)"
            ) from None


def parent_tags(benchmark: dict) -> dict[str, str]:
    """What an import's parent carries besides its study: the parent it copies, and its process."""
    return {ORIGIN_PARENT_TAG: str(benchmark.get("parent_run_id", "")), **process_tags()}


def unfinished_parent(client: MlflowClient, experiment: str, benchmark: dict, uri: str) -> str | None:
    """The parent an earlier import of this study (same benchmark, same origin parent) left
    unfinished, to complete (one without process tags: an older harness's, killed); None when there
    is none. One RUNNING under a live process (another host's, which this host cannot tell dead) is
    a one-line refusal: that import still runs."""
    found = client.get_experiment_by_name(experiment)
    if found is None or found.lifecycle_stage != "active":
        return None
    name = str(benchmark["benchmark"])
    runs = client.search_runs(
        [found.experiment_id],
        f"tags.stage = 'benchmark' and tags.benchmark = '{name}'",
        order_by=["attributes.start_time DESC"],
        max_results=1000,
    )
    origin = str(benchmark.get("parent_run_id", ""))
    for run in runs:
        tags = run.data.tags
        if run.info.status == "FINISHED" or IMPORTED_TAG not in tags or tags.get(ORIGIN_PARENT_TAG) != origin:
            continue
        if run.info.status == "RUNNING" and HOST_TAG in tags and owner_alive(tags) is not False:
            process = f"process {tags.get(PID_TAG, '?')} on {tags[HOST_TAG]}"
            raise busy("benchmark", name, uri, f"import parent run {run.info.run_id}, {process}")
        return run.info.run_id
    return None


def resume_parent(client: MlflowClient, parent: str) -> set[str]:
    """Take over the unfinished import parent ``parent``: RUNNING under this process again, its
    children that did not finish deleted (their cells are imported again); returns the run ids of
    its FINISHED children, which are its cells already."""
    client.update_run(parent, status="RUNNING")
    for key, value in process_tags().items():
        client.set_tag(parent, key, value)
    if ENDED_TAG in client.get_run(parent).data.tags:  # how it ended before no longer holds
        client.delete_tag(parent, ENDED_TAG)
    children = client.search_runs(
        [client.get_run(parent).info.experiment_id], f"tags.`mlflow.parentRunId` = '{parent}'", max_results=50_000
    )
    for run in children:
        if run.info.status == "RUNNING":
            client.set_terminated(run.info.run_id, "KILLED")
        if run.info.status != "FINISHED":
            client.delete_run(run.info.run_id)
    return {run.info.run_id for run in children if run.info.status == "FINISHED"}


def discard(client: MlflowClient, run_ids: list[str]) -> None:
    """Delete the runs an import wrote before it failed, each ended FAILED first (a deleted run
    left RUNNING is still a run left RUNNING)."""
    for run_id in run_ids:
        if client.get_run(run_id).info.status == "RUNNING":
            client.set_terminated(run_id, "FAILED")
        client.delete_run(run_id)


def unfinished_import(run) -> str | None:
    """What to say of a benchmark parent that an import began and did not finish (a study read
    from it would lack cells or its record); None for any other run."""
    tags = run.data.tags
    if IMPORTED_TAG not in tags or run.info.status == "FINISHED":
        return None
    return (
        f"its parent run {run.info.run_id} is an import of {tags[IMPORTED_TAG]} that did not finish "
        f"({run.info.status}); run `python -m benchmarks import {tags[IMPORTED_TAG]}` again to complete it"
    )
