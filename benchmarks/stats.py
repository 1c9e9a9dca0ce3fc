"""Aggregation of benchmark runs over seeds, and the accuracy gap of a method over its random twin.

The gap is tested as a crossed design: training seeds and test items are both random samples
(Clark 1973, "language-as-fixed-effect fallacy"). For S seed pairs (method seed s against twin
seed s) and N test items, ``d[s, i] = correct_method[s, i] - correct_twin[s, i]`` is decomposed as
``mu + seed_s + item_i + residual_si`` with random seed and item effects; the gap is ``mean(d)``,
its variance ``(MS_seed + MS_item - MS_residual) / (S N)`` (a negative item component set to 0),
Satterthwaite degrees of freedom, and a t-based 95% CI and two-sided p-value. With one seed pair
the seed part is not estimable and the test falls back to a paired t-test over items.
Calibration (null rejection, CI coverage, power at the MDE) is checked by simulation in
``tests/benchmarks/test_stats.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats

METRICS = ["dev_acc", "dev_f1", "test_acc", "test_f1"]
STATISTICS = ["mean", "std", "min", "max"]
PVALUE_COLUMN = "p_value_vs_random"
GAP_COLUMNS = ["gap_vs_random", "gap_ci_low", "gap_ci_high", "mde_vs_random", "paired_seeds", "paired_items",
               "gap_test"]
CROSSED, ITEMS_ONLY = "seeds x items", "items only (1 seed)"
VALUE_COLUMNS = {"label", "pred", "prob", "sentence1", "sentence2"}  # and prob_<label>: the rest are ids
ID_COLUMNS = ("id1", "id2", "id")  # the id columns the data sets write (MRPC: id1, id2; a TSV: id)


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
            row |= {f"{metric}_mean": values.mean(), f"{metric}_min": values.min(), f"{metric}_max": values.max(),
                    f"{metric}_std": values.std(ddof=1) if len(values) > 1 else 0.0 if len(values) else np.nan}
        rows.append(row)
    columns = ["method", "n_seeds"] + [f"{metric}_{statistic}" for metric in METRICS for statistic in STATISTICS]
    return pd.DataFrame(rows, columns=columns).astype({column: float for column in columns[2:]})


def is_collapsed(predictions) -> bool:
    """Whether a run predicts one class for every item (array of predictions or a ``pred`` column)."""
    values = np.asarray(predictions["pred"] if isinstance(predictions, pd.DataFrame) else predictions).ravel()
    if values.size == 0:
        raise ValueError("is_collapsed: no predictions")
    return bool(np.unique(values).size == 1)


def id_columns(predictions: pd.DataFrame) -> list[str]:
    """The columns that identify an item: all but ``label``, ``pred``, ``prob`` and ``prob_<label>``."""
    return [column for column in predictions.columns
            if column not in VALUE_COLUMNS and not str(column).startswith("prob_")]


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
            if table.index.names != reference.index.names or len(table) != len(reference) \
                    or not table.index.isin(reference.index).all():
                raise ValueError(f"{method}: {side} seed {seed} was evaluated on other items than seed {seeds[0]}")
            table = table.reindex(reference.index)
            if (table["label"] != reference["label"]).any():
                raise ValueError(f"{method}: {side} seed {seed} disagrees on gold labels")
            matrices[side].append(table["correct"].to_numpy())
    return seeds, np.stack(matrices["method"]), np.stack(matrices["twin"])  # (S, N) each


@dataclass(frozen=True)
class Gap:
    """Gap estimate; each field is a float, or an array over the leading axes of a batch."""

    gap: np.ndarray
    ci_low: np.ndarray
    ci_high: np.ndarray
    p_value: np.ndarray
    standard_error: np.ndarray
    degrees_of_freedom: np.ndarray
    seed_variance: np.ndarray  # per seed pair, sigma^2_seed; NaN with one seed (not estimable)
    item_variance: np.ndarray  # per item, sigma^2_item; with one seed: item + residual, confounded
    residual_variance: np.ndarray  # sigma^2_residual; 0 with one seed
    seeds: int
    items: int
    procedure: str


def crossed_gap(differences, confidence: float = 0.95) -> Gap:
    """The mean of ``differences`` with a CI and two-sided p, seeds and items both random.

    Args:
        differences: (..., S, N) per-seed-pair, per-item differences, e.g. correct_method - correct_twin.
            With S = 1 the seed component is not estimable: a paired t-test over items (``ITEMS_ONLY``).
            The CI is clipped to [-1, 1], the range of a difference of two accuracies.

    Returns:
        ``Gap`` with fields of shape (...) (floats for a single (S, N) matrix).
    """
    d = np.asarray(differences, dtype=float)
    seeds, items = d.shape[-2:]
    if items < 2:
        raise ValueError(f"crossed_gap: need at least 2 items, got {items}")
    gap = d.mean(axis=(-2, -1))
    item_means = d.mean(axis=-2)  # (..., N)
    ms_item = seeds * item_means.var(axis=-1, ddof=1)
    if seeds == 1:
        variance, df = ms_item / items, np.full_like(gap, items - 1.0)
        components = (np.full_like(gap, np.nan), ms_item, np.zeros_like(gap))
    else:
        seed_means = d.mean(axis=-1)  # (..., S)
        ms_seed = items * seed_means.var(axis=-1, ddof=1)
        residual = d - seed_means[..., :, None] - item_means[..., None, :] + gap[..., None, None]  # (..., S, N)
        ms_residual = (residual**2).sum(axis=(-2, -1)) / ((seeds - 1) * (items - 1))
        # E[MS_seed] = r + N s, E[MS_item] = r + S i, E[MS_res] = r, so (MS_seed + MS_item - MS_res) / (S N)
        # is unbiased for Var(mean d). A negative item component is set to 0 (that leaves MS_seed); the seed
        # component is never dropped: doing so on a noisy MS_seed (S - 1 df) rejects too often (see the tests).
        use_item = (ms_item > ms_residual).astype(float)
        weights, squares = (1.0, use_item, -use_item), (ms_seed, ms_item, ms_residual)
        mean_squares_df = (seeds - 1, items - 1, (seeds - 1) * (items - 1))
        combined = sum(weight * square for weight, square in zip(weights, squares))
        spread = sum(weight**2 * square**2 / dof for weight, square, dof in zip(weights, squares, mean_squares_df))
        with np.errstate(invalid="ignore", divide="ignore"):
            df = np.where(combined > 0, combined**2 / np.where(spread > 0, spread, 1.0), seeds - 1.0)  # Satterthwaite
        variance = combined / (seeds * items)
        components = (np.maximum(ms_seed - ms_residual, 0.0) / items, use_item * (ms_item - ms_residual) / seeds,
                      ms_residual)
    # Floor: the gap moves in steps of 1 / (S N) (one item of one seed pair); its standard error is
    # taken to be at least that resolution, so tied seed means do not give an infinite t.
    variance = np.maximum(variance, 1.0 / (seeds * items) ** 2)
    error = np.sqrt(variance)
    t_value = gap / error
    p_value = 2 * stats.t.sf(np.abs(t_value), df)
    half_width = stats.t.ppf(0.5 + confidence / 2, df) * error
    low, high = np.maximum(gap - half_width, -1.0), np.minimum(gap + half_width, 1.0)  # a gap of accuracies
    as_out = float if d.ndim == 2 else np.asarray
    return Gap(as_out(gap), as_out(low), as_out(high), as_out(p_value), as_out(error),
               as_out(df), *(as_out(component) for component in components), seeds, items,
               ITEMS_ONLY if seeds == 1 else CROSSED)


def minimum_detectable_effect(seed_variance: float, item_variance: float, residual_variance: float, seeds: int,
                              items: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true gap the two-sided crossed test finds with probability ``power`` at ``alpha``,
    for a planned design of ``seeds`` seed pairs and ``items`` test items, from variance components
    (``Gap.seed_variance``, ``item_variance``, ``residual_variance``). Power uses the noncentral t with
    the Satterthwaite degrees of freedom of the expected mean squares. With ``seeds == 1`` it is the
    items-only test's MDE (seed luck not counted); a NaN seed variance is allowed only then.

    Returns:
        The gap as a fraction (accuracy points / 100); above 1 when no possible gap reaches the power.
    """
    if seeds < 1 or items < 2:
        raise ValueError(f"minimum_detectable_effect: need seeds >= 1 and items >= 2, got {seeds}, {items}")
    if seeds == 1:
        variance, df = (item_variance + residual_variance) / items, items - 1.0
    elif np.isnan(seed_variance):
        raise ValueError("minimum_detectable_effect: the seed variance is unknown (a one-seed study); plan 1 seed")
    else:
        expected = (residual_variance + items * seed_variance, residual_variance + seeds * item_variance,
                    residual_variance)  # E[MS_seed], E[MS_item], E[MS_residual]
        combined = expected[0] + expected[1] - expected[2]
        variance = combined / (seeds * items)
        mean_squares_df = (seeds - 1, items - 1, (seeds - 1) * (items - 1))
        spread = sum(square**2 / dof for square, dof in zip(expected, mean_squares_df))
        df = combined**2 / spread if combined > 0 else seeds - 1.0  # Satterthwaite, as in ``crossed_gap``
    variance = max(variance, 1.0 / (seeds * items) ** 2)  # the resolution floor of ``crossed_gap``
    error, critical = np.sqrt(variance), stats.t.ppf(1 - alpha / 2, df)

    def shortfall(effect: float) -> float:
        shift = effect / error
        return stats.nct.sf(critical, df, shift) + stats.nct.sf(critical, df, -shift) - power  # both tails

    upper = (critical + 3) * error
    for _ in range(60):  # widen until the power is reached (heavy tails when df is small)
        if shortfall(upper) >= 0:
            break
        upper *= 2
    return float(optimize.brentq(shortfall, 0.0, upper))


