"""A correlation's per-item scores against references: Pearson and Spearman (and each leave-one-out
value) equal scipy's, the pseudo-values' mean is the jackknife estimate computed by refitting, the
centred scores' mean is the run's correlation, and a gap's CI matches a bootstrap over items."""

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from benchmarks.stats import jackknife
from benchmarks.stats.gaps import CROSSED, compare_with_baseline, compare_with_twin
from benchmarks.stats.pairing import item_scores, paired_scores
from harness.datasets.task import CLASSES, graded
from tests.benchmarks.stats_inputs import frame

STSB = graded(0, 5)
REFERENCES = {"pearson": stats.pearsonr, "spearman": stats.spearmanr}


def gold_and_predictions(items: int, seed: int, ties: bool):
    """Gold scores on STS-B's 0-5 range (in steps of 0.2 with ties) and noisy predictions of them."""
    generator = np.random.default_rng(seed)
    gold = np.clip(2.5 + 1.3 * generator.standard_normal(items), 0, 5)
    if ties:
        gold = np.round(gold * 5) / 5
    predicted = gold + generator.normal(0, 1.2, items)
    return gold, np.round(predicted, 1) if ties else predicted


@pytest.mark.parametrize("metric", ["pearson", "spearman"])
@pytest.mark.parametrize("items, ties", [(5, False), (40, True), (251, True), (300, False)])
def test_correlation_and_every_leave_one_out_value_equal_scipys(metric, items, ties):
    gold, predicted = gold_and_predictions(items, items, ties)
    reference = REFERENCES[metric]
    assert jackknife.correlation(predicted, gold, metric) == pytest.approx(
        reference(predicted, gold).statistic, abs=1e-12
    )
    refitted = [reference(np.delete(predicted, i), np.delete(gold, i)).statistic for i in range(items)]
    np.testing.assert_allclose(jackknife.leave_one_out(predicted, gold, metric), refitted, atol=1e-12)


@pytest.mark.parametrize("metric", ["pearson", "spearman"])
def test_the_pseudo_values_mean_is_the_jackknife_estimate_and_the_item_scores_mean_the_correlation(metric):
    gold, predicted = gold_and_predictions(120, 3, ties=True)
    n = gold.size
    whole = REFERENCES[metric](predicted, gold).statistic
    refitted = np.array([REFERENCES[metric](np.delete(predicted, i), np.delete(gold, i)).statistic for i in range(n)])
    jackknife_estimate = n * whole - (n - 1) * refitted.mean()  # Quenouille's bias-corrected estimate
    pseudo = jackknife.pseudo_values(predicted, gold, metric)
    assert pseudo.mean() == pytest.approx(jackknife_estimate, abs=1e-12)
    jackknife_variance = (n - 1) / n * ((refitted - refitted.mean()) ** 2).sum()  # Tukey's
    assert pseudo.var(ddof=1) / n == pytest.approx(jackknife_variance, rel=1e-9)
    scores = jackknife.item_scores(predicted, gold, metric)
    assert scores.mean() == pytest.approx(whole, abs=1e-12)
    np.testing.assert_allclose(scores - scores.mean(), pseudo - pseudo.mean(), atol=1e-9)  # the same spread


def test_pearson_takes_leading_batch_axes_and_a_constant_run_has_no_correlation():
    gold, predicted = gold_and_predictions(50, 5, ties=False)
    batch = np.stack([predicted, 2 * predicted + 1, -predicted])  # (3, N)
    scores = jackknife.item_scores(batch, gold)
    np.testing.assert_allclose(scores[0], scores[1], atol=1e-12)  # invariant to an affine map
    np.testing.assert_allclose(scores[2], -scores[0], atol=1e-12)
    ranked = jackknife.item_scores(batch, gold, "spearman")  # one vector at a time
    np.testing.assert_allclose(ranked[1], jackknife.item_scores(predicted, gold, "spearman"), atol=1e-12)
    assert np.isnan(jackknife.item_scores(np.full(50, 2.5), gold)).all()


