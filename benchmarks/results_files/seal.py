"""``python -m benchmarks seal <folder>``: a results folder written before manifests (format 1)
checked with every other check (settings, labels, metrics recomputed from the predictions, the
predictions' bounds) and then sealed: its ``manifest.json`` written and its ``benchmark.json``
marked with this format. The same folder always seals to the same bytes."""

from __future__ import annotations

from pathlib import Path

from benchmarks.results_files.folder import BENCHMARK_FILE, FORMAT, MANIFEST_FILE, ResultSet, read_folder, write_json
from benchmarks.results_files.manifest import write_manifest
from harness.atomic import atomic_write
from harness.errors import UserError


def seal_folder(folder: Path) -> int:
    """Check and seal ``folder``; returns its number of cells. A sealed folder is left alone."""
    folder = Path(folder)
    if (folder / MANIFEST_FILE).exists() or (folder / MANIFEST_FILE).is_symlink():
        raise UserError(f"{folder / MANIFEST_FILE}: the folder is sealed already")
    benchmark, cells = read_folder(folder, sealed=False)
    manifest = None

    def write(staged: Path) -> None:
        nonlocal manifest
        write_json(staged, {**benchmark, "format": FORMAT})
        manifest = write_manifest(folder)  # digests leave out the format: the same before and after

    try:
        atomic_write(folder / BENCHMARK_FILE, write)
    except BaseException:
        if manifest is not None:
            manifest.unlink(missing_ok=True)  # sealed whole or not at all
        raise
    ResultSet([folder])  # what was sealed reads back, every check passed
    return len(cells)
