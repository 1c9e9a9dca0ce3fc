"""What an encoder reference may be, and why a value is none, checked before the heavy imports:
the words and schemes of :mod:`pretrain.encoders.references` with nothing imported, a checkpoint
file that does not exist, an ``hf:<folder>`` that is no ``save_pretrained`` folder, and a
``runs:/<id>`` that the local SQLite store (``$MLFLOW_TRACKING_URI`` or the repo's ``mlflow.db``)
does not hold, read with the standard library. Each refusal lists the accepted forms
(:data:`FORMS`), as does the full load's (:class:`NoSuchEncoder`). A value the full parse may
accept (an existing file, a hub id, a known word or scheme) is left to it."""

from __future__ import annotations

import difflib
import os
import sqlite3
from pathlib import Path

from harness.errors import UserError

WORDS = ("latest", "random")
SCHEMES = ("runs:/", "models:/", "hf:", "reference:", "latest:", "random:")


FORMS = (
    "runs:/<run_id>",
    "models:/<name>@<alias> or models:/<name>/<version>",
    "a checkpoint file",
    "latest[:<family>[:general|task]]",
    "random[:<encoder>[@<seed>]]",
    "hf:<folder> or hf:<owner>/<name>",
    "reference:<name>",
)
ACCEPTED = "an encoder is " + ", ".join(FORMS)

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNS_PREFIX = "runs:/"
RANDOM_PREFIX = "random:"


def with_forms(reason: str) -> str:
    """``reason``, then the accepted forms: one line."""
    return f"{reason}; {ACCEPTED}"


class NoSuchEncoder(UserError):
    """A reference the full load found to name nothing (no run, no file, no model folder): the
    reason, then the accepted forms."""

    def __init__(self, reason: str):
        super().__init__(with_forms(reason))


def encoder_hint(value: str) -> str | None:
    """Why ``value`` cannot name an encoder (with the reference it is closest to, and the accepted
    forms); None when it may."""
    if value.startswith(RANDOM_PREFIX):
        body, _, seed = value[len(RANDOM_PREFIX) :].rpartition("@")
        body = body if seed.isdigit() else value[len(RANDOM_PREFIX) :]
        return encoder_hint(body) if body else None
    if value.startswith(RUNS_PREFIX):
        return missing_run(value[len(RUNS_PREFIX) :].split("/")[0].split("@")[0])
    if value.startswith("hf:"):
        return folder_problem(value[len("hf:") :])
    if value in WORDS or value.startswith(SCHEMES) or Path(value).expanduser().exists():
        return None
    scheme, colon, _ = value.partition(":")
    if colon and "/" not in scheme and len(scheme) > 1:  # a scheme, not a path (C:\…)
        close = difflib.get_close_matches(f"{scheme}:", SCHEMES, n=1, cutoff=0.6)
        if close:
            return with_forms(
                f"unknown scheme {scheme}: (did you mean {close[0]}{value[len(scheme) + 1 :].lstrip('/')}?)"
            )
    close = difflib.get_close_matches(value, WORDS, n=1, cutoff=0.6)
    meant = f" (did you mean {close[0]}?)" if close else ""
    return with_forms(f"no such file, nor an encoder's name{meant}")


def folder_problem(target: str) -> str | None:
    """Why ``hf:<target>`` names no model folder; None for a ``save_pretrained`` folder, a hub id
    (the local Hugging Face cache is the full load's to search) or no target (the parse names that)."""
    if not target:
        return None
    path = Path(target).expanduser()
    if path.is_dir():
        has_config = (path / "config.json").is_file()
        return None if has_config else with_forms(f"{path} has no config.json: not a folder `save_pretrained` wrote")
    if path.exists():
        return with_forms(f"{path} is a file; hf: takes the folder `save_pretrained` wrote")
    if target.count("/") == 1 and not target.startswith((".", "/", "~")):
        return None
    return with_forms(f"no such folder: {target}")


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
    return with_forms(f"no run {run_id} in sqlite:///{store}" + (f" (did you mean runs:/{close[0]}?)" if close else ""))
