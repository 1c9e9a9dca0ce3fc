"""One run's 95% intervals over its test items: Wilson's for accuracy (against statsmodels, an
independent implementation), a seeded bootstrap over the items for F1 (each replicate is sklearn's
F1 of a resample), and the line the finetune summary prints beside its references."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import f1_score
from statsmodels.stats.proportion import proportion_confint

from downstream.run.item_intervals import (
    RESAMPLES,
    accuracy_interval,
    correlation_interval,
    correlation_line,
    correlation_replicates,
    f1_interval,
    f1_replicates,
    interval_line,
)
from downstream.run.summary_comparisons import context_lines


@pytest.mark.parametrize("correct, items", [(1228, 1725), (3, 10), (0, 50), (408, 408)])
def test_the_accuracy_interval_is_wilsons(correct, items):
    expected = proportion_confint(correct, items, alpha=0.05, method="wilson")
    assert accuracy_interval(correct, items) == pytest.approx(expected, abs=1e-9)


def predictions(items: int, classes: list[str], accuracy: float, seed: int = 1) -> pd.DataFrame:
    generator = np.random.default_rng(seed)
    labels = generator.choice(classes, size=items)
    wrong = generator.random(items) > accuracy
    predicted = np.where(wrong, generator.choice(classes, size=items), labels)
    return pd.DataFrame({"label": labels, "pred": predicted})


@pytest.mark.parametrize("classes, positive", [(["0", "1"], "1"), (["a", "b", "c"], None)])
def test_each_bootstrap_replicate_is_sklearns_f1_of_a_resample_of_the_items(classes, positive):
    frame = predictions(300, classes, 0.7)
    labels, predicted = frame["label"].to_numpy(), frame["pred"].to_numpy()
    replicates = f1_replicates(labels, predicted, positive, resamples=20, seed=5)
    generator = np.random.default_rng(5)  # the same draws: counts of each item in a resample
    counts = generator.multinomial(len(frame), np.full(len(frame), 1 / len(frame)), size=20)
    for replicate, count in zip(replicates, counts):
        chosen = np.repeat(np.arange(len(frame)), count)
        average = "binary" if positive else "macro"
        expected = f1_score(
            labels[chosen], predicted[chosen], average=average, pos_label=positive or 1, zero_division=0
        )
        assert replicate == pytest.approx(expected, abs=1e-12)


def test_the_f1_interval_is_seeded_holds_the_estimate_and_narrows_with_more_items():
    small, large = predictions(200, ["0", "1"], 0.75), predictions(5000, ["0", "1"], 0.75)
    low, high = f1_interval(small, "1")
    estimate = f1_score(small["label"], small["pred"], pos_label="1")
    assert low < estimate < high and f1_interval(small, "1") == (low, high)
    large_low, large_high = f1_interval(large, "1")
    assert large_high - large_low < (high - low) / 3


def test_the_summary_gives_the_interval_beside_the_references():
    frame = predictions(1725, ["0", "1"], 0.7)
    line = interval_line(frame, "1")
    results = {"test_acc": 0.7, "test_f1": 0.8}
    scores = {"majority": {"test_acc": 0.665, "test_f1": 0.799}, "tfidf-lr": {"test_acc": 0.72, "test_f1": 0.81}}
    lines = context_lines(results, scores, None, False, "", "MSR test", "--model.encoder=random", interval=line)
    assert lines[1].endswith("this run") and lines[2].strip() == line
    assert "majority class" in lines[3]
    assert line.startswith("95% interval over these pairs: acc ") and f"(bootstrap ×{RESAMPLES})" in line
    assert all(len(text) <= 120 for text in lines[:3])


# ── a graded run: a bootstrap of its correlations, no Wilson interval ───────────────────────


def scored(items: int, noise: float, seed: int = 2) -> pd.DataFrame:
    generator = np.random.default_rng(seed)
    gold = generator.uniform(0, 5, size=items)
    return pd.DataFrame({"label": gold, "pred": gold + generator.normal(0, noise, size=items)})


@pytest.mark.parametrize("metric, reference", [("pearson", pearsonr), ("spearman", spearmanr)])
def test_each_correlation_replicate_is_scipys_correlation_of_a_resample_of_the_items(metric, reference):
    frame = scored(50, 2.0)
    gold, predicted = frame["label"].to_numpy(), frame["pred"].to_numpy()
    replicates = correlation_replicates(gold, predicted, metric, resamples=20, seed=5)
    generator = np.random.default_rng(5)  # the same draws: the items of each resample
    for replicate in replicates:
        chosen = generator.integers(0, len(frame), size=len(frame))
        assert replicate == pytest.approx(reference(predicted[chosen], gold[chosen]).statistic, abs=1e-12)


def test_the_correlation_interval_holds_the_estimate_and_narrows_with_more_items():
    small, large = scored(100, 2.0), scored(3000, 2.0)
    low, high = correlation_interval(small, "pearson")
    assert low < pearsonr(small["pred"], small["label"]).statistic < high
    large_low, large_high = correlation_interval(large, "pearson")
    assert large_high - large_low < (high - low) / 3


def test_a_graded_runs_line_is_a_bootstrap_of_its_correlations_not_a_wilson_interval():
    line = correlation_line(scored(200, 1.0))
    assert line.startswith("95% interval over these pairs: Pearson r ") and "Spearman ρ" in line
    assert "Wilson" not in line and "acc" not in line
    constant = pd.DataFrame({"label": [1.0, 2.0, 3.0], "pred": [2.0, 2.0, 2.0]})
    assert correlation_interval(constant, "pearson") != correlation_interval(constant, "pearson")  # NaN: none
