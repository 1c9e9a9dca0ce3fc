"""One suite per benchmark and store at a time. Two identical suites on one store would run
every cell twice (two FINISHED runs per cell, two parents) without a word; the second stops
in one line: on this machine by a lock held for the suite's lifetime (:mod:`harness.tracking.lease`,
keyed by the store and the benchmark's name, the one an import of the benchmark holds too), and
across machines or checkouts by the parent run, which a live suite holds RUNNING."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from mlflow.entities import Run

from harness.errors import UserError
from harness.tracking.lease import busy as lease_busy
from harness.tracking.lease import lease
from harness.tracking.liveness import HOST_TAG, PID_TAG, owner_alive


def busy(name: str, uri: str, holder: str) -> UserError:
    return lease_busy("benchmark", name, uri, holder)


@contextmanager
def one_suite(name: str, uri: str) -> Iterator[None]:
    """Hold the lock of benchmark ``name`` on store ``uri`` while the block runs (an import of
    the benchmark holds the same one: :mod:`benchmarks.results_files.import_lease`)."""
    with lease("benchmark", name, uri):
        yield


def check_parent_free(run: Run, name: str, uri: str) -> None:
    """Refuse to resume a parent run that a live suite still holds RUNNING (another checkout or
    host: this machine's suites meet at the lock first). A parent whose process died on this host
    was marked KILLED before this check."""
    tags = run.data.tags
    if run.info.status != "RUNNING" or owner_alive(tags) is False or HOST_TAG not in tags:
        return
    raise busy(name, uri, f"parent run {run.info.run_id}, process {tags.get(PID_TAG)} on {tags[HOST_TAG]}")
