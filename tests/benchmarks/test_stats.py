import math

import numpy as np
import pandas as pd
import pytest

from benchmarks.stats import (
    METRICS,
    aggregate_runs,
    is_collapsed,
    mcnemar_pvalue,
    paired_bootstrap_pvalue,
    pvalues_vs_control,
    results_table,
    runs_table,
)


def make_runs() -> pd.DataFrame:
    rows = [
        ("elmo", 0, 0.6, 0.70, 0.65, 0.75),
        ("elmo", 1, 0.7, 0.80, 0.70, 0.80),
        ("elmo", 2, 0.8, 0.90, 0.75, 0.85),
        ("random", 0, 0.684, 0.812, 0.665, 0.799),
    ]
    return pd.DataFrame(rows, columns=["method", "seed"] + METRICS)


def test_aggregate_runs_mean_std_min_max():
    table = aggregate_runs(make_runs())
    assert list(table["method"]) == ["elmo", "random"]
    elmo = table.set_index("method").loc["elmo"]
    assert elmo["n_seeds"] == 3
    assert elmo["dev_acc_mean"] == pytest.approx(0.7)
    assert elmo["dev_acc_std"] == pytest.approx(0.1)
    assert elmo["dev_acc_min"] == pytest.approx(0.6)
    assert elmo["dev_acc_max"] == pytest.approx(0.8)
    assert elmo["test_f1_mean"] == pytest.approx(0.8)
    assert elmo["test_f1_std"] == pytest.approx(0.05)


def test_aggregate_runs_single_seed_has_zero_std_and_first_appearance_order():
    runs = make_runs().iloc[::-1].reset_index(drop=True)
    table = aggregate_runs(runs)
    assert list(table["method"]) == ["random", "elmo"]
    single = table.set_index("method").loc["random"]
    assert single["n_seeds"] == 1
    for metric in METRICS:
        assert single[f"{metric}_std"] == 0.0
        assert single[f"{metric}_min"] == single[f"{metric}_max"] == single[f"{metric}_mean"]
    assert not table.drop(columns="method").isna().any().any()


def test_runs_table_renames_mlflow_columns():
    runs = make_runs()
    raw = runs.rename(columns={"method": "tags.method", "seed": "tags.seed"})
    raw = raw.rename(columns={metric: f"metrics.{metric}" for metric in METRICS})
    raw["tags.seed"] = raw["tags.seed"].astype(str)
    raw["run_id"] = [f"run{index}" for index in range(len(raw))]
    raw["metrics.train_loss"] = 1.0
    parent = {"run_id": "parent", "tags.method": None}
    raw = pd.concat([raw, pd.DataFrame([parent])], ignore_index=True)
    table = runs_table(raw)
    assert list(table.columns) == ["run_id", "method", "seed"] + METRICS
    assert len(table) == 4
    assert table["seed"].tolist() == [0, 1, 2, 0]
    assert table["dev_acc"].tolist() == pytest.approx([0.6, 0.7, 0.8, 0.684])
    pd.testing.assert_frame_equal(aggregate_runs(raw), aggregate_runs(runs))


def test_results_table_columns_and_pvalues():
    table = results_table(make_runs(), {"elmo": 0.01, "random": float("nan")})
    expected = ["method", "n_seeds"]
    for metric in ["dev_acc", "dev_f1", "test_acc", "test_f1"]:
        expected += [f"{metric}_{statistic}" for statistic in ["mean", "std", "min", "max"]]
    assert list(table.columns) == expected + ["p_value_vs_random"]
    pvalues = table.set_index("method")["p_value_vs_random"]
    assert pvalues["elmo"] == 0.01
    assert math.isnan(pvalues["random"])


@pytest.mark.parametrize("test", [mcnemar_pvalue, paired_bootstrap_pvalue])
def test_identical_predictions_give_p_one(test):
    labels = np.array([0, 1, 1, 0, 1, 0, 1, 1])
    predictions = np.array([0, 1, 0, 0, 1, 1, 1, 0])
    assert test(labels, predictions, predictions.copy()) == 1.0


