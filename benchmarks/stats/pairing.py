"""Items of two sets of runs matched for a paired test: runs paired by seed value, test items by
their id columns, and each item's score as the task defines it (:data:`ITEM_SCORES`, keyed by
``Task.target``): correctness ``pred == label`` (0/1) for classes, for any number of them; for a
graded task the item's share of the run's correlation with the gold scores (``stats.jackknife``:
its pseudo-value, centred so the mean over items is the run's correlation)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd

from benchmarks.stats import jackknife
from harness.datasets.task import CLASSES, Task

VALUE_COLUMNS = {"label", "pred", "prob", "sentence1", "sentence2"}  # and prob_<label>: the rest are ids
ID_COLUMNS = ("id1", "id2", "genre", "file", "year", "id")  # MRPC: id1, id2; STS-B: genre, file, year, id; a TSV: id


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


def correlation_scores(predictions: pd.DataFrame, metric: str = "pearson") -> np.ndarray:
    """Each item's centred jackknife pseudo-value of the run's ``metric`` (``pearson``/``spearman``)
    between ``pred`` and the gold ``label``; their mean is the correlation (NaN where undefined).

    Returns:
        (N,) float array.
    """
    try:
        gold = pd.to_numeric(predictions["label"], errors="raise").to_numpy(dtype=float)
        predicted = pd.to_numeric(predictions["pred"], errors="raise").to_numpy(dtype=float)
    except (TypeError, ValueError) as error:
        raise ValueError(f"graded predictions need numbers in label and pred: {error}") from None
    return jackknife.item_scores(predicted, gold, metric)


ITEM_SCORES: dict[str, Callable[[pd.DataFrame, str], np.ndarray]] = {
    "classes": lambda predictions, metric: correctness(predictions).astype(float),
    "graded": correlation_scores,
}


def item_scores(predictions: pd.DataFrame, task: Task = CLASSES, metric: str | None = None) -> np.ndarray:
    """The per-item score every gap test pairs on, as ``task`` defines it; its mean over items is the
    run's ``metric`` (default the task's main one): accuracy from correctness, or a correlation.

    Returns:
        (N,) float array.
    """
    return ITEM_SCORES[task.target](predictions, paired_metric(task, metric))


def paired_metric(task: Task, metric: str | None = None) -> str:
    """The metric a gap of ``task`` pairs on: ``metric`` (the task's main one by default), checked."""
    metric = metric or task.main_metric
    pairable = task.metrics if task.target == "graded" else (task.main_metric,)  # correctness is accuracy's
    if metric not in pairable:
        raise ValueError(f"a gap of this {task.target} task pairs on {' or '.join(pairable)}, not {metric!r}")
    return metric


def _class_values(*columns: pd.Series) -> list[pd.Series]:
    """Class columns made comparable: numbers when every value parses as one (1 == 1.0 == "1"), else text."""
    numeric = [pd.to_numeric(column, errors="coerce") for column in columns]
    if all(column.notna().all() for column in numeric):
        return [column.astype(float) for column in numeric]
    return [column.astype(str).str.strip() for column in columns]


def _items(frame: pd.DataFrame, name: str, score=None) -> pd.DataFrame:
    """A predictions table indexed by its id columns (as strings), with ``correct`` (or ``score``'s
    per-item values, a function of the table) and ``label``."""
    keys = id_columns(frame)
    if not keys or not {"label", "pred"} <= set(frame.columns):
        raise ValueError(f"{name}: predictions need id column(s), label and pred; got {list(frame.columns)}")
    (label,) = _class_values(frame["label"])
    table = frame[keys].astype(str).assign(label=label.to_numpy(), correct=(score or correctness)(frame))
    table = table.set_index(keys)
    if table.index.duplicated().any():
        raise ValueError(f"{name}: duplicate ids {keys} in the predictions")
    return table


def paired_correctness(method_runs: Mapping, twin_runs: Mapping, method: str = "method", score=None):
    """Pair runs by seed *value* (seeds both have) and align their items on the id columns.

    Args:
        method_runs, twin_runs: ``{seed: predictions DataFrame}``.
        score: the per-item score of a table, (N,) (default: correctness).

    Returns:
        ``(seeds, correct_method, correct_twin)``: the sorted common seeds and two (S, N) bool arrays
        (of ``score``'s values where given), items in the order of the method's first common seed.
        Raises ValueError when paired runs hold other items, other id columns or other gold labels.
    """
    seeds = sorted(set(method_runs) & set(twin_runs))
    if not seeds:
        return [], np.zeros((0, 0), bool), np.zeros((0, 0), bool)
    reference = _items(method_runs[seeds[0]], f"{method} seed {seeds[0]}", score)
    matrices = {"method": [], "twin": []}
    for seed in seeds:
        for side, runs in (("method", method_runs), ("twin", twin_runs)):
            table = _items(runs[seed], f"{method} ({side}) seed {seed}", score)
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


def paired_scores(
    method_runs: Mapping, twin_runs: Mapping, method: str = "method", task: Task = CLASSES, metric: str | None = None
):
    """``paired_correctness`` on the task's per-item scores (:func:`item_scores`).

    Returns:
        ``(seeds, scores_method, scores_twin)``: the sorted common seeds and two (S, N) float arrays.
    """
    metric = paired_metric(task, metric)
    seeds, first, second = paired_correctness(
        method_runs, twin_runs, method, lambda frame: item_scores(frame, task, metric)
    )
    return seeds, first.astype(float), second.astype(float)


def same_items(first: pd.DataFrame, second: pd.DataFrame) -> bool:
    """Whether two predictions tables hold the same items (same id columns, same ids in any order)."""
    first_items, second_items = _items(first, "first"), _items(second, "second")
    return (
        first_items.index.names == second_items.index.names
        and len(first_items) == len(second_items)
        and bool(first_items.index.isin(second_items.index).all())
    )
