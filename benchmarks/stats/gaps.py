"""The gap of a method over its random twin, or over a deterministic baseline, tested with training
seeds and test items both random samples (Clark 1973, "language-as-fixed-effect fallacy").

The gap is in the task's main score, from the per-item scores it pairs on (``pairing.item_scores``):
correctness for classes (an accuracy gap), an item's jackknife share of the correlation for a graded
task (a correlation gap; ``stats.jackknife``). For S seed pairs and N test items,
``d[s, i] = score_method[s, i] - score_other[s, i]`` (e.g. correct_method - correct_other) is
decomposed as ``mu + seed_s + item_i + residual_si`` (two-way crossed random effects). The gap is
``mean(d)``; its variance is ``(max(MS_seed, MS_res) + max(MS_item, MS_res) - MS_res) / (S N)``:
the ANOVA estimate with a negative seed or item component truncated at 0, so tied seed means
cannot shrink the standard error below the residual noise. The degrees of freedom are
``V / (MS_seed / (S - 1) + MS_item / (N - 1) + MS_res / ((S - 1)(N - 1)))`` with V the numerator
above: each mean square's df weighted by its share of V. Satterthwaite's formula squares those
shares; with S - 1 = 2 df a small MS_seed then gives both a large t and a large df, and the test
rejects a true null up to ~8% of the time at alpha 0.05 (S = 3). The t distribution with these df
gives the 95% CI and the two-sided p.

Against a deterministic baseline (one prediction vector, e.g. TF-IDF + LR) the baseline's
correctness is a property of each item: it falls into the item effect, the seed effect is the
method's seed luck alone, and the same test applies with the baseline repeated at every seed.

With one seed pair seed luck is not estimable: the gap is reported without a CI or p ("no seed
replication"), since an items-only test would pass seed luck off as a gap. Calibration (null
rejection, tied seeds, CI coverage, power at the MDE) is checked against simulations and an
independent fit in ``tests/benchmarks/test_stats.py``; for a correlation gap (pseudo-values, seeds,
items and pretraining runs) in ``tests/benchmarks/test_correlation_gap_calibration.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import optimize, stats

from benchmarks.stats.aggregate import METRICS, STATISTICS, aggregate_runs, is_collapsed, runs_table
from benchmarks.stats.pairing import (
    ID_COLUMNS,
    VALUE_COLUMNS,
    correctness,
    id_columns,
    paired_correctness,
    paired_scores,
    same_items,
)
from harness.datasets.task import CLASSES, Task

__all__ = [
    "METRICS",
    "STATISTICS",
    "ID_COLUMNS",
    "VALUE_COLUMNS",
    "PVALUE_COLUMN",
    "CROSSED",
    "NO_SEED_REPLICATION",
    "ITEMS_ONLY",
    "Gap",
    "crossed_gap",
    "rejection_probability",
    "minimum_detectable_effect",
    "compare_with_twin",
    "compare_with_baseline",
    "aggregate_runs",
    "is_collapsed",
    "runs_table",
    "correctness",
    "id_columns",
    "paired_correctness",
]

PVALUE_COLUMN = "p_value_vs_random"  # results.csv (benchmarks.stats.results_columns declares every column)
# a pretrained method against its twin's linear probe: gap, CI ends, p, its Holm p, and which probe
PROBE_GAP_COLUMNS = ("gap_vs_twin_probe", "gap_vs_twin_probe_ci_low", "gap_vs_twin_probe_ci_high", "p_vs_twin_probe")
PROBE_ADJUSTED_COLUMN, TWIN_PROBE_COLUMN = "p_vs_twin_probe_adjusted", "twin_probe"
# p_vs_tfidf adjusted over the pre-registered comparisons only (p_vs_tfidf_adjusted: over every method)
TFIDF_REGISTERED_COLUMN = "p_vs_tfidf_registered_adjusted"
CROSSED, NO_SEED_REPLICATION = "seeds x items", "no seed replication"
ITEMS_ONLY = NO_SEED_REPLICATION  # the former name of the one-seed procedure
QUADRATURE_POINTS = 2000  # quantiles of MS_seed's distribution averaged over in ``rejection_probability``


@dataclass(frozen=True)
class Gap:
    """Gap estimate; each field is a float, or an array over the leading axes of a batch."""

    gap: np.ndarray
    ci_low: np.ndarray  # NaN with one seed pair, as are p_value, standard_error, degrees_of_freedom
    ci_high: np.ndarray
    p_value: np.ndarray
    standard_error: np.ndarray
    degrees_of_freedom: np.ndarray
    seed_variance: np.ndarray  # per seed pair, sigma^2_seed >= 0; NaN with one seed (not estimable)
    item_variance: np.ndarray  # per item, sigma^2_item >= 0; with one seed: item + residual, confounded
    residual_variance: np.ndarray  # sigma^2_residual; NaN with one seed
    seeds: int
    items: int
    procedure: str


def _degrees_of_freedom(variance, ms_seed, ms_item, ms_residual, seeds: int, items: int, seed_df: int | None = None):
    """``V / sum(MS_j / df_j)``; the seed df where every mean square is 0 (nothing varies). ``seed_df``:
    MS_seed's degrees of freedom, S - 1 unless the seeds are nested in pretraining runs; the residual's
    are ``seed_df (N - 1)``."""
    seed_df = seeds - 1 if seed_df is None else seed_df
    share = ms_seed / seed_df + ms_item / (items - 1) + ms_residual / (seed_df * (items - 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(share > 0, variance / np.where(share > 0, share, 1.0), float(seed_df))


def t_interval(gap, variance, df, cells: int, confidence: float = 0.95):
    """``(standard error, two-sided p, CI low, CI high)`` of a mean gap over ``cells`` differences
    whose ``variance`` is ``cells × Var(mean)``, on a t distribution with ``df``. The CI is clipped to
    [-1, 1], the range of a difference of two accuracies."""
    # Floor: the gap moves in steps of 1 / cells (one item of one run); its standard error is taken to
    # be at least that resolution, so identical runs do not give an infinite t.
    error = np.sqrt(np.maximum(variance / cells, 1.0 / cells**2))
    p_value = 2 * stats.t.sf(np.abs(gap / error), df)
    half_width = stats.t.ppf(0.5 + confidence / 2, df) * error
    return error, p_value, np.maximum(gap - half_width, -1.0), np.minimum(gap + half_width, 1.0)


def crossed_gap(differences, confidence: float = 0.95) -> Gap:
    """The mean of ``differences`` with a CI and two-sided p, seeds and items both random.

    Args:
        differences: (..., S, N) per-seed-pair, per-item differences, e.g. correct_method - correct_twin.
            With S = 1 only the gap and the (confounded) item variance: ``NO_SEED_REPLICATION``.
            The CI is clipped to [-1, 1], the range of a difference of two accuracies.

    Returns:
        ``Gap`` with fields of shape (...) (floats for a single (S, N) matrix).
    """
    d = np.asarray(differences, dtype=float)
    seeds, items = d.shape[-2:]
    if items < 2:
        raise ValueError(f"crossed_gap: need at least 2 items, got {items}")
    as_out = float if d.ndim == 2 else np.asarray
    gap = d.mean(axis=(-2, -1))
    item_means = d.mean(axis=-2)  # (..., N)
    ms_item = seeds * item_means.var(axis=-1, ddof=1)
    if seeds == 1:
        missing = np.full_like(gap, np.nan)
        return Gap(
            as_out(gap),
            *(as_out(missing) for _ in range(6)),
            as_out(ms_item),
            as_out(missing),
            1,
            items,
            NO_SEED_REPLICATION,
        )
    seed_means = d.mean(axis=-1)  # (..., S)
    ms_seed = items * seed_means.var(axis=-1, ddof=1)
    # SS_res = SS_total - SS_seed - SS_item, without an (..., S, N) residual array (batches of simulations)
    ss_total = np.einsum("...ij,...ij->...", d, d) - seeds * items * gap**2
    ss_residual = np.maximum(ss_total - (seeds - 1) * ms_seed - (items - 1) * ms_item, 0.0)
    ms_residual = ss_residual / ((seeds - 1) * (items - 1))
    # E[MS_seed] = r + N s, E[MS_item] = r + S i, E[MS_res] = r: components truncated at 0
    seed_excess, item_excess = np.maximum(ms_seed - ms_residual, 0.0), np.maximum(ms_item - ms_residual, 0.0)
    variance = seed_excess + item_excess + ms_residual  # S N Var(mean d)
    df = _degrees_of_freedom(variance, ms_seed, ms_item, ms_residual, seeds, items)
    error, p_value, low, high = t_interval(gap, variance, df, seeds * items, confidence)
    components = (seed_excess / items, item_excess / seeds, ms_residual)
    return Gap(
        as_out(gap),
        as_out(low),
        as_out(high),
        as_out(p_value),
        as_out(error),
        as_out(df),
        *(as_out(component) for component in components),
        seeds,
        items,
        CROSSED,
    )


def rejection_probability(
    effect: float,
    seed_variance: float,
    item_variance: float,
    residual_variance: float,
    seeds: int,
    items: int,
    alpha: float = 0.05,
    seed_df: int | None = None,
) -> float:
    """How often ``crossed_gap``'s two-sided test rejects at ``alpha`` when the true gap is ``effect``,
    for a design of ``seeds`` seed pairs and ``items`` items with these variance components (normal
    model). MS_item and MS_res are taken at their expectations (N - 1 and more df); MS_seed follows
    its scaled chi-square with S - 1 df, averaged over ``QUADRATURE_POINTS`` quantiles, through the
    same truncation, degrees of freedom and resolution floor as the test. ``effect = 0``: the size.
    ``seed_df``: MS_seed's degrees of freedom, S - 1; S - R where the S seed pairs are nested in R
    pretraining runs held fixed (the "these checkpoints" reading of ``pretraining_runs``).
    """
    if seeds < 2 or items < 2:
        raise ValueError(f"rejection_probability: need seeds >= 2 and items >= 2, got {seeds}, {items}")
    seed_df = seeds - 1 if seed_df is None else seed_df
    if not 1 <= seed_df <= seeds - 1:
        raise ValueError(f"rejection_probability: seed_df must be 1 to {seeds - 1} for {seeds} seeds, got {seed_df}")
    if min(seed_variance, item_variance, residual_variance) < 0 or np.isnan(seed_variance):
        raise ValueError("rejection_probability: variance components must be known and >= 0")
    expected_seed = residual_variance + items * seed_variance
    expected_item = residual_variance + seeds * item_variance
    quantiles = (np.arange(QUADRATURE_POINTS) + 0.5) / QUADRATURE_POINTS
    ms_seed = expected_seed * stats.chi2.ppf(quantiles, seed_df) / seed_df  # (Q,)
    variance = np.maximum(ms_seed, residual_variance) + expected_item - residual_variance  # S N Var, estimated
    df = _degrees_of_freedom(variance, ms_seed, expected_item, residual_variance, seeds, items, seed_df)
    floor = 1.0 / (seeds * items)
    error = np.sqrt(np.maximum(variance, floor) / (seeds * items))  # (Q,)
    true_error = np.sqrt(max(expected_seed + expected_item - residual_variance, floor) / (seeds * items))
    critical = stats.t.ppf(1 - alpha / 2, df) * error
    rejected = stats.norm.sf((critical - effect) / true_error) + stats.norm.cdf((-critical - effect) / true_error)
    return float(rejected.mean())


def minimum_detectable_effect(
    seed_variance: float,
    item_variance: float,
    residual_variance: float,
    seeds: int,
    items: int,
    alpha: float = 0.05,
    power: float = 0.8,
    seed_df: int | None = None,
) -> float:
    """The smallest true gap ``crossed_gap``'s two-sided test finds with probability ``power`` at
    ``alpha`` for a planned design of ``seeds`` (>= 2) seed pairs and ``items`` test items, from
    variance components (``Gap.seed_variance``, ``item_variance``, ``residual_variance``; truncated
    at 0 as the test does), through ``rejection_probability`` (``seed_df`` as there).

    Returns:
        The gap as a fraction (accuracy points / 100); above 1 when no possible gap reaches the power.
    """
    if seeds < 2:
        raise ValueError(
            f"minimum_detectable_effect: {seeds} seed: no seed replication, so no test to plan; "
            "plan at least 2 seeds (5 for claims)"
        )

    def shortfall(effect: float) -> float:
        return (
            rejection_probability(effect, seed_variance, item_variance, residual_variance, seeds, items, alpha, seed_df)
            - power
        )

    upper = 1.0 / (seeds * items)
    for _ in range(80):  # widen until the power is reached (heavy tails when df is small)
        if shortfall(upper) >= 0:
            break
        upper *= 2
    return float(optimize.brentq(shortfall, 0.0, upper, xtol=1e-7))


def compare_with_twin(
    method_runs: Mapping, twin_runs: Mapping, method: str = "method", task: Task = CLASSES, metric: str | None = None
) -> Gap | None:
    """The gap of a method over its random twin in the task's main score (or ``metric``): seeds
    paired by value, items by id, on the task's per-item scores (``pairing.item_scores``).

    Returns:
        ``Gap`` (fractions of accuracy, or correlation units), or None when the two share no seed.
    """
    seeds, scores_method, scores_twin = paired_scores(method_runs, twin_runs, method, task, metric)
    if not seeds:
        return None
    return crossed_gap(scores_method - scores_twin)  # (S, N)


def compare_with_baseline(
    method_runs: Mapping,
    baseline_predictions: pd.DataFrame,
    method: str = "method",
    task: Task = CLASSES,
    metric: str | None = None,
) -> Gap | None:
    """The gap of a method over a deterministic baseline (one predictions table): the method's
    seeds × items against the baseline's per-item scores repeated at every seed, items paired by id.

    Returns:
        ``Gap``, or None without runs or when the method saw other items than the baseline.
    """
    if not method_runs or not same_items(next(iter(method_runs.values())), baseline_predictions):
        return None
    return compare_with_twin(method_runs, {seed: baseline_predictions for seed in method_runs}, method, task, metric)
