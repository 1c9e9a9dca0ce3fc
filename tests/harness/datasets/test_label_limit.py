"""More labels than the harness can report on (a label column that is really an id or a score) are
refused when the data set is read, before any run: otherwise 10,000 labels would end in a
traceback after the first epoch (the F1 metric's deterministic update needs batch × C² × 8 bytes)."""

import pytest

from harness.datasets.label_limit import MAX_LABELS
from harness.datasets.registry import load_pair_data
from harness.datasets.types import PairData
from harness.errors import UserError
from tests.helpers import finetune_refused_before_any_run
from tests.pair_files import write_tsv


def labelled_set(folder, labels: int) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    train = [(f"t{i}", f"train sentence {i} .", f"its partner {i} .", f"label-{i}") for i in range(labels)]
    dev = [(f"d{i}", f"dev sentence {i} .", f"its partner {i} .", f"label-{i}") for i in range(0, labels, 7)]
    test = [(f"e{i}", f"test sentence {i} .", f"its partner {i} .", f"label-{i}") for i in range(0, labels, 7)]
    return {
        split: str(write_tsv(folder / f"{split}.tsv", rows))
        for split, rows in (("train", train), ("dev", dev), ("test", test))
    }


def test_ten_thousand_labels_are_refused_naming_the_file_and_the_column_flag(tmp_path):
    files = labelled_set(tmp_path, 10_000)
    with pytest.raises(UserError) as raised:
        load_pair_data(dataset="tsv", **files)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith(f"--data.train={files['train']}: 10000 distinct labels ('label-0', ")
    assert f"at most {MAX_LABELS}" in message and "is --data.label_column the right column?" in message


def test_the_largest_label_set_is_read(tmp_path):
    assert load_pair_data(dataset="tsv", **labelled_set(tmp_path, MAX_LABELS)).num_classes == MAX_LABELS


@pytest.mark.slow
def test_the_finetune_cli_refuses_before_any_run(tmp_path, monkeypatch, capsys, save_encoder):
    encoder, _ = save_encoder("elmo", tmp_path)
    files = labelled_set(tmp_path / "many", 10_000)
    line = finetune_refused_before_any_run(files, encoder, tmp_path, monkeypatch, capsys)
    assert line.startswith(f"error: --data.train={files['train']}: 10000 distinct labels"), line


def test_the_confusion_matrix_of_many_labels_is_shaded_not_counted_and_stays_small():
    import matplotlib.pyplot as plt
    import numpy as np
    import pandas as pd

    from downstream.run.evaluation import COUNTED_CELLS_UP_TO, confusion_figure

    data = PairData(  # no pairs: the labels are all the figure needs from the data set
        name="many",
        labels=[f"l{i}" for i in range(MAX_LABELS)],
        id_columns=("id",),
        train=[],
        dev=[],
        test=[],
        content_hash="x",
    )
    generator = np.random.default_rng(0)
    frame = pd.DataFrame({"label": generator.choice(data.labels, 300), "pred": generator.choice(data.labels, 300)})
    figure = confusion_figure({"dev": frame, "test": frame}, data)
    assert MAX_LABELS > COUNTED_CELLS_UP_TO and all(not axis.texts for axis in figure.axes)
    assert figure.get_size_inches()[0] <= 32
    plt.close(figure)
