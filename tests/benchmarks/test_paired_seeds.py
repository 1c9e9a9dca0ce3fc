"""The sensitivity reading: a paired t over seed pairs' test accuracies, checked against statsmodels,
its Holm adjustment over the pre-registered family and its lines in the report's remarks."""

import numpy as np
import pandas as pd
import pytest

from benchmarks.report.remarks import remarks
from benchmarks.stats.multiplicity import holm
from benchmarks.stats.paired_seeds import SEEDS_T_ADJUSTED_COLUMN, SEEDS_T_COLUMNS, paired_t_over_seeds
from benchmarks.stats.preregistration import adjust_registered
from tests.benchmarks.stats_inputs import frame

ITEMS = 50


def runs_right_on(counts: dict[int, int]) -> dict[int, pd.DataFrame]:
    """``{seed: predictions}`` right on the first ``count`` of ``ITEMS`` items."""
    return {seed: frame(np.arange(ITEMS) < count) for seed, count in counts.items()}


def test_the_paired_t_matches_statsmodels_on_the_seed_pairs_accuracy_differences():
    from statsmodels.stats.weightstats import DescrStatsW

    method = runs_right_on({0: 40, 1: 36, 2: 41, 3: 35, 4: 38})
    twin = runs_right_on({0: 35, 1: 36, 2: 33, 3: 34, 4: 30, 9: 50})  # seed 9 has no pair: left out
    result = paired_t_over_seeds(method, twin)
    differences = np.array([40 - 35, 36 - 36, 41 - 33, 35 - 34, 38 - 30]) / ITEMS
    reference = DescrStatsW(differences)
    _, p_value, _ = reference.ttest_mean(0.0)
    low, high = reference.tconfint_mean(alpha=0.05)
    assert result.pairs == 5
    assert result.gap == pytest.approx(differences.mean())
    assert result.p_value == pytest.approx(p_value)
    assert (result.ci_low, result.ci_high) == pytest.approx((low, high))


def test_one_seed_pair_has_no_test_and_identical_differences_no_variance():
    assert paired_t_over_seeds(runs_right_on({0: 40}), runs_right_on({0: 30})) is None
    tied = paired_t_over_seeds(runs_right_on({0: 40, 1: 45}), runs_right_on({0: 30, 1: 35}))
    assert tied.gap == pytest.approx(0.2) and tied.pairs == 2
    assert np.isnan(tied.p_value) and np.isnan(tied.ci_low) and np.isnan(tied.ci_high)


def registered_table() -> pd.DataFrame:
    low, high, p_value = SEEDS_T_COLUMNS
    return pd.DataFrame(
        {
            "method": ["a", "random-a", "b", "c"],
            "n_seeds": [10, 10, 10, 4],
            "gap_vs_random": [0.042, np.nan, -0.002, 0.01],
            "gap_ci_low": [0.03, np.nan, -0.014, -0.1],
            "gap_ci_high": [0.054, np.nan, 0.01, 0.12],
            "p_value_vs_random": [1e-6, np.nan, 0.72, 0.4],
            "p_adjusted": [np.nan] * 4,
            low: [0.034, np.nan, -0.01, -0.02],
            high: [0.05, np.nan, 0.006, 0.04],
            p_value: [2e-6, np.nan, 0.6, 0.3],
            "learning_rate": [1e-3] * 4,
            "test_acc_mean": [0.75, 0.71, 0.68, 0.7],
        }
    )


def test_the_paired_t_is_adjusted_over_the_registered_family_beside_its_p():
    table, family = adjust_registered(registered_table(), ("a", "b", "not-run"))
    columns = list(table.columns)
    assert columns[columns.index(SEEDS_T_COLUMNS[-1]) + 1] == SEEDS_T_ADJUSTED_COLUMN
    expected = holm([2e-6, 0.6, 1.0])  # the comparison not run yet counts with p = 1
    adjusted = table.set_index("method")[SEEDS_T_ADJUSTED_COLUMN]
    assert adjusted["a"] == pytest.approx(expected[0]) and adjusted["b"] == pytest.approx(expected[1])
    assert adjusted[["random-a", "c"]].isna().all()  # a twin row and an exploratory gap: not in the family
    assert family.missing == ("not-run",)


def test_the_report_gives_each_registered_comparison_its_sensitivity_line():
    table, family = adjust_registered(registered_table(), ("a", "b"))
    runs = pd.DataFrame({"method": [], "kind": [], "seed": []})
    lines = [line for line in remarks(table, runs, family=family) if line.startswith("Sensitivity")]
    assert len(lines) == 3  # what the test is, then a and b; c is exploratory
    assert lines[1].startswith("Sensitivity, `a` (+4.2 points): headline CI +3.0 to +5.4")
    assert "paired t over 10 seed pairs CI +3.4 to +5.0, p 2e-06" in lines[1]
    assert lines[2].startswith("Sensitivity, `b` (-0.2 points)") and "p 0.6, Holm p 0.6" in lines[2]
    unregistered, _ = adjust_registered(registered_table(), ())
    assert not [line for line in remarks(unregistered, runs) if line.startswith("Sensitivity")]
