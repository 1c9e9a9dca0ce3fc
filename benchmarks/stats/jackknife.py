"""Per-item scores of a correlation: the jackknife pseudo-values of a run's Pearson or Spearman
correlation with the gold scores, so a correlation can be paired item by item like correctness.

Item i's pseudo-value is ``n r - (n - 1) r_(-i)``, with ``r_(-i)`` the correlation without item i;
their mean is the jackknife estimate and their variance over n the jackknife variance of r
(Quenouille 1956, Tukey 1958). Pseudo-values rather than a bootstrap over items crossed with seeds
and runs: they turn a correlation into an (S, N) table of per-item values, so the crossed and
nested random-effects tests, their MDE and their calibration apply unchanged and deterministically,
while no bootstrap of a crossed design is exactly consistent (McCullagh 2000). They stay on the
correlation's own scale (not Fisher's z): a gap is reported in correlation points, which a
difference of z values does not back-transform to, and at the hundreds to thousands of test items
here r is near normal (the calibration tests check it).

:func:`item_scores` centres them on the sample correlation, ``r + (n - 1)(mean r_(-.) - r_(-i))``
(the same spread, without the jackknife's O(1/n) bias correction), so their mean is the run's
reported correlation and a gap's estimate is the difference of the reported scores.

Every leave-one-out correlation comes from running sums: O(N) for Pearson; for Spearman each
removal lowers the (average) ranks above the removed item by 1 and its ties' by 1/2, whose sums
need per-item counts of the items above in both variables (a merge-sort tree: O(N log² N)).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

METRICS = ("pearson", "spearman")


def leave_one_out(predicted, gold, metric: str = "pearson") -> np.ndarray:
    """Correlation of ``predicted`` with ``gold`` without each item in turn.

    Args:
        predicted: (..., N) predictions.
        gold: (N,) gold scores; for Pearson, any (..., N) that broadcasts with ``predicted``.
        metric: ``pearson`` or ``spearman``.

    Returns:
        (..., N): entry i is the correlation over the other N - 1 items (NaN where undefined).
    """
    x, y = np.asarray(predicted, dtype=float), np.asarray(gold, dtype=float)
    if x.shape[-1] != y.shape[-1] or y.shape[-1] < 3:
        raise ValueError(f"leave_one_out: need (..., N) predictions and gold, N >= 3; got {x.shape}, {y.shape}")
    if metric == "pearson":
        return _pearson_leave_one_out(x, y)
    if metric == "spearman":
        if y.ndim != 1:
            raise ValueError(f"leave_one_out: Spearman takes one (N,) gold vector, got {y.shape}")
        if x.ndim != 1:
            return np.stack([leave_one_out(row, y, metric) for row in x.reshape(-1, y.size)]).reshape(x.shape)
        return _spearman_leave_one_out(x, y)
    raise ValueError(f"leave_one_out: metric must be one of {METRICS}, got {metric!r}")


def correlation(predicted, gold, metric: str = "pearson") -> np.ndarray:
    """The correlation over the last axis's N items, (...,) for (..., N) predictions and gold that
    broadcast (NaN where undefined): the plain sample value."""
    x, y = np.asarray(predicted, dtype=float), np.asarray(gold, dtype=float)
    if metric == "spearman":
        x, y = rankdata(x, axis=-1), rankdata(y, axis=-1)
    elif metric != "pearson":
        raise ValueError(f"correlation: metric must be one of {METRICS}, got {metric!r}")
    x = x - x.mean(axis=-1, keepdims=True)
    y = y - y.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (x * y).sum(axis=-1) / np.sqrt((x * x).sum(axis=-1) * (y * y).sum(axis=-1))


def pseudo_values(predicted, gold, metric: str = "pearson") -> np.ndarray:
    """``n r - (n - 1) r_(-i)`` per item, (..., N); their mean is the jackknife estimate of r.
    Shapes as for :func:`leave_one_out`."""
    n = np.shape(gold)[-1]
    whole = correlation(predicted, gold, metric)[..., None]
    return n * whole - (n - 1) * leave_one_out(predicted, gold, metric)


def item_scores(predicted, gold, metric: str = "pearson") -> np.ndarray:
    """The pseudo-values centred on the sample correlation, (..., N): their mean is r itself.
    Shapes as for :func:`leave_one_out`."""
    n = np.shape(gold)[-1]
    left_out = leave_one_out(predicted, gold, metric)
    whole = correlation(predicted, gold, metric)[..., None]
    return whole + (n - 1) * (left_out.mean(axis=-1, keepdims=True) - left_out)


def _correlation_from_sums(count, sum_x, sum_y, sum_xx, sum_yy, sum_xy) -> np.ndarray:
    """Pearson's r of ``count`` pairs from their sums (NaN where either side is constant)."""
    covariance = count * sum_xy - sum_x * sum_y
    spread = (count * sum_xx - sum_x**2) * (count * sum_yy - sum_y**2)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(spread > 0, covariance / np.sqrt(np.where(spread > 0, spread, 1.0)), np.nan)


