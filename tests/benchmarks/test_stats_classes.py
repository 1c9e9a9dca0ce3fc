"""The paired test on predictions of a 3-label data set: joined on its ``id`` column, labels compared
as the names written in the files. A known case: the exact McNemar p-value by hand."""

import pandas as pd
import pytest

from benchmarks.stats import pvalues_vs_control

LABELS = ["contradiction", "entailment", "neutral"]


def frame(gold: list[str], predicted: list[str], order: list[int] | None = None) -> pd.DataFrame:
    table = pd.DataFrame({"id": [f"p{k}" for k in range(len(gold))], "label": gold, "pred": predicted})
    return table.iloc[order] if order is not None else table


def test_mcnemar_on_three_labels_counts_the_discordant_pairs():
    gold = [LABELS[k % 3] for k in range(30)]
    control = list(gold)
    for k in range(8):  # the control is wrong on 8 items the method gets right
        control[k] = LABELS[(k + 1) % 3]
    method = list(gold)
    method[20] = control[20] = LABELS[0] if gold[20] != LABELS[0] else LABELS[1]  # both wrong: concordant
    shuffled = list(reversed(range(30)))  # rows in another order: the join is on `id`
    pvalues = pvalues_vs_control({"elmo": [frame(gold, method)], "random": [frame(gold, control, shuffled)]}, "random")
    assert pvalues["elmo"] == pytest.approx(2 * 0.5 ** 8)  # exact binomial, b = 8, c = 0, two-sided
    assert pd.isna(pvalues["random"])


def test_different_gold_label_names_are_an_error():
    gold = ["entailment", "neutral"]
    other = ["entailment", "contradiction"]
    with pytest.raises(ValueError, match="disagree on gold labels"):
        pvalues_vs_control({"a": [frame(gold, gold)], "b": [frame(other, other)]}, "b")
