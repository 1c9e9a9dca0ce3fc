"""The baselines for any number of labels: class probabilities from train only, written in the
predictions contract by the finetune runs' own code."""

import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import accuracy_score, f1_score

from downstream.run.baselines import majority_baseline, tfidf_lr_baseline
from downstream.run.evaluation import PREDICTION_COLUMNS, predictions_frame, split_metrics
from harness.datasets import types as pairdata
from harness.datasets.registry import load_pair_data
from tests.pair_files import write_three_label_set


@dataclass
class Pair:
    label: int
    id1: str
    id2: str
    sentence1: str
    sentence2: str


def as_pair_data(train: list[Pair], evaluation: list[Pair]) -> pairdata.PairData:
    """Toy MRPC-style pairs as a 2-label data set (labels "0", "1"; ids id1, id2)."""

    def convert(pairs):
        return [pairdata.Pair(p.label, (p.id1, p.id2), p.sentence1, p.sentence2) for p in pairs]

    return pairdata.PairData(
        "toy", ["0", "1"], ("id1", "id2"), convert(train), convert(evaluation), convert(evaluation), "hash"
    )


def frame_of(data: pairdata.PairData, probabilities: np.ndarray) -> pd.DataFrame:
    return predictions_frame(data, data.dev, probabilities)


TOPICS = [
    "the company reported strong quarterly profit growth",
    "police arrested two men after the bank robbery downtown",
    "the senate passed the new budget bill on tuesday",
    "scientists discovered a new species of frog in brazil",
    "the team won the championship after a long season",
    "heavy rain caused flooding across the northern region",
    "the airline cancelled hundreds of flights because of the strike",
    "shares of the software maker fell sharply in early trading",
    "the president met foreign leaders at the summit in paris",
    "the hospital opened a new cancer treatment center",
    "investors worried about rising interest rates this week",
    "the museum unveiled a rare painting by a dutch master",
]
REWORDINGS = ["{} , officials said .", "officials said {} .", "{} according to reports .", "on monday {} ."]


def toy_pairs(offset: int, count: int) -> list[Pair]:
    """Paraphrases reuse the topic's words; non-paraphrases pair two different topics. 2/3 positive."""
    pairs = []
    for index in range(offset, offset + count):
        topic = TOPICS[index % len(TOPICS)]
        positive = index % 3 != 0
        other = topic if positive else TOPICS[(index * 5 + 1) % len(TOPICS)]
        if other == topic and not positive:
            other = TOPICS[(index + 1) % len(TOPICS)]
        sentence2 = REWORDINGS[index % len(REWORDINGS)].format(other)
        pairs.append(Pair(int(positive), f"a{index}", f"b{index}", topic, sentence2))
    return pairs


def test_majority_baseline_predicts_train_majority():
    train = toy_pairs(0, 30)  # 20 positive, 10 negative
    evaluation = {"dev": toy_pairs(100, 12), "test": toy_pairs(200, 9)}
    results = majority_baseline(train, evaluation, num_classes=2)
    assert set(results) == {"dev", "test"}
    for name, probabilities in results.items():
        assert probabilities.shape == (len(evaluation[name]), 2)
        assert np.allclose(probabilities, [10 / 30, 20 / 30])
        data = as_pair_data(train, evaluation[name])
        frame = frame_of(data, probabilities)
        assert list(frame.columns) == PREDICTION_COLUMNS
        assert (frame["pred"] == "1").all() and np.allclose(frame["prob"], 20 / 30)
        assert frame["id1"].tolist() == [pair.id1 for pair in evaluation[name]]
        labels = [str(pair.label) for pair in evaluation[name]]
        assert split_metrics(frame, name, data) == {
            f"{name}_acc": pytest.approx(accuracy_score(labels, frame["pred"])),
            f"{name}_f1": pytest.approx(f1_score(labels, frame["pred"], pos_label="1")),
        }

    negative_train = [Pair(0, "x", "y", "a", "b")] * 3 + [Pair(1, "x", "z", "a", "a")]
    probabilities = majority_baseline(negative_train, {"dev": train}, num_classes=2)["dev"]
    data = as_pair_data(negative_train, train)
    frame = frame_of(data, probabilities)
    assert (frame["pred"] == "0").all()
    assert split_metrics(frame, "dev", data) == {"dev_acc": pytest.approx(1 / 3), "dev_f1": 0.0}


def test_majority_tie_goes_to_the_positive_class():
    train = [Pair(0, "a", "b", "x", "y"), Pair(1, "c", "d", "x", "x")]
    probabilities = majority_baseline(train, {"dev": train}, num_classes=2)["dev"]
    assert (frame_of(as_pair_data(train, train), probabilities)["pred"] == "1").all()


