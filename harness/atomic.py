"""Files and folders written whole or not at all: write beside the target, flush to disk, rename
into place. Every write-then-rename of the packages goes through here (a structure test holds it).
Torch is imported only by :func:`atomic_torch_save`.

The temporary lies in the target's own folder, so the final ``os.replace`` is a rename within one
filesystem (atomic), never a copy across filesystems that a full disk can cut short. Any failure
removes the temporary; the previous version of the target, if any, stays as it was.
"""

from __future__ import annotations

import io
import os
import shutil
from collections.abc import Callable
from pathlib import Path

TEMPORARY_MARK = ".tmp-"  # in the names of files being written: ``.<name>.tmp-<pid>``
STALE_MARK = ".stale-"  # a folder moved aside to be removed: ``.<name>.stale-<pid>``


def temporary_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{TEMPORARY_MARK}{os.getpid()}")


def stale_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{STALE_MARK}{os.getpid()}")


def move_into_place(finished: str | os.PathLike, path: str | os.PathLike) -> Path:
    """Rename the file ``finished`` (written completely, in ``path``'s filesystem) to ``path``,
    after flushing it to disk, replacing what ``path`` held. Returns ``path``."""
    descriptor = os.open(finished, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(finished, path)
    return Path(path)


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(temporary)`` to fill a temporary file beside ``path``, fsync it and rename it to
    ``path``. Returns ``path``. Exceptions of ``write`` (a full disk: ``OSError``) propagate after
    the temporary file is removed."""
    path = Path(path)
    temporary = temporary_path(path)
    try:
        write(temporary)
        move_into_place(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def atomic_torch_save(obj, path: str | os.PathLike) -> Path:
    """``torch.save(obj, path)``, whole or not at all (see :func:`atomic_write`).

    Serialised in memory first (as Lightning's own save does): torch's file writer reports a full
    disk as a ``RuntimeError`` of its zip container, a plain write as the ``OSError`` it is."""
    import torch  # the rest of this module serves torch-free writers too

    buffer = io.BytesIO()
    torch.save(obj, buffer)

    def write(temporary: Path) -> None:
        with open(temporary, "wb") as handle:
            handle.write(buffer.getbuffer())

    return atomic_write(path, write)


def atomic_folder(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(temporary)`` to fill a new folder beside ``path`` (``.<name>.tmp-<pid>``), then
    rename it to ``path``. Returns ``path``.

    A folder already at ``path`` is moved aside (``.<name>.stale-<pid>``) and removed first; one
    that another process puts there in between is kept (both are whole). Exceptions of ``write``
    propagate after the temporary folder is removed."""
    path = Path(path)
    temporary = temporary_path(path)
    try:
        shutil.rmtree(temporary, ignore_errors=True)  # left over by a crashed process with our pid
        temporary.mkdir(parents=True)
        write(temporary)
        if path.exists():
            stale = stale_path(path)
            try:
                os.replace(path, stale)
            except OSError:
                pass
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
            else:
                stale.unlink(missing_ok=True)
        try:
            os.replace(temporary, path)
        except OSError:
            if not path.is_dir():  # not a concurrent writer finishing first: a real failure
                raise
    finally:
        shutil.rmtree(temporary, ignore_errors=True)
    return path
