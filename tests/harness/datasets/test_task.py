"""The task a data set declares: its metrics, what checkpoints monitor, a graded range, and that a
graded data set checks its scores."""

import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr, spearmanr

from harness.datasets.task import CLASSES, Task, graded, graded_metrics, metric_title
from harness.datasets.types import Pair, PairData


def test_classes_keep_the_metrics_every_mrpc_run_logs():
    assert CLASSES.run_metrics() == ["dev_acc", "dev_f1", "test_acc", "test_f1"]
    assert CLASSES.monitor == "dev_acc" and CLASSES.output_size(3) == 3 and not CLASSES.graded


def test_a_graded_task_monitors_pearson_and_maps_its_range_onto_the_unit_interval():
    task = graded(0, 5)
    assert task.monitor == "dev_pearson" and task.zero_shot_metric == "spearman" and task.output_size(0) == 1
    scores = np.array([0.0, 2.5, 5.0])
    assert task.scaled(scores).tolist() == [0.0, 0.5, 1.0]
    assert task.unscaled(task.scaled(scores)).tolist() == scores.tolist()


def test_a_task_refuses_a_main_metric_it_does_not_log_and_a_range_without_grades():
    with pytest.raises(ValueError, match="main_metric"):
        Task(target="classes", metrics=("acc",), main_metric="f1", baselines=())
    with pytest.raises(ValueError, match="score_range"):
        Task(target="classes", metrics=("acc",), main_metric="acc", baselines=(), score_range=(0, 1))
    with pytest.raises(ValueError, match="low must be below"):
        graded(5, 1)


def test_graded_metrics_are_scipys_and_nan_for_constant_predictions():
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 200)
    predicted = gold + rng.normal(0, 1, 200)
    metrics = graded_metrics(pd.DataFrame({"label": gold, "pred": predicted}), "test")
    assert metrics["test_pearson"] == pytest.approx(pearsonr(predicted, gold).statistic, abs=1e-12)
    assert metrics["test_spearman"] == pytest.approx(spearmanr(predicted, gold).statistic, abs=1e-12)
    constant = graded_metrics(pd.DataFrame({"label": gold, "pred": np.full(200, 2.0)}), "dev")
    assert np.isnan(constant["dev_pearson"]) and np.isnan(constant["dev_spearman"])


def test_metric_titles_name_the_split_and_the_measure():
    assert metric_title("test_pearson") == "test Pearson r" and metric_title("acc") == "accuracy"


def _graded(scores):
    pairs = [Pair(label=score, ids=(str(k),), sentence1="a", sentence2="b") for k, score in enumerate(scores)]
    return PairData(
        name="toy",
        labels=[],
        id_columns=("id",),
        train=pairs,
        dev=pairs,
        test=pairs,
        content_hash="0",
        task=graded(1, 5),
    )


def test_a_graded_data_set_has_no_label_names_and_keeps_its_scores_in_range():
    assert _graded([1.0, 3.4, 5.0]).num_classes == 0
    with pytest.raises(ValueError, match="outside"):
        _graded([0.5, 3.0])
