"""A graded task through the statistics: its metrics aggregated over seeds in place of accuracy and F1
(MRPC's columns unchanged), a collapsed run, the graded control rule, every gap and sensitivity
reading on correlations (scipy's per seed), and Holm over graded p-values as over any."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.stats import results_columns
from benchmarks.stats.aggregate import COLLAPSE_TOLERANCE, METRICS, aggregate_runs, is_collapsed, runs_table
from benchmarks.stats.controls import RULE_TEXT, control_check, failed_arms, rule_text
from benchmarks.stats.gaps import compare_with_twin
from benchmarks.stats.multiplicity import holm
from benchmarks.stats.paired_seeds import paired_t_over_seeds
from benchmarks.stats.pretraining_runs import RECIPE, compare_over_pretrainings
from benchmarks.stats.results_columns import Evidence, names, results_frame
from harness.datasets.task import CLASSES, graded

STSB = graded(0, 5)
ITEMS = 300
GOLD = np.round(np.clip(2.5 + 1.3 * np.random.default_rng(0).standard_normal(ITEMS), 0, 5) * 5) / 5
GRADED_METRICS = ["dev_pearson", "dev_spearman", "test_pearson", "test_spearman"]


def predictions(noise: float, seed: int, constant: bool = False) -> pd.DataFrame:
    """Graded test predictions: the gold score plus normal noise of SD ``noise`` (a constant 2.5 when
    ``constant``), written as a predictions file is (ids, gold ``label``, ``pred``)."""
    generator = np.random.default_rng(seed)
    pred = np.full(ITEMS, 2.5) if constant else GOLD + generator.normal(0, noise, ITEMS)
    return pd.DataFrame({"id": [f"pair{index}" for index in range(ITEMS)], "label": GOLD, "pred": pred})


def arm(noise: float, constant_seeds=(), seeds=(0, 1, 2)) -> dict:
    return {seed: predictions(noise, seed + int(100 * noise), seed in constant_seeds) for seed in seeds}


def pearson(frame: pd.DataFrame) -> float:
    return stats.pearsonr(frame["pred"], frame["label"]).statistic


# ── metrics and columns from the task ───────────────────────────────────────────────────────────


def test_mrpcs_metrics_and_columns_are_as_they_were():
    assert METRICS == ["dev_acc", "dev_f1", "test_acc", "test_f1"] == CLASSES.run_metrics()
    assert names() == names(CLASSES) == [column.name for column in results_columns.COLUMNS]
    meanings = {column.name: column.meaning for column in results_columns.columns()}
    assert meanings["dev_acc_max"] == "max of dev_acc over the method's runs (fraction)"
    assert meanings["gap_vs_random"].startswith("test accuracy gap over the twin (fraction;")
    assert RULE_TEXT == rule_text(CLASSES)


def test_a_graded_methods_score_is_the_mean_of_its_per_seed_correlations():
    runs = pd.DataFrame(
        [("m", 0, 0.80, 0.78, 0.70, 0.69), ("m", 1, 0.82, 0.80, 0.74, 0.72), ("m", 2, 0.81, 0.79, 0.72, 0.73)],
        columns=["method", "seed", *(f"metrics.{metric}" for metric in GRADED_METRICS)],
    )
    assert list(runs_table(runs, STSB).columns) == ["method", "seed", *GRADED_METRICS]
    table = aggregate_runs(runs, STSB)
    assert list(table.columns) == ["method", "n_seeds"] + [
        f"{metric}_{statistic}" for metric in GRADED_METRICS for statistic in ("mean", "std", "min", "max")
    ]
    row = table.iloc[0]
    assert row["test_pearson_mean"] == pytest.approx(0.72) and row["test_spearman_mean"] == pytest.approx(2.14 / 3)
    assert row["test_pearson_std"] == pytest.approx(0.02) and row["dev_spearman_max"] == pytest.approx(0.80)


def test_graded_results_columns_put_the_tasks_metrics_where_mrpcs_were():
    declared, classes = names(STSB), names(CLASSES)
    metric_columns = [
        f"{metric}_{statistic}" for metric in GRADED_METRICS for statistic in ("mean", "std", "min", "max")
    ]
    assert declared == classes[:2] + metric_columns + classes[18:]
    meanings = {column.name: column.meaning for column in results_columns.columns(STSB)}
    assert meanings["gap_vs_random"].startswith("test Pearson r gap over the twin (correlation in [-1, 1];")
    assert meanings["collapsed_runs"] == "runs whose test predictions are (near) constant"
    summary = {column.name for column in results_columns.columns(STSB) if column.summary and column.per_metric}
    assert summary == {"test_pearson_mean", "test_spearman_mean", "test_pearson_std", "dev_pearson_mean"}


# ── collapse and the graded control rule ────────────────────────────────────────────────────────


def test_a_graded_run_collapses_when_its_predictions_are_near_constant_or_not_finite():
    spread = predictions(0.8, 1)
    assert not is_collapsed(spread, STSB)
    assert is_collapsed(predictions(0.8, 1, constant=True), STSB)
    wiggle = 2.5 + np.linspace(-1, 1, ITEMS) * COLLAPSE_TOLERANCE  # SD about 3e-6 of the range 5
    assert is_collapsed(wiggle, STSB) and not is_collapsed(2.5 + np.linspace(-1, 1, ITEMS) * 1e-4, STSB)
    assert is_collapsed(spread.assign(pred=np.where(np.arange(ITEMS) == 3, np.nan, spread["pred"])), STSB)
    assert is_collapsed(np.array([1, 1, 1])) and not is_collapsed(np.array([0, 1, 1]))  # classes: one class


def test_graded_arms_that_learned_pass_the_rule():
    assert control_check("m", arm(0.8), "twin", arm(1.5), STSB) == (True, "")
    assert control_check("m", arm(0.8), "twin", arm(1.5), STSB, "spearman") == (True, "")


def test_a_collapsed_graded_run_fails_the_comparison_and_is_named():
    ok, reason = control_check("m", arm(0.8), "twin", arm(1.5, constant_seeds=(2,)), STSB)
    assert not ok and reason == "`twin`: constant predictions in 1/3 runs"
    assert failed_arms(reason) == {"twin": "constant predictions in 1/3 runs"}


def test_a_twin_whose_correlation_is_not_clearly_above_zero_fails():
    shuffled = np.random.default_rng(7)
    twin = {}
    for seed in range(3):  # predictions of other items: no correlation with the gold scores
        frame = predictions(1.0, seed)
        twin[seed] = frame.assign(pred=shuffled.permutation(frame["pred"].to_numpy()))
    ok, reason = control_check("m", arm(0.8), "twin", twin, STSB)
    assert not ok and reason.startswith("`twin`: mean test Pearson r ") and reason.endswith("not above 0")
    assert "`m`" not in reason
    one_seed = control_check("m", arm(0.8, seeds=(0,)), "twin", {0: twin[0]}, STSB)  # over items alone
    assert not one_seed[0] and "`twin`" in one_seed[1]
    assert control_check("m", arm(0.8, seeds=(0,)), "twin", arm(1.5, seeds=(0,)), STSB) == (True, "")
    assert "correlation" in rule_text(STSB) and "constant" in rule_text(STSB)


# ── gaps on correlations, and Holm over them ────────────────────────────────────────────────────


def test_the_sensitivity_t_over_seeds_is_scipys_on_per_seed_correlations():
    method, twin = arm(0.8), arm(1.2)
    reading = paired_t_over_seeds(method, twin, task=STSB)
    expected = stats.ttest_rel([pearson(method[s]) for s in method], [pearson(twin[s]) for s in twin])
    assert reading.p_value == pytest.approx(expected.pvalue) and reading.pairs == 3
    assert reading.gap == pytest.approx(np.mean([pearson(method[s]) - pearson(twin[s]) for s in method]))


def test_a_graded_gap_over_pretraining_runs_is_read_on_correlations():
    method = {
        (run, 2 * run + seed): predictions(0.8 + 0.05 * run, 10 * run + seed) for run in range(3) for seed in (0, 1)
    }
    twin = {seed: predictions(1.2, 50 + seed) for seed in range(6)}
    gaps = compare_over_pretrainings(method, twin, task=STSB)
    assert gaps.recipe.procedure == RECIPE and gaps.runs == 3 and gaps.seeds_per_run == 2
    expected = np.mean([pearson(frame) - pearson(twin[seed]) for (_, seed), frame in method.items()])
    assert gaps.recipe.gap == pytest.approx(expected, abs=1e-12)
    assert gaps.recipe.ci_low < expected < gaps.recipe.ci_high


def test_holm_adjusts_graded_p_values_in_the_results_table_as_any_others():
    gaps, rows = {}, []
    for index, noise in enumerate((1.25, 1.15, 1.0, 0.8)):
        gaps[f"m{index}"] = compare_with_twin(arm(noise), arm(1.3, seeds=(0, 1, 2)), task=STSB)
        rows += [(f"m{index}", seed, *(0.7,) * 4) for seed in range(3)]
    runs = pd.DataFrame(rows, columns=["method", "seed", *GRADED_METRICS])
    evidence = [
        Evidence(row["method"], row, gaps[row["method"]]) for row in aggregate_runs(runs, STSB).to_dict("records")
    ]
    table = results_frame(evidence, STSB)
    p_values = [gaps[method].p_value for method in gaps]
    assert table["p_adjusted"].to_numpy() == pytest.approx(holm(p_values))
    assert table["test_pearson_mean"].to_numpy() == pytest.approx(0.7) and "test_acc_mean" not in table
    assert table["gap_vs_random"].to_numpy() == pytest.approx([gaps[method].gap for method in gaps])
    assert not math.isnan(table["mde_vs_random"].iloc[0]) and table["mde_vs_random"].iloc[0] > 0
