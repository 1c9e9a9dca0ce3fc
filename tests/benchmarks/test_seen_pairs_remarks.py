"""The report's contamination remark: from the runs that logged the pairs their encoder read."""

import pandas as pd

from benchmarks.report.seen_pairs import seen_pairs_remarks
from harness.datasets.task import graded


def test_a_method_whose_encoder_read_test_sentences_is_scored_without_them():
    runs = pd.DataFrame(
        {
            "method": ["elmo-scalar-attn", "elmo-scalar-attn", "random-scalar-attn", "tfidf-ridge"],
            "test_pearson": [0.70, 0.72, 0.60, 0.71],
            "test_pearson_unseen": [0.66, 0.68, 0.61, None],
            "test_seen_pairs": [259, 259, 259, None],
            "test_pairs": ["1379"] * 4,
        }
    )
    remarks = seen_pairs_remarks(runs, graded(0, 5))
    assert remarks[0] == (
        "Contamination: `elmo-scalar-attn`: 259 of 1379 test pairs have a sentence its encoder read in "
        "pretraining (a twin: its pretrained twin's); without them its mean test Pearson r is 67.0 (2 seeds), "
        "against 71.0 on all."
    )
    assert remarks[1].startswith("Contamination: `random-scalar-attn`: 259 of 1379") and len(remarks) == 2


def test_none_read_is_one_line_and_no_count_is_no_remark():
    runs = pd.DataFrame({"method": ["gpt-scalar-attn"], "test_acc": [0.7], "test_seen_pairs": [0]})
    assert seen_pairs_remarks(runs) == [
        "Contamination: no test pair has a sentence that an encoder here read in pretraining."
    ]
    assert seen_pairs_remarks(runs.drop(columns="test_seen_pairs")) == []  # e.g. every committed v3 cell
