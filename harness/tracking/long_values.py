"""A value too long for an MLflow param or tag is never cut: MLflow would keep its first 6,000
(param) or 8,000 (tag) characters with only a warning in the log. The whole value goes to the run
as a text artifact instead, and the param or tag says where, so what the UI shows is never a
silently shortened setting, report or cause."""

from __future__ import annotations

import re

from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_TAG_VAL_LENGTH


def artifact_path(folder: str, key: str) -> str:
    """``<folder>/<key>.txt`` with the characters a file name should not hold replaced."""
    return f"{folder}/{re.sub(r'[^A-Za-z0-9._-]+', '_', key)}.txt"


def pointer(length: int, limit: int, path: str) -> str:
    return f"({length:,} characters, over MLflow's {limit:,}: the whole value is the artifact {path})"


def fitted_value(client, run_id: str, key: str, value: str, limit: int, folder: str) -> str:
    """``value`` when it fits ``limit``; else it is logged whole as ``<folder>/<key>.txt`` and the
    returned text names that artifact."""
    if len(value) <= limit:
        return value
    path = artifact_path(folder, key)
    client.log_text(run_id, value, path)
    return pointer(len(value), limit, path)


def shown_param(key: str, value: str) -> str:
    """What :func:`param_value` logs as param ``key`` for ``value`` (logging nothing)."""
    if len(value) <= MAX_PARAM_VAL_LENGTH:
        return value
    return pointer(len(value), MAX_PARAM_VAL_LENGTH, artifact_path("params", key))


def param_value(client, run_id: str, key: str, value: str) -> str:
    """What to log as param ``key``: the value, or a pointer to ``params/<key>.txt`` holding it whole."""
    return fitted_value(client, run_id, key, value, MAX_PARAM_VAL_LENGTH, "params")


def tag_value(client, run_id: str, key: str, value: str) -> str:
    """What to set as tag ``key``: the value, or a pointer to ``tags/<key>.txt`` holding it whole."""
    return fitted_value(client, run_id, key, value, MAX_TAG_VAL_LENGTH, "tags")
