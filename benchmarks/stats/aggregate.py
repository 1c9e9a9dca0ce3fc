"""Per-method aggregates of benchmark runs over seeds (mean, std, min, max of each metric) and the
collapse check of one run."""

from __future__ import annotations

import numpy as np
import pandas as pd

METRICS = ["dev_acc", "dev_f1", "test_acc", "test_f1"]
STATISTICS = ["mean", "std", "min", "max"]


def runs_table(search_runs: pd.DataFrame) -> pd.DataFrame:
    """Rename ``mlflow.search_runs`` columns to plain names (``tags.method`` -> ``method``,
    ``tags.seed`` -> ``seed``, an integer where every seed parses as one, ``metrics.<m>`` -> ``<m>``).
    Plain columns are accepted as they are; rows without a method (the parent run) are dropped;
    a metric missing altogether becomes a NaN column.

    Returns:
        DataFrame with columns ``[run_id,] method, seed, dev_acc, dev_f1, test_acc, test_f1``.
    """
    renames = {"tags.method": "method", "tags.seed": "seed"} | {f"metrics.{metric}": metric for metric in METRICS}
    table = search_runs.rename(columns={raw: plain for raw, plain in renames.items() if raw in search_runs})
    if "method" not in table:
        raise ValueError("runs_table: no 'method' or 'tags.method' column in the runs")
    for column in ["seed", *METRICS]:
        if column not in table:
            table[column] = np.nan
    table = table[table["method"].notna()].copy()
    seeds = pd.to_numeric(table["seed"], errors="coerce")
    if len(table) and seeds.notna().all() and (seeds == seeds.round()).all():
        table["seed"] = seeds.astype(int)
    table[METRICS] = table[METRICS].astype(float)
    columns = (["run_id"] if "run_id" in table else []) + ["method", "seed"] + METRICS
    return table[columns].reset_index(drop=True)


def aggregate_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Summarise runs per method over seeds (plain or raw ``mlflow.search_runs`` columns).

    Methods keep their first-appearance order; ``n_seeds`` counts the method's runs; each statistic
    uses that metric's non-missing values; ``std`` is the sample std (ddof=1), 0.0 for one value.

    Returns:
        DataFrame, one row per method: ``method, n_seeds, <m>_{mean,std,min,max}`` for m in METRICS.
    """
    runs = runs_table(runs)
    rows = []
    for method, group in runs.groupby("method", sort=False):
        row = {"method": method, "n_seeds": int(len(group))}
        for metric in METRICS:
            values = group[metric].dropna()
            row |= {
                f"{metric}_mean": values.mean(),
                f"{metric}_min": values.min(),
                f"{metric}_max": values.max(),
                f"{metric}_std": values.std(ddof=1) if len(values) > 1 else 0.0 if len(values) else np.nan,
            }
        rows.append(row)
    columns = ["method", "n_seeds"] + [f"{metric}_{statistic}" for metric in METRICS for statistic in STATISTICS]
    return pd.DataFrame(rows, columns=columns).astype({column: float for column in columns[2:]})


def is_collapsed(predictions) -> bool:
    """Whether a run predicts one class for every item (array of predictions or a ``pred`` column)."""
    values = np.asarray(predictions["pred"] if isinstance(predictions, pd.DataFrame) else predictions).ravel()
    if values.size == 0:
        raise ValueError("is_collapsed: no predictions")
    return bool(np.unique(values).size == 1)
