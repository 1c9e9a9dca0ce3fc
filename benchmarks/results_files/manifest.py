"""A results folder's manifest (``manifest.json``): what binds its files together.

For each cell hash it records the sha256 of the cell's predictions file and a digest of every other
field of its record that neither the hash (over ``spec``) nor the predictions give: the encoder
block, metrics, params, tags, run, order and the cell's own fields. For ``benchmark.json`` it
records a digest of each field (settings, labels, positive label, ...). Read back, a folder with a
cell edited, dropped, added, or swapped with another's (predictions and sha256 together) is one
line naming the file and the field. It guards against edits, truncation and mix-ups, not a forger
who rewrites it too: the folder's history in git records that.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from benchmarks.results_files.record_shapes import BENCHMARK, CELL, FORMAT, MANIFEST, read_record
from harness.atomic import atomic_write
from harness.errors import UserError

MANIFEST_FILE = "manifest.json"
BENCHMARK_FILE = "benchmark.json"
CELLS_DIR = "cells"
DIGEST_DIGITS = 16  # 64 bits: enough to tell an edited field, which is all a digest here is for
CHECKED_OTHERWISE = ("format", "cell_hash", "protocol", "spec", "data_digest", "predictions")  # hash, data, file


def digest(value) -> str:
    """A short sha256 of a JSON value, the same for the same value however its file is laid out."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:DIGEST_DIGITS]


def benchmark_digests(benchmark: dict) -> dict[str, str]:
    return {key: digest(value) for key, value in benchmark.items() if key != "format"}


def cell_digests(record: dict) -> dict[str, str]:
    """The predictions file's sha256 and a digest of each field of the record not checked otherwise."""
    return {
        "predictions": record["predictions"]["sha256"],
        **{key: digest(value) for key, value in record.items() if key not in CHECKED_OTHERWISE},
    }


def write_manifest(folder: Path, seals: list[dict] | None = None) -> Path:
    """Write the manifest of the folder's files as they are (``seal``, ``export``), with its chain of
    ``seals`` (``benchmarks.results_files.seal_chain``) where given; returns its path."""
    folder = Path(folder)
    benchmark = read_record(folder / BENCHMARK_FILE, BENCHMARK)
    cells = {}
    for path in sorted((folder / CELLS_DIR).glob("*.json")):
        record = read_record(path, CELL)
        cells[record["cell_hash"]] = cell_digests(record)
    manifest = {"format": FORMAT, "benchmark": benchmark_digests(benchmark), "cells": cells}
    if seals is not None:
        manifest["seals"] = seals
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    return atomic_write(folder / MANIFEST_FILE, lambda staged: staged.write_text(text, encoding="utf-8"))


def read_manifest(folder: Path) -> dict:
    path = folder / MANIFEST_FILE
    if not path.exists() and not path.is_symlink():
        raise UserError(
            f"{path}: missing; a results folder binds its cells in one (a format-1 folder: check and "
            f"seal it with `python -m benchmarks seal {folder}`)"
        )
    return read_record(path, MANIFEST)


def differing(recorded: dict[str, str], found: dict[str, str]) -> str | None:
    """The first field whose digest differs (one present on one side only included)."""
    return next((key for key in sorted(set(recorded) | set(found)) if recorded.get(key) != found.get(key)), None)


def check_benchmark(folder: Path, benchmark: dict, manifest: dict) -> None:
    field = differing(manifest["benchmark"], benchmark_digests(benchmark))
    if field:
        raise UserError(f"{folder / BENCHMARK_FILE}: {field} is not what {MANIFEST_FILE} records: edited by hand?")


def entry_of(manifest: dict, record: dict, path: Path) -> dict[str, str]:
    """The manifest's digests of the cell at ``path``."""
    entry = manifest["cells"].get(record["cell_hash"])
    if entry is None:
        raise UserError(f"{path}: a cell {MANIFEST_FILE} does not list: from another folder?")
    return entry


def check_predictions(manifest: dict, record: dict, path: Path) -> None:
    """The predictions the cell records are the ones the manifest binds to its hash."""
    if entry_of(manifest, record, path).get("predictions") != record["predictions"]["sha256"]:
        raise UserError(
            f"{path}: predictions.sha256 is not the one {MANIFEST_FILE} binds to cell "
            f"{record['cell_hash']}: swapped or edited?"
        )


def check_fields(manifest: dict, record: dict, path: Path) -> None:
    """Every field of the record not checked otherwise is the one the manifest records."""
    found = cell_digests(record)
    field = differing({**entry_of(manifest, record, path), "predictions": found["predictions"]}, found)
    if field:
        raise UserError(f"{path}: {field} is not what {MANIFEST_FILE} records for this cell: edited by hand?")


def check_listed(folder: Path, manifest: dict, cell_hashes: set[str]) -> None:
    """Every cell the manifest lists is in the folder (the folder's own cells were checked one by one)."""
    absent = sorted(set(manifest["cells"]) - cell_hashes)
    if absent:
        raise UserError(
            f"{folder / CELLS_DIR / absent[0]}.json: missing ({len(absent)} cell(s) {MANIFEST_FILE} "
            f"lists are not in the folder)"
        )