@pytest.mark.parametrize("test", [mcnemar_pvalue, paired_bootstrap_pvalue])
def test_clear_win_is_significant(test):
    labels = np.tile([0, 1], 100)  # (200,)
    perfect = labels.copy()
    half_right = labels.copy()
    half_right[:100] = 1 - half_right[:100]
    assert test(labels, perfect, half_right) < 0.001


@pytest.mark.parametrize("test", [mcnemar_pvalue, paired_bootstrap_pvalue])
def test_tiny_difference_is_not_significant(test):
    labels = np.array([1, 0, 1, 1, 0, 1, 0, 0, 1, 1])
    pred_a = labels.copy()
    pred_b = labels.copy()
    pred_a[0] = 1 - pred_a[0]  # A wrong once
    pred_b[1] = 1 - pred_b[1]  # B wrong on another item
    pred_b[2] = 1 - pred_b[2]  # and on a third
    assert test(labels, pred_a, pred_b) > 0.3


def test_mcnemar_matches_hand_computed_binomial():
    # 8 items only A gets right, 2 only B: p = 2 * (C(10,0) + C(10,1) + C(10,2)) / 2**10
    labels = np.ones(12, dtype=int)
    pred_a = np.array([1] * 8 + [0] * 2 + [1, 0])
    pred_b = np.array([0] * 8 + [1] * 2 + [1, 0])
    assert mcnemar_pvalue(labels, pred_a, pred_b) == pytest.approx(2 * (1 + 10 + 45) / 1024)
    assert mcnemar_pvalue(labels, pred_b, pred_a) == pytest.approx(112 / 1024)


def test_bootstrap_is_reproducible_with_seed():
    generator = np.random.default_rng(1)
    labels = generator.integers(0, 2, 100)
    pred_a = np.where(generator.random(100) < 0.75, labels, 1 - labels)
    pred_b = np.where(generator.random(100) < 0.7, labels, 1 - labels)
    first = paired_bootstrap_pvalue(labels, pred_a, pred_b, n_resamples=2000, seed=3)
    assert first == paired_bootstrap_pvalue(labels, pred_a, pred_b, n_resamples=2000, seed=3)
    assert 0.0 < first <= 1.0


def test_paired_tests_reject_length_mismatch():
    with pytest.raises(ValueError):
        mcnemar_pvalue([0, 1], [0, 1], [0])


def test_is_collapsed():
    assert is_collapsed(np.ones(10, dtype=int))
    assert is_collapsed(pd.DataFrame({"pred": [0, 0, 0]}))
    assert not is_collapsed([0, 1, 1])
    assert not is_collapsed(pd.DataFrame({"pred": [1, 0]}))


def predictions(ids, labels, preds) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "id1": [first for first, _ in ids],
            "id2": [second for _, second in ids],
            "label": labels,
            "prob": np.asarray(preds, dtype=float),
            "pred": preds,
        }
    )


def test_pvalues_vs_control_control_nan_and_aligns_on_ids():
    ids = [(index, index + 1000) for index in range(40)]
    labels = [index % 2 for index in range(40)]
    control = predictions(ids, labels, [1] * 40)  # right on 20
    strong = predictions(ids, labels, labels)  # right on 40
    shuffled = strong.sample(frac=1.0, random_state=0).reset_index(drop=True)
    pvalues = pvalues_vs_control({"random": [control, control], "elmo": [strong, shuffled]}, control="random")
    assert math.isnan(pvalues["random"])
    assert pvalues["elmo"] == pytest.approx(mcnemar_pvalue(labels, labels, [1] * 40))
    assert pvalues["elmo"] < 0.001
    bootstrap = pvalues_vs_control({"random": [control], "elmo": [strong]}, control="random", test="bootstrap")
    assert bootstrap["elmo"] < 0.001


def test_pvalues_vs_control_rejects_mismatched_ids():
    labels = [0, 1, 1]
    control = predictions([(1, 2), (3, 4), (5, 6)], labels, [1, 1, 1])
    other = predictions([(1, 2), (3, 4), (7, 8)], labels, [0, 1, 1])
    with pytest.raises(ValueError):
        pvalues_vs_control({"random": [control], "elmo": [other]}, control="random")
    with pytest.raises(ValueError):
        pvalues_vs_control({"elmo": [other]}, control="random")
