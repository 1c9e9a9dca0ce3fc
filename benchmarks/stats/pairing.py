"""Items of two sets of runs matched for a paired test: runs paired by seed value, test items by
their id columns, correctness ``pred == label`` per item for any number of classes."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

VALUE_COLUMNS = {"label", "pred", "prob", "sentence1", "sentence2"}  # and prob_<label>: the rest are ids
ID_COLUMNS = ("id1", "id2", "id")  # the id columns the data sets write (MRPC: id1, id2; a TSV: id)


def id_columns(predictions: pd.DataFrame) -> list[str]:
    """The columns that identify an item: all but ``label``, ``pred``, ``prob`` and ``prob_<label>``."""
    return [
        column for column in predictions.columns if column not in VALUE_COLUMNS and not str(column).startswith("prob_")
    ]


def correctness(predictions: pd.DataFrame) -> np.ndarray:
    """``pred == label`` per item, for any number of classes (numbers compared as numbers).

    Returns:
        (N,) bool array.
    """
    labels, preds = _class_values(predictions["label"], predictions["pred"])
    return (labels == preds).to_numpy()


def _class_values(*columns: pd.Series) -> list[pd.Series]:
    """Class columns made comparable: numbers when every value parses as one (1 == 1.0 == "1"), else text."""
    numeric = [pd.to_numeric(column, errors="coerce") for column in columns]
    if all(column.notna().all() for column in numeric):
        return [column.astype(float) for column in numeric]
    return [column.astype(str).str.strip() for column in columns]


def _items(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """A predictions table indexed by its id columns (as strings), with ``correct`` and ``label``."""
    keys = id_columns(frame)
    if not keys or not {"label", "pred"} <= set(frame.columns):
        raise ValueError(f"{name}: predictions need id column(s), label and pred; got {list(frame.columns)}")
    (label,) = _class_values(frame["label"])
    table = frame[keys].astype(str).assign(label=label.to_numpy(), correct=correctness(frame))
    table = table.set_index(keys)
    if table.index.duplicated().any():
        raise ValueError(f"{name}: duplicate ids {keys} in the predictions")
    return table


def paired_correctness(method_runs: Mapping, twin_runs: Mapping, method: str = "method"):
    """Pair runs by seed *value* (seeds both have) and align their items on the id columns.

    Args:
        method_runs, twin_runs: ``{seed: predictions DataFrame}``.

    Returns:
        ``(seeds, correct_method, correct_twin)``: the sorted common seeds and two (S, N) bool arrays,
        items in the order of the method's first common seed. Raises ValueError when paired runs hold
        other items, other id columns or other gold labels.
    """
    seeds = sorted(set(method_runs) & set(twin_runs))
    if not seeds:
        return [], np.zeros((0, 0), bool), np.zeros((0, 0), bool)
    reference = _items(method_runs[seeds[0]], f"{method} seed {seeds[0]}")
    matrices = {"method": [], "twin": []}
    for seed in seeds:
        for side, runs in (("method", method_runs), ("twin", twin_runs)):
            table = _items(runs[seed], f"{method} ({side}) seed {seed}")
            if (
                table.index.names != reference.index.names
                or len(table) != len(reference)
                or not table.index.isin(reference.index).all()
            ):
                raise ValueError(f"{method}: {side} seed {seed} was evaluated on other items than seed {seeds[0]}")
            table = table.reindex(reference.index)
            if (table["label"] != reference["label"]).any():
                raise ValueError(f"{method}: {side} seed {seed} disagrees on gold labels")
            matrices[side].append(table["correct"].to_numpy())
    return seeds, np.stack(matrices["method"]), np.stack(matrices["twin"])  # (S, N) each


def same_items(first: pd.DataFrame, second: pd.DataFrame) -> bool:
    """Whether two predictions tables hold the same items (same id columns, same ids in any order)."""
    first_items, second_items = _items(first, "first"), _items(second, "second")
    return (
        first_items.index.names == second_items.index.names
        and len(first_items) == len(second_items)
        and bool(first_items.index.isin(second_items.index).all())
    )
