"""Where the MLflow UI of a local store is served: ``make ui HOST=… PORT=…`` records the address
it serves the store on, so the links every later command prints open that UI, not a fixed port.

One small file per store under ``.cache/ui/`` (git-ignored), named after a digest of the store
(the resolved database file of a ``sqlite:///`` URI, else the URI itself): the URI, which may hold
a password, is never written. The record is the last address the store was served on; a UI
stopped since leaves it in place, which is still the best guess for the next ``make ui``.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from harness.atomic import atomic_write
from harness.tracking.store import REPO_ROOT, sqlite_path

RECORDS = REPO_ROOT / ".cache" / "ui"
DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 5000
WILDCARDS = ("0.0.0.0", "::", "")  # listening on every interface: this machine reaches it on loopback


def link_address(host: str, port: int) -> str:
    """The address a browser on this machine opens for a UI listening on ``host``:``port``."""
    host = DEFAULT_HOST if host in WILDCARDS else host
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def record_path(uri: str) -> Path:
    database = sqlite_path(uri)
    key = str(database.resolve()) if database is not None else uri
    return RECORDS / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.url"


def record_address(uri: str, address: str) -> None:
    """Remember that the store of tracking URI ``uri`` is served at ``address``."""
    path = record_path(uri)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, lambda temporary: temporary.write_text(address.rstrip("/") + "\n"))


def recorded_address(uri: str) -> str | None:
    """The address ``make ui`` last served the store of ``uri`` on; None if it never did."""
    try:
        address = record_path(uri).read_text().strip()
    except OSError:
        return None
    return address or None