def compare_with_twin(method_runs: Mapping, twin_runs: Mapping, method: str = "method") -> Gap | None:
    """Accuracy gap of a method over its random twin: pairs seeds by value, items by id.

    Returns:
        ``Gap`` (fractions), or None when the two share no seed.
    """
    seeds, correct_method, correct_twin = paired_correctness(method_runs, twin_runs, method)
    if not seeds:
        return None
    return crossed_gap(correct_method.astype(float) - correct_twin.astype(float))  # (S, N)


def results_table(runs: pd.DataFrame, gaps: Mapping[str, Gap]) -> pd.DataFrame:
    """The benchmark's ``results.csv``: per-method aggregates, then the gap over the random twin.

    Returns:
        DataFrame: ``method, n_seeds, {dev,test}_{acc,f1}_{mean,std,min,max}, p_value_vs_random,
        gap_vs_random, gap_ci_low, gap_ci_high, mde_vs_random, paired_seeds, paired_items, gap_test``
        (NaN, or 0 seeds and items, where a method has no twin). ``mde_vs_random``: the minimum
        detectable effect (alpha 0.05, power 0.8) for the row's seeds and items, from its measured
        variance components.
    """
    table = aggregate_runs(runs)
    rows = []
    for method in table["method"]:
        gap = gaps.get(method)
        if gap is None:
            rows.append([np.nan] * 5 + [0, 0, np.nan])
            continue
        mde = minimum_detectable_effect(gap.seed_variance, gap.item_variance, gap.residual_variance,
                                        gap.seeds, gap.items)
        rows.append([gap.p_value, gap.gap, gap.ci_low, gap.ci_high, mde, gap.seeds, gap.items, gap.procedure])
    extra = pd.DataFrame(rows, columns=[PVALUE_COLUMN, *GAP_COLUMNS], index=table.index)
    return pd.concat([table, extra], axis=1)