@pytest.mark.slow
def test_tfidf_lr_beats_majority_on_toy_pairs():
    train, dev = toy_pairs(0, 90), toy_pairs(1000, 60)
    data = as_pair_data(train, dev)
    tfidf = frame_of(data, tfidf_lr_baseline(train, {"dev": dev}, num_classes=2, seed=0)["dev"])
    majority = frame_of(data, majority_baseline(train, {"dev": dev}, num_classes=2)["dev"])
    assert list(tfidf.columns) == PREDICTION_COLUMNS
    assert tfidf["prob"].between(0, 1).all()
    assert (tfidf["pred"] == np.where(tfidf["prob"] >= 0.5, "1", "0")).all()
    assert split_metrics(tfidf, "dev", data)["dev_acc"] > split_metrics(majority, "dev", data)["dev_acc"] + 0.2
    again = frame_of(data, tfidf_lr_baseline(train, {"dev": dev}, num_classes=2, seed=0)["dev"])
    pd.testing.assert_frame_equal(tfidf, again)


def test_tfidf_lr_needs_two_classes():
    with pytest.raises(ValueError):
        tfidf_lr_baseline([pair for pair in toy_pairs(0, 30) if pair.label == 1], {"dev": toy_pairs(0, 3)})


@pytest.fixture(scope="module")
def three_labels(tmp_path_factory) -> pairdata.PairData:
    paths = write_three_label_set(tmp_path_factory.mktemp("nli3"), sizes=(150, 60, 60))
    return load_pair_data(dataset="tsv", train=paths["train"], dev=paths["dev"], test=paths["test"])


def test_majority_with_three_labels_predicts_the_most_frequent_label(three_labels):
    train = three_labels.train[:-2]  # two pairs fewer: the label counts are no longer all equal
    counts = np.bincount([pair.label for pair in train], minlength=3)
    probabilities = majority_baseline(train, {"dev": three_labels.dev}, num_classes=3)["dev"]
    assert np.allclose(probabilities, counts / counts.sum())
    frame = predictions_frame(three_labels, three_labels.dev, probabilities)
    assert list(frame.columns) == [
        "id",
        "label",
        "prob_contradiction",
        "prob_entailment",
        "prob_neutral",
        "pred",
        "sentence1",
        "sentence2",
    ]
    assert (frame["pred"] == three_labels.labels[int(np.argmax(counts))]).all()


@pytest.mark.slow
def test_tfidf_lr_with_three_labels(three_labels):
    probabilities = tfidf_lr_baseline(
        three_labels.train, {"dev": three_labels.dev, "test": three_labels.test}, num_classes=3, seed=0
    )
    for split, scores in probabilities.items():
        assert scores.shape == (60, 3) and np.allclose(scores.sum(axis=1), 1.0)
        frame = predictions_frame(three_labels, three_labels.split(split), scores)
        assert (frame["pred"] == np.array(three_labels.labels)[scores.argmax(axis=1)]).all()
        metrics = split_metrics(frame, split, three_labels)
        assert metrics[f"{split}_f1"] == pytest.approx(f1_score(frame["label"], frame["pred"], average="macro"))
        assert metrics[f"{split}_acc"] > 0.5  # chance is 1/3: the lexical features carry the label


def read_glue(path: Path) -> list[Pair]:
    frame = pd.read_csv(path, sep="\t", quoting=csv.QUOTE_NONE, encoding="utf-8-sig", dtype=str, keep_default_na=False)
    return [Pair(int(row[0]), row[1], row[2], row[3], row[4]) for row in frame.itertuples(index=False)]


MRPC_DIR = Path(os.environ.get("MRPC_DIR", "/work/shared/data/mrpc"))
HAS_GLUE = "MRPC_DIR" in os.environ and (MRPC_DIR / "train.tsv").is_file() and (MRPC_DIR / "dev.tsv").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_GLUE, reason="set MRPC_DIR to a folder with the GLUE train.tsv and dev.tsv")
def test_baselines_on_real_mrpc_dev():
    train, dev = read_glue(MRPC_DIR / "train.tsv"), read_glue(MRPC_DIR / "dev.tsv")
    assert (len(train), len(dev)) == (3668, 408)
    data = as_pair_data(train, dev)
    majority = split_metrics(frame_of(data, majority_baseline(train, {"dev": dev})["dev"]), "dev", data)
    tfidf = split_metrics(frame_of(data, tfidf_lr_baseline(train, {"dev": dev}, seed=0)["dev"]), "dev", data)
    assert majority["dev_acc"] == 279 / 408
    assert tfidf["dev_acc"] >= 0.70
    assert tfidf["dev_f1"] >= majority["dev_f1"] - 0.01
