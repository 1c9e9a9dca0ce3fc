"""One gold label a pair across the cells read together: every cell of one data set digest saw the
same labels, so two arms (or two folders) that disagree on a pair's label are an edited or mixed-up
predictions file. Named in one line, naming both files, before anything compares them (a paired
test over items would otherwise fail deep in the statistics, or pair other labels silently)."""

from __future__ import annotations

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

    def add(self, cell: Cell, predictions: dict[str, pd.DataFrame]) -> None:
        for split in SPLITS:
            frame = predictions[split]
            found = pd.Series(frame["label"].astype(str).to_numpy(), index=pair_keys(frame))
            found = found[~found.index.duplicated()]
            key = (cell.record["data_digest"], split)
            known = self.labels.get(key)
            if known is None:
                self.labels[key], self.first[key] = found, cell
                continue
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
