"""``python -m benchmarks seal <folder>``: a results folder written before manifests (format 1)
checked with every other check (settings, labels, metrics recomputed from the predictions, the
predictions' bounds) and then sealed: its ``manifest.json`` written and its ``benchmark.json``
marked with this format. The same folder always seals to the same bytes."""

from __future__ import annotations

import os
from pathlib import Path

from benchmarks.results_files.folder import BENCHMARK_FILE, FORMAT, MANIFEST_FILE, ResultSet, read_folder, write_json
from benchmarks.results_files.manifest import write_manifest
from harness.errors import UserError


def seal_folder(folder: Path) -> int:
    """Check and seal ``folder``; returns its number of cells. A sealed folder is left alone."""
    folder = Path(folder)
    if (folder / MANIFEST_FILE).exists() or (folder / MANIFEST_FILE).is_symlink():
        raise UserError(f"{folder / MANIFEST_FILE}: the folder is sealed already")
    benchmark, cells = read_folder(folder, sealed=False)
    staged = folder / f".{BENCHMARK_FILE}.partial"
    try:
        write_json(staged, {**benchmark, "format": FORMAT})
        manifest = write_manifest(folder)  # digests leave out the format: the same before and after
        try:
            os.replace(staged, folder / BENCHMARK_FILE)
        except BaseException:
            manifest.unlink()  # sealed whole or not at all
            raise
    finally:
        staged.unlink(missing_ok=True)
    ResultSet([folder])  # what was sealed reads back, every check passed
    return len(cells)
