"""Holm's adjustment against statsmodels and a hand-worked table; the count of CIs that exclude 0."""

import numpy as np
import pytest

from benchmarks.stats.multiplicity import chance_counts, chance_remark, holm


def test_holm_by_hand():
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1: 0.02, 0.03, 0.06, 0.04; running maximum 0.02, 0.03, 0.06, 0.06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert holm([]).shape == (0,)


def test_holm_matches_statsmodels_and_leaves_missing_p_values_out():
    from statsmodels.stats.multitest import multipletests

    generator = np.random.default_rng(0)
    p_values = np.concatenate([generator.uniform(0, 0.05, 8), generator.uniform(0, 1, 30)])
    p_values[[3, 17]] = p_values[5]  # ties
    expected = multipletests(p_values, method="holm")[1]
    assert holm(p_values) == pytest.approx(expected)
    with_missing = np.insert(p_values, [0, 10], np.nan)
    adjusted = holm(with_missing)
    assert np.isnan(adjusted[[0, 11]]).all()
    assert np.delete(adjusted, [0, 11]) == pytest.approx(expected)  # a missing p is no comparison


def test_chance_counts_exclusions_and_holm_survivors():
    low = [0.01, -0.02, 0.002, np.nan, -0.05]
    high = [0.05, 0.03, 0.04, np.nan, -0.01]
    p_adjusted = [0.004, 1.0, 0.2, np.nan, 0.03]
    counts = chance_counts(low, high, p_adjusted)
    assert (counts.tested, counts.excluding, counts.holm_survivors) == (4, 3, 2)
    assert counts.by_chance == pytest.approx(0.2) and counts.alpha == pytest.approx(0.05)
    assert chance_counts([np.nan], [np.nan]) is None and chance_remark([np.nan], [np.nan]) is None
    many = chance_counts([0.1] * 40, [0.2] * 40)
    assert (many.tested, many.excluding, many.holm_survivors) == (40, 40, None)
    assert many.by_chance == pytest.approx(2.0)


def test_chance_remark_words_the_counts():
    assert chance_remark(
        [0.01, -0.02], [0.05, 0.03], [0.01, 0.5], what="CIs against TF-IDF", adjusted_name="p_vs_tfidf_adjusted"
    ) == (
        "1 of 2 CIs against TF-IDF exclude 0; chance alone gives about 0.1 (each 95% CI excludes a true gap of 0 "
        "with probability 0.05); 1 of them stay below p = 0.05 after Holm's adjustment for the 2 comparisons "
        "(`p_vs_tfidf_adjusted`)."
    )
