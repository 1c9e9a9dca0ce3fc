"""One suite or import per benchmark and store at a time. Two identical suites on one store would
run every cell twice (two FINISHED runs per cell, two parents) without a word, as would two imports
of one folder; the second stops in one line: on this machine by a lock held for the suite's (or
import's) lifetime (keyed by the store and the benchmark's name, released by the system when the
process ends, however it ends), and across machines or checkouts by the parent run, which a live
suite or import holds RUNNING."""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from mlflow.entities import Run

from harness.errors import UserError
from harness.tracking.liveness import HOST_TAG, PID_TAG, owner_alive
from harness.tracking.runs import REPO_ROOT

LOCKS = REPO_ROOT / ".cache" / "locks"


def busy(name: str, uri: str, holder: str) -> UserError:
    return UserError(
        f"benchmark '{name}' already runs on {uri} ({holder}); wait for it to finish or stop it, "
        f"then run the same command again (it continues where that one stopped)"
    )


@contextmanager
def one_suite(name: str, uri: str, holder: str = "") -> Iterator[None]:
    """Hold the lock of benchmark ``name`` on store ``uri`` while the block runs; ``holder`` says
    what holds it to whoever finds it taken (``import of <folder>``), with the process."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(f"{uri}\n{name}".encode()).hexdigest()[:20]
    with open(LOCKS / f"benchmark-{key}.lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise busy(name, uri, handle.read().strip() or "another process") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{holder + ', ' if holder else ''}process {os.getpid()} since {time.strftime('%H:%M:%S')}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def check_parent_free(run: Run, name: str, uri: str) -> None:
    """Refuse to resume a parent run that a live suite still holds RUNNING (another checkout or
    host: this machine's suites meet at the lock first). A parent whose process died on this host
    was marked KILLED before this check."""
    tags = run.data.tags
    if run.info.status != "RUNNING" or owner_alive(tags) is False or HOST_TAG not in tags:
        return
    raise busy(name, uri, f"parent run {run.info.run_id}, process {tags.get(PID_TAG)} on {tags[HOST_TAG]}")
