"""One gold label a pair across the cells read together: every cell of one data set digest saw the
same labels, so two arms (or two folders) that disagree on a pair's label are an edited or mixed-up
predictions file. Named in one line, naming both files, before anything compares them (a paired
test over items would otherwise fail deep in the statistics, or pair other labels silently)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.results_files.predictions_file import SPLITS
from benchmarks.results_files.unique_cells import Cell, where
from benchmarks.stats.pairing import ID_COLUMNS
from harness.errors import UserError


def pair_keys(frame: pd.DataFrame) -> pd.Index:
    """Each row's pair, as one text key of its id columns."""
    columns = [frame[column].astype(str) for column in ID_COLUMNS if column in frame]
    if not columns:
        return pd.Index(frame.index.astype(str))
    keys = columns[0]
    for column in columns[1:]:
        keys = keys + "\t" + column
    return pd.Index(keys)


class GoldLabels:
    """The labels seen so far, per data set digest and split, and the cell that first gave each."""

    def __init__(self) -> None:
        self.labels: dict[tuple[str, str], pd.Series] = {}
        self.first: dict[tuple[str, str], Cell] = {}
        self.rows: dict[tuple[str, str], tuple[list[np.ndarray], np.ndarray]] = {}  # the first cell's, as arrays

    def add(self, cell: Cell, predictions: dict[str, pd.DataFrame]) -> None:
        for split in SPLITS:
            frame, key = predictions[split], (cell.record["data_digest"], split)
            ids = [frame[column].to_numpy() for column in ID_COLUMNS if column in frame]
            labels = frame["label"].astype(str).to_numpy()
            if key not in self.rows:
                self.rows[key], self.first[key] = (ids, labels), cell
                self.labels[key] = pd.Series(labels, index=pair_keys(frame))
                continue
            first_ids, first_labels = self.rows[key]
            same_rows = len(labels) == len(first_labels) and all(map(np.array_equal, ids, first_ids))
            if same_rows and np.array_equal(labels, first_labels):
                continue  # the same pairs in the same order with the same labels: most cells
            self.compare(cell, split, key, pd.Series(labels, index=pair_keys(frame)))

    def compare(self, cell: Cell, split: str, key: tuple[str, str], found: pd.Series) -> None:
        """``found`` (labels by pair) against every label seen for ``key``; new pairs are added."""
        found = found[~found.index.duplicated()]
        known = self.labels[key]
        expected = known.reindex(found.index)
        differ = expected.notna() & (expected != found)
        if differ.any():
            pair = differ.idxmax()
            raise UserError(
                f"{where(cell)} and {where(self.first[key])}: {split} pair {pair.replace(chr(9), ' ')!r} "
                f"is labelled {found[pair]!r} in one and {expected[pair]!r} in the other ({int(differ.sum())} "
                f"pair(s) differ): the arms disagree on the gold labels; nothing is used"
            )
        new = found[~found.index.isin(known.index)]
        if len(new):
            self.labels[key] = pd.concat([known, new])
