import csv
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.baselines import majority_baseline, metrics_from_predictions, tfidf_lr_baseline

COLUMNS = ["id1", "id2", "label", "prob", "pred"]


@dataclass
class Pair:
    label: int
    id1: str
    id2: str
    sentence1: str
    sentence2: str


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
    results = majority_baseline(train, evaluation)
    assert set(results) == {"dev", "test"}
    for name, frame in results.items():
        assert list(frame.columns) == COLUMNS
        assert len(frame) == len(evaluation[name])
        assert (frame["pred"] == 1).all()
        assert np.allclose(frame["prob"], 20 / 30)
        assert frame["id1"].tolist() == [pair.id1 for pair in evaluation[name]]
        positives = sum(pair.label for pair in evaluation[name])  # every pair predicted positive:
        true_positive, false_positive = positives, len(frame) - positives  # no false negatives
        assert metrics_from_predictions(frame) == {
            "acc": pytest.approx(positives / len(frame)),
            "f1": pytest.approx(2 * true_positive / (2 * true_positive + false_positive)),
        }

    negative_train = [Pair(0, "x", "y", "a", "b")] * 3 + [Pair(1, "x", "z", "a", "a")]
    frame = majority_baseline(negative_train, {"dev": train})["dev"]
    assert (frame["pred"] == 0).all()
    assert metrics_from_predictions(frame) == {"acc": pytest.approx(1 / 3), "f1": 0.0}


def test_binary_metrics_from_hand_counted_confusion():
    # label 1 1 1 1 0 0 0 1 0 1 / pred 1 1 0 1 1 0 0 0 0 1: TP 4, FN 2, FP 1, TN 3
    frame = pd.DataFrame({"label": [1, 1, 1, 1, 0, 0, 0, 1, 0, 1], "pred": [1, 1, 0, 1, 1, 0, 0, 0, 0, 1]})
    metrics = metrics_from_predictions(frame)
    assert metrics["acc"] == pytest.approx(7 / 10)
    assert metrics["f1"] == pytest.approx(2 * 4 / (2 * 4 + 1 + 2))  # F1 of class 1 = 8/11, not macro (0.69)
    flipped = metrics_from_predictions(frame.assign(label=1 - frame["label"], pred=1 - frame["pred"]))
    assert flipped["f1"] == pytest.approx(2 * 3 / (2 * 3 + 2 + 1))  # now class 1 is the old class 0: TP 3


def test_three_class_metrics_are_macro_f1_from_hand_counted_confusion():
    # class a: TP 2, FP 1, FN 0 -> 4/5; b: TP 1, FP 1, FN 2 -> 2/5; c: TP 2, FP 1, FN 1 -> 4/6
    frame = pd.DataFrame({"label": ["a", "a", "b", "b", "b", "c", "c", "c"],
                          "pred": ["a", "a", "b", "a", "c", "c", "c", "b"]})
    metrics = metrics_from_predictions(frame)
    assert metrics["acc"] == pytest.approx(5 / 8)
    assert metrics["f1"] == pytest.approx((4 / 5 + 2 / 5 + 4 / 6) / 3)
    numeric = frame.replace({"a": 0, "b": 1, "c": 2})
    assert metrics_from_predictions(numeric) == metrics  # integer labels beyond {0, 1}: macro too


def test_tfidf_lr_beats_majority_on_toy_pairs():
    train, dev = toy_pairs(0, 90), toy_pairs(1000, 60)
    tfidf = tfidf_lr_baseline(train, {"dev": dev}, seed=0)["dev"]
    majority = majority_baseline(train, {"dev": dev})["dev"]
    assert list(tfidf.columns) == COLUMNS
    assert tfidf["prob"].between(0, 1).all()
    assert (tfidf["pred"] == (tfidf["prob"] >= 0.5).astype(int)).all()
    assert metrics_from_predictions(tfidf)["acc"] > metrics_from_predictions(majority)["acc"] + 0.2
    again = tfidf_lr_baseline(train, {"dev": dev}, seed=0)["dev"]
    pd.testing.assert_frame_equal(tfidf, again)


def test_tfidf_lr_needs_both_classes():
    with pytest.raises(ValueError):
        tfidf_lr_baseline([pair for pair in toy_pairs(0, 30) if pair.label == 1], {"dev": toy_pairs(0, 3)})


def read_glue(path: Path) -> list[Pair]:
    frame = pd.read_csv(
        path, sep="\t", quoting=csv.QUOTE_NONE, encoding="utf-8-sig", dtype=str, keep_default_na=False
    )
    return [Pair(int(row[0]), row[1], row[2], row[3], row[4]) for row in frame.itertuples(index=False)]


MRPC_DIR = Path(os.environ.get("MRPC_DIR", "/work/shared/data/mrpc"))
HAS_GLUE = "MRPC_DIR" in os.environ and (MRPC_DIR / "train.tsv").is_file() and (MRPC_DIR / "dev.tsv").is_file()


@pytest.mark.slow
@pytest.mark.skipif(not HAS_GLUE, reason="set MRPC_DIR to a folder with the GLUE train.tsv and dev.tsv")
def test_baselines_on_real_mrpc_dev():
    train, dev = read_glue(MRPC_DIR / "train.tsv"), read_glue(MRPC_DIR / "dev.tsv")
    assert (len(train), len(dev)) == (3668, 408)
    majority = metrics_from_predictions(majority_baseline(train, {"dev": dev})["dev"])
    tfidf = metrics_from_predictions(tfidf_lr_baseline(train, {"dev": dev}, seed=0)["dev"])
    assert majority["acc"] == 279 / 408
    assert tfidf["acc"] >= 0.70
    assert tfidf["f1"] >= majority["f1"] - 0.01
