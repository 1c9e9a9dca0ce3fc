"""Secrets the team server generates once and keeps in files only their owner can read.

A secret file is created with mode 0600 in a folder of mode 0700 (``.cache/server/`` by default),
by the user who starts the server; one that other users could read, or that another user owns,
is refused in one line rather than used (the server's artifacts are kept the same way:
:func:`private_tree`). Secrets never go on a command line (other local users see those in
``ps``), into a log or onto the console: the console names the file.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from harness.atomic import atomic_write
from harness.errors import UserError

PASSWORD_BYTES = 24  # token_urlsafe(24): 32 characters, 192 bits


def generate_password() -> str:
    """A random password of URL-safe characters (no ``:`` or ``\\``, so it fits a .pgpass line)."""
    return secrets.token_urlsafe(PASSWORD_BYTES)


def private_folder(folder: Path) -> Path:
    """``folder``, created with mode 0700 if missing; an existing one is narrowed to 0700."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    check_owner(folder)
    folder.chmod(0o700)
    return folder


def private_tree(folder: Path) -> Path:
    """``folder`` (created if missing) and what it holds narrowed to the owner: folders 0700, files
    0600 (symbolic links are left as they are; a path another user owns is one line)."""
    private_folder(folder)
    for root, folders, files in os.walk(folder):
        for name in folders + files:
            path = Path(root) / name
            if path.is_symlink():
                continue
            check_owner(path)
            path.chmod(0o700 if path.is_dir() else 0o600)
    return folder


def check_owner(path: Path) -> None:
    if path.stat().st_uid != os.geteuid():
        raise UserError(
            f"{path} belongs to another user (uid {path.stat().st_uid}); the server's secrets must be "
            f"the starting user's own: start the server as that user or move {path} away"
        )


def write_secret(path: Path, value: str) -> Path:
    """Write ``value`` to ``path`` with mode 0600 (replacing it atomically if it exists)."""
    private_folder(path.parent)

    def write(temporary: Path) -> None:
        temporary.unlink(missing_ok=True)
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # never readable by others
        with os.fdopen(descriptor, "w") as handle:
            handle.write(value if value.endswith("\n") else value + "\n")

    atomic_write(path, write)
    return path


def read_secret(path: Path) -> str:
    """The secret in ``path`` (its first line). Refuses a file group or others could read."""
    check_owner(path)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise UserError(
            f"{path}: mode {mode:04o} lets other users read a secret; `chmod 600 {path}` "
            f"(and change the secret if others may have read it)"
        )
    value = path.read_text().strip()
    if not value:
        raise UserError(f"{path} is empty; delete it to have a new secret generated")
    return value


def secret(path: Path, default: str | None = None) -> tuple[str, bool]:
    """The secret in ``path``, created on first use from ``default`` (else generated).

    Returns:
        the secret and whether this call created the file.
    """
    if path.exists():
        return read_secret(path), False
    write_secret(path, default or generate_password())
    return read_secret(path), True
