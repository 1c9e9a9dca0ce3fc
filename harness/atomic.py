"""Files written whole or not at all: write beside the target, flush to disk, rename into place.
Torch is imported only by :func:`atomic_torch_save`.

The temporary file lies in the target's own folder, so the final ``os.replace`` is a rename within
one filesystem (atomic), never a copy across filesystems that a full disk can cut short. Any
failure removes the temporary file; the previous version of the target, if any, stays as it was.
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable
from pathlib import Path

TEMPORARY_MARK = ".tmp-"  # in the names of files being written: ``.<name>.tmp-<pid>``


def temporary_path(path: Path) -> Path:
    return path.with_name(f".{path.name}{TEMPORARY_MARK}{os.getpid()}")


def atomic_write(path: str | os.PathLike, write: Callable[[Path], None]) -> Path:
    """Call ``write(temporary)`` to fill a temporary file beside ``path``, fsync it and rename it to
    ``path``. Returns ``path``. Exceptions of ``write`` (a full disk: ``OSError``) propagate after
    the temporary file is removed."""
    path = Path(path)
    temporary = temporary_path(path)
    try:
        write(temporary)
        descriptor = os.open(temporary, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)
        os.replace(temporary, path)
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
