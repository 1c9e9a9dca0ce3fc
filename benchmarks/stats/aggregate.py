"""Per-method aggregates of benchmark runs over seeds (mean, std, min, max of each metric the task
logs) and the collapse check of one run.

A method's score is the mean over its seeds of each run's metric: accuracy, or for a graded task the
per-seed test correlation (Pearson's and Spearman's, both always reported).

A run *collapses* when its test predictions carry no ranking of the items: one class for every item
(classes), or for a graded task predictions whose standard deviation is below ``COLLAPSE_TOLERANCE``
of the task's score range, or not all finite (its correlation is undefined or meaningless).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from harness.datasets.task import CLASSES, Task

METRICS = CLASSES.run_metrics()  # a task of classes (MRPC): dev_acc, dev_f1, test_acc, test_f1
STATISTICS = ["mean", "std", "min", "max"]
COLLAPSE_TOLERANCE = 1e-6  # a graded run whose predictions' SD is below this share of the range is constant


def runs_table(search_runs: pd.DataFrame, task: Task = CLASSES) -> pd.DataFrame:
    """Rename ``mlflow.search_runs`` columns to plain names (``tags.method`` -> ``method``,
    ``tags.seed`` -> ``seed``, an integer where every seed parses as one, ``metrics.<m>`` -> ``<m>``).
    Plain columns are accepted as they are; rows without a method (the parent run) are dropped;
    a metric missing altogether becomes a NaN column.

    Returns:
        DataFrame with columns ``[run_id,] method, seed`` and the task's run metrics (``dev_acc, dev_f1,
        test_acc, test_f1`` for classes; ``dev_pearson, dev_spearman, test_…`` for a graded task).
    """
    metrics = task.run_metrics()
    renames = {"tags.method": "method", "tags.seed": "seed"} | {f"metrics.{metric}": metric for metric in metrics}
    table = search_runs.rename(columns={raw: plain for raw, plain in renames.items() if raw in search_runs})
    if "method" not in table:
        raise ValueError("runs_table: no 'method' or 'tags.method' column in the runs")
    for column in ["seed", *metrics]:
        if column not in table:
            table[column] = np.nan
    table = table[table["method"].notna()].copy()
    seeds = pd.to_numeric(table["seed"], errors="coerce")
    if len(table) and seeds.notna().all() and (seeds == seeds.round()).all():
        table["seed"] = seeds.astype(int)
    table[metrics] = table[metrics].astype(float)
    columns = (["run_id"] if "run_id" in table else []) + ["method", "seed"] + metrics
    return table[columns].reset_index(drop=True)


def aggregate_runs(runs: pd.DataFrame, task: Task = CLASSES) -> pd.DataFrame:
    """Summarise runs per method over seeds (plain or raw ``mlflow.search_runs`` columns).

    Methods keep their first-appearance order; ``n_seeds`` counts the method's runs; each statistic
    uses that metric's non-missing values; ``std`` is the sample std (ddof=1), 0.0 for one value.

    Returns:
        DataFrame, one row per method: ``method, n_seeds, <m>_{mean,std,min,max}`` for m in the task's
        run metrics (``task.run_metrics()``).
    """
    metrics = task.run_metrics()
    runs = runs_table(runs, task)
    rows = []
    for method, group in runs.groupby("method", sort=False):
        row = {"method": method, "n_seeds": int(len(group))}
        for metric in metrics:
            values = group[metric].dropna()
            row |= {
                f"{metric}_mean": values.mean(),
                f"{metric}_min": values.min(),
                f"{metric}_max": values.max(),
                f"{metric}_std": values.std(ddof=1) if len(values) > 1 else 0.0 if len(values) else np.nan,
            }
        rows.append(row)
    columns = ["method", "n_seeds"] + [f"{metric}_{statistic}" for metric in metrics for statistic in STATISTICS]
    return pd.DataFrame(rows, columns=columns).astype({column: float for column in columns[2:]})


def _one_class(values: np.ndarray, task: Task) -> bool:
    return bool(np.unique(values).size == 1)


def _near_constant(values: np.ndarray, task: Task) -> bool:
    values = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(dtype=float)
    low, high = task.score_range
    return bool(not np.isfinite(values).all() or values.std() < COLLAPSE_TOLERANCE * (high - low))


COLLAPSE: dict[str, Callable[[np.ndarray, Task], bool]] = {"classes": _one_class, "graded": _near_constant}


def is_collapsed(predictions, task: Task = CLASSES) -> bool:
    """Whether a run's predictions (an array or a ``pred`` column) collapsed: one class for every item,
    or for a graded task (near) constant scores (``COLLAPSE_TOLERANCE``) or any that is not finite."""
    values = np.asarray(predictions["pred"] if isinstance(predictions, pd.DataFrame) else predictions).ravel()
    if values.size == 0:
        raise ValueError("is_collapsed: no predictions")
    return COLLAPSE[task.target](values, task)