def _pearson_leave_one_out(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    x = x - x.mean(axis=-1, keepdims=True)  # centred once: the sums below stay well conditioned
    y = y - y.mean(axis=-1, keepdims=True)

    def total(values):
        return values.sum(axis=-1, keepdims=True)

    return _correlation_from_sums(
        x.shape[-1] - 1, total(x) - x, total(y) - y, total(x * x) - x * x, total(y * y) - y * y, total(x * y) - x * y
    )


def _drops(values: np.ndarray, *weights: np.ndarray):
    """For average ranks of ``values`` and each item i, with ``a_ij`` the drop in j's rank when i leaves
    (1 above i, 1/2 tied with it, 0 below): ``sum_j a_ij``, ``sum_j a_ij^2`` and ``sum_j a_ij w_j``
    for each weight vector (j != i)."""
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    below = np.searchsorted(ordered, values, side="left")
    up_to = np.searchsorted(ordered, values, side="right")
    above, tied = values.size - up_to, up_to - below - 1  # tied: others equal to i
    sums = [above + 0.5 * tied, above + 0.25 * tied]
    for weight in weights:
        cumulative = np.concatenate([[0.0], np.cumsum(weight[order])])  # (N + 1,)
        sums.append(cumulative[-1] - cumulative[up_to] + 0.5 * (cumulative[up_to] - cumulative[below] - weight))
    return sums


def _dominance(first: np.ndarray, second: np.ndarray, first_above: np.ndarray, second_above: np.ndarray):
    """``#{j : first_j > first_above_q and second_j > second_above_q}`` for each query q, on integer
    ranks (``second`` >= 1, thresholds >= 0): the items sorted by ``first`` (descending) make each count
    one over a prefix, summed over the prefix's aligned blocks of a merge-sort tree (each level's blocks
    with their ``second`` values sorted once, keyed by block)."""
    n = first.size
    prefix = n - np.searchsorted(np.sort(first), first_above, side="right")  # (Q,) items with first above
    tail = second[np.argsort(-first, kind="stable")]
    width = int(second.max()) + 1
    counts = np.zeros(prefix.shape, dtype=np.int64)
    for level in range(max(1, int(n).bit_length())):
        keys = np.sort((np.arange(n) >> level) * width + tail)
        block = (prefix >> level) - 1  # the prefix's block at this level, where its bit is set
        size = np.minimum((block + 1) << level, n)  # items up to the block's end
        not_above = np.searchsorted(keys, block * width + second_above, side="right")  # earlier blocks too
        counts += np.where((prefix >> level) & 1, size - not_above, 0)
    return counts


def _spearman_leave_one_out(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    n = y.size
    rank_x = rankdata(x) - (n + 1) / 2  # centred average ranks; a removal shifts them as it does ranks
    rank_y = rankdata(y) - (n + 1) / 2
    dense_x, dense_y = rankdata(x, method="dense").astype(np.int64), rankdata(y, method="dense").astype(np.int64)
    drop_x, drop_xx, drop_x_rank_x, drop_x_rank_y = _drops(x, rank_x, rank_y)
    drop_y, drop_yy, drop_y_rank_y, drop_y_rank_x = _drops(y, rank_y, rank_x)
    # sum_j a_ij b_ij = 1/4 sum_j ([x>] + [x>=])([y>] + [y>=]) over j != i; only (>=, >=) counts i itself
    loose = [(loose_x, loose_y) for loose_x in (0, 1) for loose_y in (0, 1)]
    above_x = np.concatenate([dense_x - loose_x for loose_x, _ in loose])  # (4 N,) all four counts at once
    above_y = np.concatenate([dense_y - loose_y for _, loose_y in loose])
    both = _dominance(dense_x, dense_y, above_x, above_y).reshape(4, n).sum(axis=0)
    drop_xy = 0.25 * (both - 1)
    sum_x = rank_x.sum() - rank_x - drop_x
    sum_y = rank_y.sum() - rank_y - drop_y
    sum_xx = (rank_x**2).sum() - rank_x**2 - 2 * drop_x_rank_x + drop_xx
    sum_yy = (rank_y**2).sum() - rank_y**2 - 2 * drop_y_rank_y + drop_yy
    sum_xy = (rank_x * rank_y).sum() - rank_x * rank_y - drop_x_rank_y - drop_y_rank_x + drop_xy
    return _correlation_from_sums(n - 1, sum_x, sum_y, sum_xx, sum_yy, sum_xy)
