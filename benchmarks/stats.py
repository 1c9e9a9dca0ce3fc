"""Aggregation of benchmark runs over seeds and paired significance tests against a control.

Predictions tables follow the project contract: the data set's id columns (MRPC ``id1, id2``, a TSV
data set ``id``), ``label``, probabilities, ``pred``; labels and predictions are compared as text.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.stats import binomtest

METRICS = ["dev_acc", "dev_f1", "test_acc", "test_f1"]
STATISTICS = ["mean", "std", "min", "max"]
PVALUE_COLUMN = "p_value_vs_random"
ID_COLUMNS = ("id1", "id2", "id")  # a predictions table's id columns are those of these it has
_BOOTSTRAP_CHUNK = 1000


def runs_table(search_runs: pd.DataFrame) -> pd.DataFrame:
    """Rename the columns of ``mlflow.search_runs`` output to the plain benchmark names.

    ``tags.method`` -> ``method``, ``tags.seed`` -> ``seed`` (made an integer where every seed
    parses as one), ``metrics.<m>`` -> ``<m>`` for m in ``METRICS``; ``run_id`` is kept when
    present. Columns already in plain form are accepted as they are. Rows without a method (e.g.
    the benchmark's parent run) are dropped. A metric missing altogether becomes a NaN column.

    Returns:
        DataFrame with columns ``[run_id,] method, seed, dev_acc, dev_f1, test_acc, test_f1``.
    """
    renames = {"tags.method": "method", "tags.seed": "seed"}
    renames.update({f"metrics.{metric}": metric for metric in METRICS})
    table = search_runs.rename(columns={raw: plain for raw, plain in renames.items() if raw in search_runs})
    if "method" not in table:
        raise ValueError("runs_table: no 'method' or 'tags.method' column in the runs")
    if "seed" not in table:
        table["seed"] = np.nan
    for metric in METRICS:
        if metric not in table:
            table[metric] = np.nan
    table = table[table["method"].notna()].copy()
    seeds = pd.to_numeric(table["seed"], errors="coerce")
    if len(table) and seeds.notna().all() and (seeds == seeds.round()).all():
        table["seed"] = seeds.astype(int)
    columns = (["run_id"] if "run_id" in table else []) + ["method", "seed"] + METRICS
    table[METRICS] = table[METRICS].astype(float)
    return table[columns].reset_index(drop=True)


def _aggregate_column(values: pd.Series) -> dict[str, float]:
    present = values.dropna().astype(float)
    if present.empty:
        return dict.fromkeys(STATISTICS, float("nan"))
    return {
        "mean": float(present.mean()),
        "std": float(present.std(ddof=1)) if len(present) > 1 else 0.0,
        "min": float(present.min()),
        "max": float(present.max()),
    }


def aggregate_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """Summarise runs per method over seeds.

    Accepts plain columns (``method, seed, dev_acc, ...``) or raw ``mlflow.search_runs`` columns
    (passed through ``runs_table``). Methods keep their first-appearance order in ``runs``.
    ``n_seeds`` counts the method's runs; each statistic uses that metric's non-missing values;
    ``std`` is the sample standard deviation (ddof=1) and 0.0 for a single value.

    Returns:
        DataFrame, one row per method, columns ``method, n_seeds`` then ``<m>_mean, <m>_std,
        <m>_min, <m>_max`` for each m in ``METRICS``.
    """
    runs = runs_table(runs)  # renames raw columns, fills missing metrics, drops method-less rows
    rows = []
    for method, group in runs.groupby("method", sort=False):
        row = {"method": method, "n_seeds": int(len(group))}
        for metric in METRICS:
            for statistic, value in _aggregate_column(group[metric]).items():
                row[f"{metric}_{statistic}"] = value
        rows.append(row)
    columns = ["method", "n_seeds"] + [f"{metric}_{statistic}" for metric in METRICS for statistic in STATISTICS]
    return pd.DataFrame(rows, columns=columns)


def _as_text(values) -> np.ndarray:
    """Labels or predictions as text (numbers as integers first: 1, 1.0 and "1" are one label)."""
    array = np.asarray(values).ravel()
    return (array.astype(int) if array.dtype.kind in "biuf" else array).astype(str)


def _paired_correctness(labels, pred_a, pred_b) -> tuple[np.ndarray, np.ndarray]:
    labels, pred_a, pred_b = (_as_text(values) for values in (labels, pred_a, pred_b))
    if not len(labels) == len(pred_a) == len(pred_b):
        raise ValueError(
            f"paired test: labels ({len(labels)}), pred_a ({len(pred_a)}) and pred_b ({len(pred_b)}) differ in length"
        )
    if len(labels) == 0:
        raise ValueError("paired test: no items to compare")
    return pred_a == labels, pred_b == labels


def paired_bootstrap_pvalue(labels, pred_a, pred_b, n_resamples: int = 10000, seed: int = 0) -> float:
    """Two-sided paired bootstrap test of the accuracy difference (Berg-Kirkpatrick et al. 2012).

    Items are resampled with replacement; the bootstrap differences are shifted to the null of no
    difference (centred on the observed difference d), and the p-value is the share of resamples
    with ``|d* - d| >= |d|``, smoothed as ``(count + 1) / (n_resamples + 1)``. Identical
    correctness on every item gives exactly 1.0.

    Returns:
        p-value in (0, 1].
    """
    correct_a, correct_b = _paired_correctness(labels, pred_a, pred_b)
    differences = correct_a.astype(float) - correct_b.astype(float)  # (N,) in {-1, 0, 1}
    observed = differences.mean()
    if not differences.any():
        return 1.0
    generator = np.random.default_rng(seed)
    extreme = 0
    remaining = n_resamples
    while remaining > 0:
        size = min(_BOOTSTRAP_CHUNK, remaining)
        indices = generator.integers(0, len(differences), size=(size, len(differences)))  # (R, N)
        resampled = differences[indices].mean(axis=1)  # (R,)
        extreme += int(np.sum(np.abs(resampled - observed) >= abs(observed) - 1e-12))
        remaining -= size
    return float((extreme + 1) / (n_resamples + 1))


def mcnemar_pvalue(labels, pred_a, pred_b) -> float:
    """Exact (binomial) two-sided McNemar test on the discordant pairs.

    b = items only A gets right, c = items only B gets right; p = binomtest(b, b + c, 0.5).

    Returns:
        p-value in (0, 1]; 1.0 when there are no discordant pairs.
    """
    correct_a, correct_b = _paired_correctness(labels, pred_a, pred_b)
    only_a = int(np.sum(correct_a & ~correct_b))
    only_b = int(np.sum(~correct_a & correct_b))
    if only_a + only_b == 0:
        return 1.0
    return float(min(1.0, binomtest(only_a, only_a + only_b, 0.5, alternative="two-sided").pvalue))


def is_collapsed(predictions) -> bool:
    """Whether a run predicts a single class for every item (e.g. the majority rate exactly).

    Accepts an array-like of predicted labels or a DataFrame with a ``pred`` column.

    Returns:
        True when all predictions are the same class.
    """
    values = predictions["pred"] if isinstance(predictions, pd.DataFrame) else predictions
    values = np.asarray(values).ravel()
    if values.size == 0:
        raise ValueError("is_collapsed: no predictions")
    return bool(np.unique(values).size == 1)


def _aligned(method_predictions: pd.DataFrame, control_predictions: pd.DataFrame, method: str) -> pd.DataFrame:
    """Join two predictions tables on their id columns; raise ValueError unless they hold the same pairs."""
    keys = [column for column in ID_COLUMNS if column in method_predictions]
    if not keys:
        raise ValueError(f"pvalues_vs_control: the predictions of {method!r} have no id column "
                         f"({', '.join(ID_COLUMNS)})")
    frames = []
    for name, frame in ((method, method_predictions), ("control", control_predictions)):
        frame = frame[keys + ["label", "pred"]].copy()
        frame[keys] = frame[keys].astype(str)
        if frame.duplicated(keys).any():
            raise ValueError(f"pvalues_vs_control: duplicate (id1, id2) pairs in the predictions of {name!r}")
        frames.append(frame)
    merged = frames[0].merge(frames[1], on=keys, how="outer", suffixes=("_method", "_control"), indicator=True)
    if (merged["_merge"] != "both").any() or len(merged) != len(frames[0]) or len(merged) != len(frames[1]):
        raise ValueError(f"pvalues_vs_control: {method!r} and the control were evaluated on different (id1, id2) pairs")
    if (_as_text(merged["label_method"]) != _as_text(merged["label_control"])).any():
        raise ValueError(f"pvalues_vs_control: {method!r} and the control disagree on gold labels")
    return merged


def pvalues_vs_control(
    predictions_by_method: dict[str, Sequence[pd.DataFrame]], control: str, test: str = "mcnemar"
) -> dict[str, float]:
    """Paired significance of each method against the control on the same (test) items.

    Seeds are paired by index: seed i of a method against seed i of the control, for every i
    where both exist; each pair is aligned on (id1, id2) and tested on its own (``test`` is
    ``"mcnemar"`` for the exact McNemar test or ``"bootstrap"`` for the paired bootstrap). The
    reported value is the median of those per-seed p-values: the significance of a typical seed
    pair. (Concatenating seeds into one test would treat the same item as independent evidence
    several times and overstate significance.) With a single seed it is the plain test.

    Returns:
        ``{method: p-value}``; NaN for the control itself and for a method with no matched seed.
        Raises ValueError if paired tables hold different (id1, id2) pairs or labels.
    """
    tests = {"mcnemar": mcnemar_pvalue, "bootstrap": paired_bootstrap_pvalue}
    if test not in tests:
        raise ValueError(f"pvalues_vs_control: test must be one of {sorted(tests)}, got {test!r}")
    if control not in predictions_by_method:
        raise ValueError(f"pvalues_vs_control: control {control!r} has no predictions")
    control_runs = list(predictions_by_method[control])
    pvalues = {}
    for method, method_runs in predictions_by_method.items():
        if method == control:
            pvalues[method] = float("nan")
            continue
        seed_pvalues = []
        for method_predictions, control_predictions in zip(method_runs, control_runs):
            merged = _aligned(method_predictions, control_predictions, method)
            seed_pvalues.append(
                tests[test](merged["label_method"], merged["pred_method"], merged["pred_control"])
            )
        pvalues[method] = float(np.median(seed_pvalues)) if seed_pvalues else float("nan")
    return pvalues


def results_table(runs: pd.DataFrame, pvalues: dict[str, float]) -> pd.DataFrame:
    """The benchmark's ``results.csv``: per-method aggregates plus the p-value against the control.

    Returns:
        DataFrame with columns ``method, n_seeds, {dev,test}_{acc,f1}_{mean,std,min,max},
        p_value_vs_random`` (NaN where a method has no p-value).
    """
    table = aggregate_runs(runs)
    table[PVALUE_COLUMN] = [float(pvalues.get(method, float("nan"))) for method in table["method"]]
    return table
