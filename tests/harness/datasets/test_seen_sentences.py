"""What an encoder has read: digests of its pretraining text, equal for sentences a model sees alike,
carried over a continued run, and read back by a transfer run to find the pairs it has seen."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
from mlflow.tracking import MlflowClient
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score

from downstream.run.evaluation import unseen_metrics
from harness.datasets import seen_sentences
from harness.datasets.task import graded
from harness.tracking.seen_text import encoder_seen_text, log_seen_text


def test_sentences_a_model_sees_alike_have_one_digest():
    assert seen_sentences.digest("The  Cat sat.") == seen_sentences.digest("the cat sat.")
    assert seen_sentences.digest("the cat sat.") != seen_sentences.digest("the cat sat!")
    values = seen_sentences.digests(["a b", "A  B", "c"])
    assert values.dtype == np.uint64 and len(values) == 2 and np.all(np.diff(values.astype(np.float64)) > 0)


def test_a_pair_is_seen_when_either_sentence_was_read():
    seen = seen_sentences.digests(["Read once.", "also read"])
    mask = seen_sentences.seen_pairs(["read once.", "new", "new"], ["new", "ALSO read", "newer"], seen)
    assert mask.tolist() == [True, True, False]


def test_digests_round_trip_through_a_file_without_pickles(tmp_path):
    values = seen_sentences.merged(seen_sentences.digests(["x"]), seen_sentences.digests(["y", "x"]))
    assert len(values) == 2
    assert np.array_equal(seen_sentences.read(seen_sentences.write(tmp_path, values)), values)


def test_a_continued_run_holds_what_its_first_stage_read_and_params_say_none(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.create_experiment("seen", artifact_location=str(tmp_path / "artifacts"))
    first, second, old = (client.create_run(experiment).info.run_id for _ in range(3))
    assert log_seen_text(client, first, ["general text.", "More text."]) == 2
    assert log_seen_text(client, second, ["task text.", "more TEXT."], continued_run=first) == 3
    read = encoder_seen_text(client, second)
    assert np.array_equal(read, seen_sentences.digests(["general text.", "more text.", "task text."]))
    client.log_param(old, "contamination_stsb_dev", "0")  # a run from before the digests: its counts
    client.log_param(old, "contamination_stsb_test", "0")
    client.log_param(old, "contamination_mrpc_dev", "0")
    client.log_param(old, "contamination_mrpc_test", "244")
    assert encoder_seen_text(client, old, "stsb").size == 0
    assert encoder_seen_text(client, old, "mrpc") is None and encoder_seen_text(client, old, "sick-r") is None
    assert encoder_seen_text(client, None, "stsb") is None  # a published encoder: nothing known


def test_scores_without_the_seen_pairs_equal_sklearn_and_scipy_on_the_rest():
    rng = np.random.default_rng(0)
    sentences1 = [f"left {k}" for k in range(40)]
    sentences2 = [f"right {k}" for k in range(40)]
    seen = seen_sentences.digests(sentences1[:7] + sentences2[30:33])
    labels = rng.choice(["paraphrase", "other"], 40)
    predicted = np.where(rng.random(40) < 0.7, labels, "other")
    frame = pd.DataFrame({"label": labels, "pred": predicted, "sentence1": sentences1, "sentence2": sentences2})
    data = SimpleNamespace(task=SimpleNamespace(target="classes"), f1_average="binary", positive_label="paraphrase")
    results = unseen_metrics({"test": frame}, seen, data)
    rest = frame.drop(index=[*range(7), 30, 31, 32])
    assert results["test_seen_pairs"] == 10
    assert results["test_acc_unseen"] == pytest.approx(accuracy_score(rest["label"], rest["pred"]))
    assert results["test_f1_unseen"] == pytest.approx(f1_score(rest["label"], rest["pred"], pos_label="paraphrase"))

    gold = rng.random(40) * 5
    scores = pd.DataFrame(
        {"label": gold, "pred": gold + rng.random(40), "sentence1": sentences1, "sentence2": sentences2}
    )
    data.task = graded(0, 5)
    results = unseen_metrics({"dev": scores}, seen, data)
    rest = scores.drop(index=[*range(7), 30, 31, 32])
    assert results["dev_pearson_unseen"] == pytest.approx(pearsonr(rest["label"], rest["pred"])[0])
    assert results["dev_spearman_unseen"] == pytest.approx(spearmanr(rest["label"], rest["pred"])[0])
    assert unseen_metrics({"test": scores}, np.empty(0, np.uint64), data) == {"test_seen_pairs": 0}
