"""``python -m benchmarks seal [--again] <folder>``: a results folder checked with every check but
the manifest's (settings, labels, metrics recomputed from the predictions, the predictions' bounds,
one run id and one slot a cell, the arms' gold labels) and then sealed: its ``manifest.json``
written, recording the commit that sealed and the manifest it replaced
(``benchmarks.results_files.seal_chain``), and its ``benchmark.json`` marked with this format.
A folder written before manifests (format 1) is sealed; a sealed one only with ``--again``, and the
re-seal stays visible in its chain. The same folder at the same commit always seals to the same
bytes."""

from __future__ import annotations

from pathlib import Path

from benchmarks.results_files.folder import BENCHMARK_FILE, FORMAT, MANIFEST_FILE, ResultSet, read_folder, write_json
from benchmarks.results_files.manifest import write_manifest
from benchmarks.results_files.seal_chain import next_seals
from harness.atomic import atomic_write
from harness.errors import UserError


def seal_folder(folder: Path, again: bool = False) -> int:
    """Check and seal ``folder``; returns its number of cells. A sealed folder is left alone unless
    ``again``: then its new manifest chains the old one."""
    folder = Path(folder)
    manifest_path = folder / MANIFEST_FILE
    if manifest_path.is_symlink():
        raise UserError(f"{manifest_path}: a link; a results folder holds its files themselves")
    if manifest_path.exists() and not again:
        raise UserError(
            f"{manifest_path}: the folder is sealed already (re-seal it with `seal --again`: the new "
            f"seal records the manifest it replaces)"
        )
    benchmark, cells = read_folder(folder, sealed=False)
    seals = next_seals(folder)
    before = {path: path.read_bytes() if path.is_file() else None for path in (manifest_path, folder / BENCHMARK_FILE)}

    def write(staged: Path) -> None:
        write_json(staged, {**benchmark, "format": FORMAT})
        write_manifest(folder, seals)  # digests leave out the format: the same before and after

    try:
        atomic_write(folder / BENCHMARK_FILE, write)
        ResultSet([folder])  # what was sealed reads back, every check passed (those across cells too)
    except BaseException:
        for path, content in before.items():  # sealed whole or not at all
            if content is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(content)
        raise
    return len(cells)
