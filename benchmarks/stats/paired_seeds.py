"""The sensitivity reading beside the crossed test: a paired t-test over seed pairs' test scores
(accuracies, or a graded task's correlations),
as most papers test a gap. Each seed's method cell is paired with the twin at that seed (with
several pretraining runs: every run's cells, each with the twin at its seed), the per-pair accuracy
differences go through ``scipy.stats.ttest_rel``, and its CI comes from the same t distribution.

It treats the test items as fixed (their sampling noise is not in its CI) and every seed pair as
independent (the pretraining runs the pairs share are ignored), so it answers a narrower question
than the headline: would these seeds' gap come back with other seeds, on this test set. A claim that
holds under the crossed test and not here, or the reverse, is one to read with care.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from scipy import stats

from benchmarks.stats.pairing import paired_scores
from harness.datasets.task import CLASSES, Task

# results.csv: the paired t over seed pairs (fractions and p), and its Holm adjustment over the
# pre-registered family (``benchmarks.stats.preregistration``)
SEEDS_T_COLUMNS = ("seeds_t_ci_low", "seeds_t_ci_high", "seeds_t_p")
SEEDS_T_ADJUSTED_COLUMN = "seeds_t_p_adjusted"


@dataclass(frozen=True)
class SeedPairTest:
    """A paired t-test of the accuracy gap over ``pairs`` seed pairs (fractions; p two-sided)."""

    gap: float
    ci_low: float
    ci_high: float
    p_value: float
    pairs: int


def paired_t_over_seeds(
    method_runs: Mapping,
    twin_runs: Mapping,
    method: str = "method",
    confidence: float = 0.95,
    task: Task = CLASSES,
    metric: str | None = None,
) -> SeedPairTest | None:
    """The paired t-test of a method's test score against its twin's, seed by seed: accuracy, or the
    task's correlation (the mean of its per-item scores, ``pairing.item_scores``).

    Args:
        method_runs, twin_runs: ``{seed: test predictions}`` (a method's seeds are distinct across its
            pretraining runs, so one dict holds every run's cells).
        task, metric: the task and the score compared (its main one by default).

    Returns:
        ``SeedPairTest``, or None with fewer than two seed pairs. Identical differences at every seed
        leave no variance to test: NaN p and CI.
    """
    seeds, scores_method, scores_twin = paired_scores(method_runs, twin_runs, method, task, metric)
    if len(seeds) < 2:
        return None
    accuracy_method = scores_method.mean(axis=1)  # (S,): each seed's accuracy or correlation
    accuracy_twin = scores_twin.mean(axis=1)
    differences = accuracy_method - accuracy_twin
    gap = float(differences.mean())
    if np.ptp(differences) == 0:
        return SeedPairTest(gap, np.nan, np.nan, np.nan, len(seeds))
    result = stats.ttest_rel(accuracy_method, accuracy_twin)
    interval = result.confidence_interval(confidence)
    return SeedPairTest(gap, float(interval.low), float(interval.high), float(result.pvalue), len(seeds))
