"""The JSON shapes of a results folder's files (``benchmark.json``, a cell record, ``manifest.json``),
checked before any field is used: a wrong type anywhere (``format: "1"``, ``order: null``, a list
where an object belongs) is one line naming the file and the field, never a TypeError later.

A shape is a type (``str``, ``int``: never a bool, ``NUMBER``: int or float), a tuple of shapes
(any one of them), ``[shape]`` (a list of them), ``{key: shape}`` (an object with those keys; a
key ending in ``?`` may be absent, other keys are allowed) or ``Each(shape)`` (an object whose
every value has that shape)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from harness.errors import UserError

FORMAT = 2  # the folder layout's version (2: with manifest.json; a format-1 folder is sealed into one)
MOST_JSON_BYTES = 16 << 20  # any one file of a results folder's records
NUMBER = (int, float)
MOST_INTEGER_BITS = 63  # seeds, counts, times in ms: a larger integer is no result's (and overflows a float)


@dataclass(frozen=True)
class Each:
    """An object whose every value has ``shape`` (metrics, params, tags)."""

    shape: object


TEXT_FIELDS = Each(str)
SPLIT_COUNTS = {"dev": int, "test": int}

BENCHMARK = {
    "format": int,
    "benchmark": str,
    "dataset": str,
    "data_digest": str,
    "experiment?": str,
    "labels": [str],
    "positive_label": (str, type(None)),
    "settings?": (
        {
            "comparisons?": ([str], type(None)),
            "random_control?": bool,
            "dataset?": ({"dataset?": str}, type(None)),  # the registry's data set, whose task the folder's is
        },
        type(None),
    ),
    "parent_run_id?": str,
    "cells?": int,
    "corpora?": Each(str),
    "wall_seconds?": (*NUMBER, type(None)),
    "machine?": {
        "cpu_model": str,
        "cpus": int,
        "jobs": (int, type(None)),
        "cluster": bool,
        "finetune_threads": int,
        "pretrain_threads": int,
        "precision": (str, type(None)),
    },
}

SPEC = {
    "kind": str,
    "seed": int,
    "method": str,
    "encoder": str,
    "mix": str,
    "head": str,
    "train_fraction": NUMBER,
    "args": [str],
    "config": str,
    "config_text?": str,
    "data": str,
    "probe_of?": str,
}

CELL_FIELDS = {
    "method": str,
    "kind": str,
    "seed": int,
    "encoder": str,
    "encoder_run": str,
    "mix": str,
    "head": str,
    "train_fraction": NUMBER,
    "control": str,
    "args": [str],
    "config": str,
    "transfer": str,
    "family": str,
    "encoder_identity": str,
    "probe_of": str,
    "grid_of": str,
    "learning_rate": (*NUMBER, type(None)),
    "recipe_from?": str,
}

CELL = {
    "format": int,
    "cell_hash": str,
    "protocol": str,
    "commit": str,
    "data_digest": str,
    "spec": SPEC,
    "cell": CELL_FIELDS,
    "order": [int],
    "metrics": Each(NUMBER),
    "params": TEXT_FIELDS,
    "tags": TEXT_FIELDS,
    "run": {
        "run_id": str,
        "parent_run_id": str,
        "start_time?": (int, type(None)),
        "end_time?": (int, type(None)),
        "host?": str,
    },
    "predictions": {"file": str, "sha256": str, "rows": SPLIT_COUNTS},
    "encoder": ({"identity": str, "digest": str, "name": str}, type(None)),
    "precision?": (str, type(None)),
}

MANIFEST = {
    "format": int,
    "benchmark": TEXT_FIELDS,
    "cells": Each(TEXT_FIELDS),
    "seals?": [{"commit": str, "replaces": str}],
}


def type_name(shape) -> str:
    """How a message names what ``shape`` expects."""
    if isinstance(shape, tuple):
        return " or ".join(dict.fromkeys(type_name(option) for option in shape))
    if isinstance(shape, list):
        return "a list"
    if isinstance(shape, (dict, Each)):
        return "an object"
    return {
        str: "text",
        int: "an integer",
        float: "a number",
        bool: "true or false",
        type(None): "null",
        dict: "an object",
    }.get(shape, shape.__name__)


def matches(value, shape) -> bool:
    """Whether ``value`` is of ``shape``'s outer type (what it holds is checked by :func:`check_shape`)."""
    if isinstance(shape, tuple):
        return any(matches(value, option) for option in shape)
    if isinstance(shape, list):
        return isinstance(value, list)
    if isinstance(shape, (dict, Each)):
        return isinstance(value, dict)
    if isinstance(value, bool):
        return shape is bool
    return isinstance(value, shape)


def problem(value, shape, field: str) -> str | None:
    """The first place where ``value`` is not of ``shape``, as ``<field>: <what was expected>``; None if it is."""
    if not matches(value, shape):
        return (
            f"{field or 'the file'} is {type(value).__name__ if value is not None else 'null'}, not {type_name(shape)}"
        )
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > MOST_INTEGER_BITS:
        return f"{field or 'the file'} is an integer of {value.bit_length()} bits, out of any result's range"
    if isinstance(shape, tuple):
        inner = [option for option in shape if matches(value, option)][0]
        return problem(value, inner, field) if isinstance(inner, (list, dict, Each)) else None
    if isinstance(shape, list):
        return next(
            filter(None, (problem(item, shape[0], f"{field}[{index}]") for index, item in enumerate(value))), None
        )
    if isinstance(shape, Each):
        return next(
            filter(
                None, (problem(item, shape.shape, f"{field}.{key}" if field else key) for key, item in value.items())
            ),
            None,
        )
    if isinstance(shape, dict):
        for key, inner in shape.items():
            name, optional = key.rstrip("?"), key.endswith("?")
            where = f"{field}.{name}" if field else name
            if name not in value:
                if not optional:
                    return f"{where} is missing"
                continue
            found = problem(value[name], inner, where)
            if found:
                return found
    return None


def check_shape(value, shape, path: Path) -> None:
    """Raise a one-line UserError naming ``path`` and the field where ``value`` is not of ``shape``."""
    found = problem(value, shape, "")
    if found:
        raise UserError(f"{path}: {found}")


def read_record(path: Path, shape) -> dict:
    """A results folder's JSON file, of ``shape``: a missing, linked, oversized, truncated, deeply
    nested or mistyped file is one line naming it (and the field)."""
    if path.is_symlink():
        raise UserError(f"{path}: a link; a results folder holds its files themselves")
    try:
        if path.stat().st_size > MOST_JSON_BYTES:
            raise UserError(
                f"{path}: {path.stat().st_size} bytes, more than a results record can take ({MOST_JSON_BYTES})"
            )
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: missing") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as error:  # ValueError: JSON, a 5000-digit int
        raise UserError(
            f"{path}: unreadable, truncated or edited ({type(error).__name__}: "
            f"{(str(error).splitlines() or [''])[0][:120]})"
        ) from None
    if not isinstance(value, dict):
        raise UserError(f"{path}: not a results file (a JSON object expected)")
    check_shape(value, shape, path)
    return value
