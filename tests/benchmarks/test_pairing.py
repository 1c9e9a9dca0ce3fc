"""Items matched for a paired test: correctness for any number of classes, runs paired by seed value,
items aligned on their ids whatever the row order, and refusals of unpaired inputs."""

import numpy as np
import pandas as pd
import pytest

from benchmarks.stats.gaps import NO_SEED_REPLICATION, compare_with_twin
from benchmarks.stats.pairing import correctness, id_columns, paired_correctness, same_items
from tests.benchmarks.stats_inputs import frame


def test_id_columns_are_everything_but_labels_predictions_and_probabilities():
    mrpc = pd.DataFrame(columns=["id1", "id2", "label", "prob", "pred"])
    generic = pd.DataFrame(columns=["id", "label", "prob_neutral", "prob_entailment", "pred"])
    assert id_columns(mrpc) == ["id1", "id2"]
    assert id_columns(generic) == ["id"]


def test_three_class_correctness_and_gap():
    labels = ["entailment", "neutral", "contradiction", "neutral", "entailment", "contradiction"]
    method = pd.DataFrame(
        {
            "id": range(6),
            "label": labels,
            "prob_entailment": 0.3,
            "pred": ["entailment", "neutral", "neutral", "neutral", "contradiction", "contradiction"],
        }
    )
    twin = method.assign(pred=["neutral"] * 6)
    assert correctness(method).tolist() == [True, True, False, True, False, True]
    assert correctness(twin).tolist() == [False, True, False, True, False, False]
    numeric = pd.DataFrame({"label": [0, 1, 2, 2], "pred": [0.0, 2.0, 2.0, 1.0]})  # floats read back from CSV
    assert correctness(numeric).tolist() == [True, False, True, False]
    gap = compare_with_twin({7: method}, {7: twin})
    assert gap.gap == pytest.approx(2 / 6)  # 4 of 6 right against 2 of 6
    assert gap.procedure == NO_SEED_REPLICATION and gap.seeds == 1 and gap.items == 6


def test_pairs_by_seed_value_not_by_position():
    """Method seeds {0, 1, 2}, twin seeds {1, 2, 5}: only 1 and 2 pair, and they are identical.
    Pairing by position (0↔1, 1↔2, 2↔5) would see a gap of 1/3."""
    correct = {0: np.ones(20), 1: np.arange(20) < 10, 2: np.arange(20) < 15, 5: np.zeros(20)}
    method_runs = {seed: frame(correct[seed]) for seed in (2, 0, 1)}
    twin_runs = {seed: frame(correct[seed]) for seed in (5, 1, 2)}
    seeds, correct_method, correct_twin = paired_correctness(method_runs, twin_runs)
    assert seeds == [1, 2] and correct_method.shape == (2, 20)
    gap = compare_with_twin(method_runs, twin_runs)
    assert gap.seeds == 2 and gap.gap == 0.0 and gap.p_value == pytest.approx(1.0)
    by_position = {index: twin_runs[seed] for index, seed in enumerate(sorted(twin_runs))}  # 0↔1, 1↔2, 2↔5
    assert compare_with_twin(method_runs, by_position).gap == pytest.approx((0.5 - 0.25 + 0.75) / 3)
    assert compare_with_twin({0: frame(correct[0])}, {1: frame(correct[1])}) is None


def test_items_align_on_ids_whatever_the_row_order():
    labels = np.arange(30) % 2
    ids = [f"pair{index}" for index in range(30)]
    method = frame(np.arange(30) < 25, ids, labels)
    twin = frame(np.arange(30) < 15, ids, labels)
    shuffled = twin.sample(frac=1.0, random_state=0).reset_index(drop=True)
    assert compare_with_twin({0: method}, {0: shuffled}).gap == pytest.approx(10 / 30)
    as_text = shuffled.assign(label=shuffled["label"].astype(str), pred=shuffled["pred"].astype(float))  # CSV-ish
    assert compare_with_twin({0: method}, {0: as_text}).gap == pytest.approx(10 / 30)


def test_pairing_refuses_other_items_labels_or_duplicates():
    method = frame(np.ones(6, bool))
    with pytest.raises(ValueError, match="other items"):
        compare_with_twin({0: method}, {0: frame(np.ones(6, bool), ids=[f"x{index}" for index in range(6)])})
    with pytest.raises(ValueError, match="other items"):
        compare_with_twin({0: method}, {0: frame(np.ones(5, bool))})
    with pytest.raises(ValueError, match="gold labels"):
        compare_with_twin({0: method}, {0: frame(np.ones(6, bool), labels=np.ones(6, int))})
    with pytest.raises(ValueError, match="duplicate"):
        compare_with_twin({0: pd.concat([method, method.iloc[:1]])}, {0: method})


def test_same_items_ignores_row_order_but_not_ids():
    table = frame(np.arange(10) < 5)
    assert same_items(table, table.iloc[::-1])
    assert not same_items(table, table.iloc[:9])
    assert not same_items(table, frame(np.arange(10) < 5, ids=[f"other{index}" for index in range(10)]))
