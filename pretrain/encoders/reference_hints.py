"""A did-you-mean for an encoder reference (``--model.encoder=lates``), checked before the heavy
imports: the words and schemes of :mod:`pretrain.encoders.references`, with nothing imported, and a
``runs:/<id>`` that the local SQLite store (``$MLFLOW_TRACKING_URI`` or the repo's ``mlflow.db``)
does not hold, read with the standard library. A value that names an existing file, or starts
with a known word or scheme, is otherwise left to the full parse."""

from __future__ import annotations

import difflib
import os
import sqlite3
from pathlib import Path

WORDS = ("latest", "random")
SCHEMES = ("runs:/", "models:/", "hf:", "reference:", "latest:", "random:")


REPO_ROOT = Path(__file__).resolve().parents[2]
RUNS_PREFIX = "runs:/"


def encoder_hint(value: str) -> str | None:
    """Why ``value`` cannot name an encoder, with the reference it is closest to; None when it may."""
    if value.startswith((RUNS_PREFIX, f"random:{RUNS_PREFIX}")):
        return missing_run(value.removeprefix("random:")[len(RUNS_PREFIX) :].split("/")[0].split("@")[0])
    if value in WORDS or value.startswith(SCHEMES) or Path(value).expanduser().exists():
        return None
    scheme, colon, _ = value.partition(":")
    if colon and "/" not in scheme and len(scheme) > 1:  # a scheme, not a path (C:\…)
        close = difflib.get_close_matches(f"{scheme}:", SCHEMES, n=1, cutoff=0.6)
        if close:
            return f"unknown scheme {scheme}:; did you mean {close[0]}{value[len(scheme) + 1 :].lstrip('/')}?"
        return None
    close = difflib.get_close_matches(value, WORDS, n=1, cutoff=0.6)
    return f"no such checkpoint file or encoder; did you mean {close[0]}?" if close else None


def local_store() -> Path | None:
    """The SQLite file of the tracking store in use, or None (a server, or no store yet)."""
    uri = os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{REPO_ROOT / 'mlflow.db'}"
    if not uri.startswith("sqlite:///"):
        return None
    path = Path(uri[len("sqlite:///") :])
    return path if path.is_file() else None


def missing_run(run_id: str) -> str | None:
    """``no run <id> in <store>`` (with the closest run id) when the local store lacks ``run_id``;
    None when it has it, or cannot be read without MLflow (the full parse decides then)."""
    store = local_store()
    if store is None or not run_id:
        return None
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5) as connection:
            if connection.execute("SELECT 1 FROM runs WHERE run_uuid = ?", (run_id,)).fetchone():
                return None
            ids = [row[0] for row in connection.execute("SELECT run_uuid FROM runs")]
    except sqlite3.Error:
        return None
    close = difflib.get_close_matches(run_id, ids, n=1, cutoff=0.6)
    return f"no run {run_id} in sqlite:///{store}" + (f"; did you mean runs:/{close[0]}?" if close else "")