def graded_frame(predicted, gold, ids=None) -> pd.DataFrame:
    ids = [f"pair{index}" for index in range(len(gold))] if ids is None else ids
    return pd.DataFrame({"id": ids, "label": gold, "pred": predicted})


def test_the_task_decides_what_an_item_scores():
    gold, predicted = gold_and_predictions(60, 7, ties=True)
    table = graded_frame(predicted, gold)
    assert item_scores(table, STSB).mean() == pytest.approx(stats.pearsonr(predicted, gold).statistic)
    assert item_scores(table, STSB, "spearman").mean() == pytest.approx(stats.spearmanr(predicted, gold).statistic)
    classes = frame([True, False, True, True])
    np.testing.assert_array_equal(item_scores(classes, CLASSES), [1.0, 0.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="pairs on pearson or spearman, not 'acc'"):
        item_scores(table, STSB, "acc")
    with pytest.raises(ValueError, match="pairs on acc, not 'f1'"):
        item_scores(classes, CLASSES, "f1")


def test_a_graded_gap_is_the_difference_of_the_mean_per_seed_correlations_whatever_the_row_order():
    generator = np.random.default_rng(11)
    gold = np.round(np.clip(2.5 + 1.3 * generator.standard_normal(200), 0, 5) * 5) / 5
    method, twin = {}, {}
    for seed in (1, 2, 3):
        order = generator.permutation(200)  # each run writes its rows in its own order
        ids = np.array([f"pair{index}" for index in range(200)])
        method[seed] = graded_frame(gold + generator.normal(0, 1.0, 200), gold, ids).iloc[order]
        twin[seed] = graded_frame(gold + generator.normal(0, 2.0, 200), gold, ids)
    for metric, reference in REFERENCES.items():
        expected = np.mean(
            [
                reference(method[s]["pred"], method[s]["label"]).statistic
                - reference(twin[s]["pred"], twin[s]["label"]).statistic
                for s in method
            ]
        )
        gap = compare_with_twin(method, twin, task=STSB, metric=metric)
        assert gap.procedure == CROSSED and (gap.seeds, gap.items) == (3, 200)
        assert gap.gap == pytest.approx(expected, abs=1e-12)
        assert gap.ci_low < gap.gap < gap.ci_high and 0 < gap.p_value < 1
    seeds, scores, _ = paired_scores(method, twin, task=STSB)
    assert seeds == [1, 2, 3] and scores.shape == (3, 200)


def test_a_gap_over_items_alone_matches_a_bootstrap_over_items():
    """Two deterministic systems (the same predictions at every seed, as a baseline against a
    deterministic method): seeds add nothing, so the crossed test's CI is the jackknife one over items,
    and a percentile bootstrap of the difference of the two Pearson correlations over resampled
    items gives the same interval within a tenth of its half-width."""
    generator = np.random.default_rng(23)
    items = 400
    gold = np.clip(2.5 + 1.3 * generator.standard_normal(items), 0, 5)
    shared = generator.normal(0, 0.8, items)  # items both systems find hard
    first = gold + shared + generator.normal(0, 0.7, items)
    second = gold + shared + generator.normal(0, 1.1, items)
    runs = {seed: graded_frame(first, gold) for seed in range(3)}
    gap = compare_with_baseline(runs, graded_frame(second, gold), task=STSB)
    resamples = generator.integers(0, items, (4000, items))  # (B, N)
    differences = jackknife.correlation(first[resamples], gold[resamples]) - jackknife.correlation(
        second[resamples], gold[resamples]
    )
    low, high = np.quantile(differences, [0.025, 0.975])
    half_width = (gap.ci_high - gap.ci_low) / 2
    assert gap.gap == pytest.approx(stats.pearsonr(first, gold).statistic - stats.pearsonr(second, gold).statistic)
    assert gap.ci_low == pytest.approx(low, abs=0.1 * half_width)
    assert gap.ci_high == pytest.approx(high, abs=0.1 * half_width)
    assert gap.standard_error == pytest.approx(differences.std(ddof=1), rel=0.08)
