"""One process per named job (a benchmark's suite or import) and store at a time, on this
machine: a lock file keyed by the store and the name, held while the job runs and released by the
system when the process ends, however it ends. The second process stops in one line naming the
holder (what it is, its process, since when)."""

from __future__ import annotations

import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from harness.errors import UserError
from harness.tracking.store import REPO_ROOT

LOCKS = REPO_ROOT / ".cache" / "locks"


def busy(kind: str, name: str, uri: str, holder: str) -> UserError:
    """The one line for a job that another process holds."""
    return UserError(
        f"{kind} '{name}' already runs on {uri} ({holder}); wait for it to finish or stop it, "
        f"then run the same command again (it continues where that one stopped)"
    )


@contextmanager
def lease(kind: str, name: str, uri: str, holder: str = "") -> Iterator[None]:
    """Hold the lock of ``kind`` ``name`` on store ``uri`` while the block runs; ``holder`` says
    what holds it (``import of <folder>``) to whoever finds it taken, beside the process."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(f"{uri}\n{name}".encode()).hexdigest()[:20]
    with open(LOCKS / f"{kind}-{key}.lock", "a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            raise busy(kind, name, uri, handle.read().strip() or "another process") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{holder + ', ' if holder else ''}process {os.getpid()} since {time.strftime('%H:%M:%S')}")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
