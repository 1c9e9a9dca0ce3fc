"""Cells unique across the folders a report or an import reads: one run id is one cell, and one
slot of a study (data set, method, kind, seed, labelled fraction, encoder identity) is one cell.

A folder added beside a study's own could otherwise change an untouched folder's numbers: a cell
reusing another's run id under another hash would replace its predictions, and the same method and
seed under another hash (one harmless extra flag in its settings) would count as a second seed.
Cells sharing a hash (probes and baselines that several chunks ran, replicates of one stage) are one
cell and stay allowed. Each refusal is one line naming both folders and files."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from harness.errors import UserError


class Cell(Protocol):  # benchmarks.results_files.folder.CellResult
    path: Path
    record: dict

    @property
    def cell_hash(self) -> str: ...


def slot(record: dict) -> tuple:
    """What a cell stands for in a study: one result of a method at a seed and fraction, over one
    encoder identity, on one data set."""
    fields = record["cell"]
    return (
        record["data_digest"],
        fields["method"],
        fields["kind"],
        fields["seed"],
        float(fields["train_fraction"]),
        fields["encoder_identity"],
    )


def where(cell: Cell) -> str:
    return f"{cell.path.parent.parent.name}/{cell.path.parent.name}/{cell.path.name}"


class CellIndex:
    """The cells seen so far, by run id and by slot; :meth:`add` refuses a second cell of either."""

    def __init__(self) -> None:
        self.by_run: dict[str, Cell] = {}
        self.by_slot: dict[tuple, Cell] = {}

    def add(self, cell: Cell) -> None:
        run_id = cell.record["run"]["run_id"]
        first = self.by_run.setdefault(run_id, cell)
        if first.cell_hash != cell.cell_hash:
            raise UserError(
                f"{where(cell)} and {where(first)}: one run id {run_id[:40]} under two cell hashes "
                f"({cell.cell_hash[:12]}, {first.cell_hash[:12]}): a copied or forged cell; nothing is used"
            )
        key = slot(cell.record)
        first = self.by_slot.setdefault(key, cell)
        if first.cell_hash != cell.cell_hash:
            fields = cell.record["cell"]
            raise UserError(
                f"{where(cell)} and {where(first)}: two cells ({cell.cell_hash[:12]}, "
                f"{first.cell_hash[:12]}) claim {fields['method'][:80]!r} ({fields['kind']}) seed "
                f"{fields['seed']} at fraction {float(fields['train_fraction']):g}: another seed or "
                f"setting under the same name; nothing is used"
            )


def check_unique(cells) -> None:
    """Refuse two cells among ``cells`` that share a run id or a slot under different hashes."""
    index = CellIndex()
    for cell in cells:
        index.add(cell)
