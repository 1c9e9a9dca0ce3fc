"""Aggregation of runs over seeds (mean, std, min, max per method), MLflow column names, collapse."""

import math

import numpy as np
import pandas as pd
import pytest

from benchmarks.stats.aggregate import METRICS, aggregate_runs, is_collapsed, runs_table
from tests.benchmarks.stats_inputs import make_runs


def test_aggregate_runs_mean_std_min_max_of_distinct_values():
    runs = make_runs()
    runs.loc[1, "test_acc"] = 0.9  # elmo test_acc: 0.65, 0.9, 0.75 — mean, median and midrange all differ
    table = aggregate_runs(runs)
    assert list(table["method"]) == ["elmo", "random"]
    elmo = table.set_index("method").loc["elmo"]
    assert elmo["n_seeds"] == 3
    assert (elmo["dev_acc_mean"], elmo["dev_acc_std"]) == (pytest.approx(0.7), pytest.approx(0.1))
    assert (elmo["dev_acc_min"], elmo["dev_acc_max"]) == (pytest.approx(0.6), pytest.approx(0.8))
    assert elmo["test_acc_mean"] == pytest.approx(2.3 / 3)
    assert elmo["test_acc_std"] == pytest.approx(
        math.sqrt(((0.65 - 2.3 / 3) ** 2 + (0.9 - 2.3 / 3) ** 2 + (0.75 - 2.3 / 3) ** 2) / 2)
    )
    assert (elmo["test_acc_min"], elmo["test_acc_max"]) == (pytest.approx(0.65), pytest.approx(0.9))
    assert (elmo["test_f1_mean"], elmo["test_f1_std"]) == (pytest.approx(0.8), pytest.approx(0.05))


def test_aggregate_runs_single_seed_has_zero_std_and_first_appearance_order():
    table = aggregate_runs(make_runs().iloc[::-1].reset_index(drop=True))
    assert list(table["method"]) == ["random", "elmo"]
    single = table.set_index("method").loc["random"]
    assert single["n_seeds"] == 1
    for metric in METRICS:
        assert single[f"{metric}_std"] == 0.0
        assert single[f"{metric}_min"] == single[f"{metric}_max"] == single[f"{metric}_mean"]


def test_runs_table_renames_mlflow_columns():
    raw = make_runs().rename(columns={"method": "tags.method", "seed": "tags.seed"})
    raw = raw.rename(columns={metric: f"metrics.{metric}" for metric in METRICS})
    raw["tags.seed"] = raw["tags.seed"].astype(str)
    raw["run_id"] = [f"run{index}" for index in range(len(raw))]
    raw = pd.concat([raw, pd.DataFrame([{"run_id": "parent", "tags.method": None}])], ignore_index=True)
    table = runs_table(raw)
    assert list(table.columns) == ["run_id", "method", "seed"] + METRICS
    assert table["seed"].tolist() == [0, 1, 2, 0]
    assert table["dev_acc"].tolist() == pytest.approx([0.6, 0.7, 0.8, 0.684])
    pd.testing.assert_frame_equal(aggregate_runs(raw), aggregate_runs(make_runs()))


def test_is_collapsed():
    assert is_collapsed(np.ones(10, dtype=int)) and is_collapsed(pd.DataFrame({"pred": [0, 0, 0]}))
    assert not is_collapsed([0, 1, 1]) and not is_collapsed(pd.DataFrame({"pred": [1, 0]}))
