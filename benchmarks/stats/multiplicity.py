"""Many comparisons in one report: Holm's step-down adjustment of their p-values, and the count of
CIs that exclude 0 beside the count that chance alone produces.

Holm (1979) controls the family-wise error rate (the chance of one or more false claims among the
report's comparisons) under any dependence between them; scipy has no Holm, so it is written here
and checked against statsmodels' ``multipletests`` in the tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def holm(p_values) -> np.ndarray:
    """Holm-adjusted p-values; NaN entries (comparisons without a p) stay NaN and are not counted.

    The k-th smallest of m p-values becomes ``max over j <= k of min(1, (m - j + 1) p_(j))``: a
    comparison's adjusted p is below alpha exactly when Holm's procedure rejects it at alpha.

    Returns:
        Array of the input's shape.
    """
    values = np.asarray(p_values, dtype=float)
    flat = values.ravel()
    adjusted = np.full(flat.shape, np.nan)
    tested = np.flatnonzero(~np.isnan(flat))
    if tested.size:
        order = tested[np.argsort(flat[tested], kind="stable")]
        factors = np.arange(tested.size, 0, -1)  # m, m - 1, ..., 1
        adjusted[order] = np.minimum(1.0, np.maximum.accumulate(factors * flat[order]))
    return adjusted.reshape(values.shape)


@dataclass(frozen=True)
class ChanceCounts:
    """A report's comparisons with a CI: ``excluding`` of ``tested`` CIs exclude 0, where chance alone
    gives about ``by_chance``; ``holm_survivors`` of them stay below alpha after Holm (None: no p given)."""

    tested: int
    excluding: int
    by_chance: float
    alpha: float
    holm_survivors: int | None


def chance_counts(ci_low, ci_high, p_adjusted=None, confidence: float = 0.95) -> ChanceCounts | None:
    """The counts of :class:`ChanceCounts`; None when no comparison has a CI."""
    low, high = np.asarray(ci_low, dtype=float), np.asarray(ci_high, dtype=float)
    tested = ~(np.isnan(low) | np.isnan(high))
    count = int(tested.sum())
    if count == 0:
        return None
    alpha = 1 - confidence
    survivors = None
    if p_adjusted is not None:
        adjusted = np.asarray(p_adjusted, dtype=float)
        survivors = int((adjusted[tested & ~np.isnan(adjusted)] < alpha).sum())
    return ChanceCounts(
        tested=count,
        excluding=int(((low[tested] > 0) | (high[tested] < 0)).sum()),
        by_chance=alpha * count,
        alpha=alpha,
        holm_survivors=survivors,
    )


def chance_remark(
    ci_low,
    ci_high,
    p_adjusted=None,
    confidence: float = 0.95,
    what: str = "CIs",
    adjusted_name: str = "p_adjusted",
    adjustment: str | None = None,
) -> str | None:
    """``"k of n CIs exclude 0; chance alone gives about m"`` for a report's comparisons (those with a
    CI), with how many stay below ``1 - confidence`` after Holm's adjustment when ``p_adjusted`` is given
    (its results.csv column: ``adjusted_name``). ``adjustment`` says over what Holm went when that is
    not these n comparisons (a pre-registered family).

    Returns:
        The sentence, or None when no comparison has a CI.
    """
    counts = chance_counts(ci_low, ci_high, p_adjusted, confidence)
    if counts is None:
        return None
    sentence = (
        f"{counts.excluding} of {counts.tested} {what} exclude 0; chance alone gives about "
        f"{counts.by_chance:.1f} (each {confidence:.0%} CI excludes a true gap of 0 with probability "
        f"{counts.alpha:g})"
    )
    if counts.holm_survivors is not None:
        over = adjustment or f"Holm's adjustment for the {counts.tested} comparisons"
        sentence += (
            f"; {counts.holm_survivors} of them stay below p = {counts.alpha:g} after {over} (`{adjusted_name}`)"
        )
    return sentence + "."
