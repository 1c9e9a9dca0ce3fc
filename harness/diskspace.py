"""Disk space and disk errors: room checked and allocated before a large write, and the
``OSError`` of a full, read-only or unwritable disk told to the user in one line.

A file written through a memory map (``np.memmap``) is sparse until its pages are touched: on a
full filesystem the first write to a page the disk cannot hold kills the process with SIGBUS,
which no handler can turn into a message. :func:`allocate` gives the file all its blocks up front
(``posix_fallocate``), so the write fails, if it fails, as an ``OSError`` before anything is
computed.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

from harness.errors import UserError

# errnos that mean "the disk cannot take this write", not a bug
DISK_ERRNOS = {
    errno.ENOSPC: "no space left",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only filesystem",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EFBIG: "file too large",
}
GIB = 2**30


def existing_parent(path: Path) -> Path:
    """``path`` or its nearest ancestor that exists (what ``disk_usage`` can look at)."""
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def free_bytes(path: str | os.PathLike) -> int:
    """Bytes an unprivileged writer may still use on the filesystem that holds (or will hold) ``path``."""
    return shutil.disk_usage(existing_parent(Path(path))).free


def size_text(size: float) -> str:
    """``1.2 GiB``, ``340 MiB``, ``12 KiB``."""
    for unit, scale in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    return f"{int(size)} B"


def check_free(path: str | os.PathLike, needed: int, what: str, fix: str) -> None:
    """Refuse (UserError) a write of ``needed`` bytes under ``path`` when its filesystem has less free.

    ``what`` names the flag or file in the message, ``fix`` says what to do."""
    free = free_bytes(path)
    if needed > free:
        raise UserError(
            f"{what}: needs {size_text(needed)} on the disk of {existing_parent(Path(path))}, "
            f"only {size_text(free)} free; {fix}"
        )


def allocate(path: str | os.PathLike) -> None:
    """Give the existing file at ``path`` every block of its current size (no sparse holes left).

    Raises:
        OSError (ENOSPC) when the filesystem cannot hold it.
    """
    descriptor = os.open(path, os.O_RDWR)
    try:
        size = os.fstat(descriptor).st_size
        if size:
            os.posix_fallocate(descriptor, 0, size)
    finally:
        os.close(descriptor)


# what SQLite says when its disk cannot take a write (the run store)
SQLITE_DISK_MESSAGES = {
    "database or disk is full": "no space left",
    "readonly database": "read-only",
    "disk i/o error": "disk I/O error",
}


def disk_problem(error: BaseException, store: str = "the run store") -> str | None:
    """``'<file>: no space left (…)'`` when ``error`` (or an exception it was raised from) is a
    full, read-only or unwritable disk: an OSError, or the SQLite run store's own error (named
    ``store``: the caller knows which store it opened); None otherwise."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, OSError) and error.errno in DISK_ERRNOS:
            where = error.filename or "a file"
            return f"{where}: {DISK_ERRNOS[error.errno]} ({error.strerror or os.strerror(error.errno)})"
        text = str(error).lower()
        if type(error).__name__ == "OperationalError":
            for message, problem in SQLITE_DISK_MESSAGES.items():
                if message in text:
                    return f"{store}: {problem} (SQLite: {message})"
        error = error.__cause__ or error.__context__
    return None
