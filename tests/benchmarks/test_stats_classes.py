"""The paired comparison on predictions of a 3-label data set: joined on its ``id`` column (rows in
any order), labels compared as the names written in the files, sentences not taken for ids. A known
case: 8 items only the method gets right, one both get wrong."""

import pandas as pd
import pytest

from benchmarks.stats.gaps import compare_with_twin, id_columns

LABELS = ["contradiction", "entailment", "neutral"]


def frame(gold: list[str], predicted: list[str], order: list[int] | None = None) -> pd.DataFrame:
    table = pd.DataFrame(
        {
            "id": [f"p{k}" for k in range(len(gold))],
            "label": gold,
            "prob_entailment": 0.5,
            "pred": predicted,
            "sentence1": "a",
            "sentence2": "b",
        }
    )
    return table.iloc[order] if order is not None else table


def test_three_labels_joined_on_id_in_any_order():
    gold = [LABELS[k % 3] for k in range(30)]
    control = list(gold)
    for k in range(8):  # the control is wrong on 8 items the method gets right
        control[k] = LABELS[(k + 1) % 3]
    method = list(gold)
    method[20] = control[20] = LABELS[0] if gold[20] != LABELS[0] else LABELS[1]  # both wrong: concordant
    shuffled = list(reversed(range(30)))  # rows in another order: the join is on `id`
    assert id_columns(frame(gold, method)) == ["id"]
    gap = compare_with_twin({0: frame(gold, method)}, {0: frame(gold, control, shuffled)})
    assert gap.gap == pytest.approx(8 / 30)  # 29/30 right against 21/30
    assert gap.items == 30 and gap.seeds == 1


def test_different_gold_label_names_are_an_error():
    gold = ["entailment", "neutral"]
    other = ["entailment", "contradiction"]
    with pytest.raises(ValueError, match="gold label"):
        compare_with_twin({0: frame(gold, gold)}, {0: frame(other, other)})
