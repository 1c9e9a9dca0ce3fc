"""Copies of one cell in a tracking store: the FINISHED runs that carry one cell hash. A cell's
numbers are decided by its hash, so two copies with other numbers are a conflict that no reader
may settle by picking one (the newer start time, say): the import refuses to add one
(``benchmarks.results_files.store_transfer``), the suite refuses to reuse either
(``benchmarks.tasks.reuse.finished_run``), and ``python -m benchmarks duplicates`` names them, and
with ``--remove`` deletes the redundant copies (keeping, of copies that conflict, only a run this
store computed itself)."""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass

from mlflow.tracking import MlflowClient

from benchmarks.report.cells_from_store import read_predictions
from benchmarks.results_files.folder import SPLITS, predictions_bytes
from benchmarks.tasks.reuse import conflicting, headline
from harness.tracking.runs import tracking_uri

IMPORTED_TAG = "imported_from"  # a run that ``python -m benchmarks import`` wrote (the folder it came from)
SEARCH_LIMIT = 50_000


def held_copies(client: MlflowClient, experiment: str, cell_hash: str) -> list:
    """Every FINISHED run of ``experiment`` (where a suite looks for it) tagged with ``cell_hash``, oldest first."""
    found = client.get_experiment_by_name(experiment)
    if found is None or found.lifecycle_stage != "active":
        return []
    return client.search_runs(
        [found.experiment_id],
        f"tags.cell_hash = '{cell_hash}' and attributes.status = 'FINISHED'",
        order_by=["attributes.start_time ASC"],
        max_results=SEARCH_LIMIT,
    )


def predictions_digest(client: MlflowClient, run) -> str:
    """The sha256 a results folder would record for ``run``'s predictions (its file's digest)."""
    with tempfile.TemporaryDirectory() as scratch:
        frames = {
            split: read_predictions(client.download_artifacts(run.info.run_id, f"predictions/{split}.csv", scratch))
            for split in SPLITS
        }
        return hashlib.sha256(predictions_bytes(frames)).hexdigest()


@dataclass
class Duplicate:
    """The copies of one cell hash a store holds (two or more)."""

    cell_hash: str
    runs: list

    @property
    def conflicting(self) -> bool:
        return conflicting(self.runs)

    def keep(self):
        """The copy to keep: of equal copies the first computed here (else the oldest); of conflicting
        ones the single copy computed here, None when that does not decide (resolve by hand)."""
        computed = [run for run in self.runs if IMPORTED_TAG not in run.data.tags]
        if self.conflicting:
            return computed[0] if len(computed) == 1 else None
        return (computed or self.runs)[0]

    def describe(self) -> str:
        """One line: the cell, whether its copies agree, and each copy's run, origin and test accuracy."""
        kind = "other numbers" if self.conflicting else "the same numbers"
        copies = ", ".join(f"{run.info.run_id} ({origin(run)}, {headline(run.data.metrics)})" for run in self.runs)
        return (
            f"cell {self.cell_hash} ({self.runs[0].data.tags.get('method', '?')}): {len(self.runs)} copies "
            f"with {kind}: {copies}"
        )


def origin(run) -> str:
    """Where a copy came from: imported from a folder, or computed in this store."""
    folder = run.data.tags.get(IMPORTED_TAG)
    return f"imported from {folder}" if folder else "computed here"


def find_duplicates(client: MlflowClient) -> list[Duplicate]:
    """Every cell hash that more than one FINISHED run of one experiment carries (a suite looks
    for a cell in its own experiment)."""
    experiments = [experiment.experiment_id for experiment in client.search_experiments()]
    runs = (
        client.search_runs(
            experiments,
            "attributes.status = 'FINISHED'",
            order_by=["attributes.start_time ASC"],
            max_results=SEARCH_LIMIT,
        )
        if experiments
        else []
    )
    by_hash: dict[tuple[str, str], list] = {}
    for run in runs:
        if run.data.tags.get("cell_hash"):
            by_hash.setdefault((run.info.experiment_id, run.data.tags["cell_hash"]), []).append(run)
    return [Duplicate(cell_hash, copies) for (_, cell_hash), copies in by_hash.items() if len(copies) > 1]


def remove_duplicates(client: MlflowClient, duplicates: list[Duplicate]) -> tuple[list[str], list[Duplicate]]:
    """Delete every copy but the one :meth:`Duplicate.keep` names, and an imported benchmark parent
    left without cells; returns the deleted run ids and the duplicates left to resolve by hand."""
    deleted, unresolved, parents = [], [], set()
    for duplicate in duplicates:
        kept = duplicate.keep()
        if kept is None:
            unresolved.append(duplicate)
            continue
        for run in duplicate.runs:
            if run.info.run_id != kept.info.run_id:
                client.delete_run(run.info.run_id)
                deleted.append(run.info.run_id)
                parents.add((run.info.experiment_id, run.data.tags.get("mlflow.parentRunId", "")))
    for experiment_id, parent in sorted(parents):
        if not parent:
            continue
        left = client.search_runs([experiment_id], f"tags.mlflow.parentRunId = '{parent}'", max_results=1)
        if not left and IMPORTED_TAG in client.get_run(parent).data.tags:
            client.delete_run(parent)
            deleted.append(parent)
    return deleted, unresolved


def report_duplicates(remove: bool) -> int:
    """``python -m benchmarks duplicates [--remove]``: a line per duplicated cell of the store in use;
    returns the exit status (1 while conflicting copies are left, else 0)."""
    client = MlflowClient(tracking_uri())
    duplicates = find_duplicates(client)
    for duplicate in duplicates:
        print(duplicate.describe())
    if not duplicates:
        print(f"no cell is held twice in {tracking_uri()}")
        return 0
    if not remove:
        print(
            f"{len(duplicates)} cell(s) held more than once; `python -m benchmarks duplicates --remove` deletes "
            f"the redundant copies"
        )
        return 1 if any(duplicate.conflicting for duplicate in duplicates) else 0
    deleted, unresolved = remove_duplicates(client, duplicates)
    print(f"deleted {len(deleted)} run(s) in {tracking_uri()}")
    for duplicate in unresolved:
        print(
            f"left: {duplicate.describe()}: none of them was computed in this store alone; delete the wrong "
            f"one by hand (mlflow runs delete --run-id <id>)"
        )
    return 1 if unresolved else 0
