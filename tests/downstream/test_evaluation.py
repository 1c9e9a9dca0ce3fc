"""Evaluation for any label set: predictions files (id columns, label names, a probability column
per label), metrics against hand-computed confusion counts, a positive label other than the later
one, and the CLI handing the data set's classes to the model. Data made here; no MRPC needed."""

from pathlib import Path

import numpy as np
import pytest
import torch

from downstream.run.evaluation import confusion_figure, predicted_class, predictions_frame, split_metrics
from harness.datasets.registry import load_pair_data
from harness.datasets.types import Pair, PairData
from tests.pair_files import write_three_label_set

GOLD = [0, 0, 0, 1, 1, 2, 2, 2, 2, 2]  # a a a b b c c c c c
PREDICTED = [0, 0, 1, 1, 2, 2, 2, 2, 0, 1]


def pair_data(labels: list[str], gold: list[int], positive_label: str | None = None) -> PairData:
    pairs = [Pair(label, (f"p{index}",), f"first {index}", f"second {index}") for index, label in enumerate(gold)]
    return PairData("toy", labels, ("id",), pairs, pairs, pairs, "hash", positive_label=positive_label)


def one_hot_probabilities(classes: list[int], num_classes: int) -> torch.Tensor:
    probabilities = torch.full((len(classes), num_classes), 0.1 / (num_classes - 1))
    probabilities[torch.arange(len(classes)), torch.tensor(classes)] = 0.9
    return probabilities  # (N, C), rows sum to 1


def test_three_label_predictions_file_names_labels_and_has_a_probability_per_label():
    data = pair_data(["a", "b", "c"], GOLD)
    indices = torch.tensor([9, 8, 7, 6, 5, 4, 3, 2, 1, 0])  # loader order, reversed
    probabilities = one_hot_probabilities(PREDICTED[::-1], 3)
    frame = predictions_frame(data, data.test, probabilities, indices)
    assert list(frame.columns) == ["id", "label", "prob_a", "prob_b", "prob_c", "pred", "sentence1", "sentence2"]
    assert frame["id"].tolist() == [f"p{index}" for index in range(10)]  # split order
    assert frame["label"].tolist() == [["a", "b", "c"][k] for k in GOLD]
    assert frame["pred"].tolist() == [["a", "b", "c"][k] for k in PREDICTED]
    assert np.allclose(frame[["prob_a", "prob_b", "prob_c"]].sum(axis=1), 1.0)
    assert frame["sentence2"].tolist()[:2] == ["second 0", "second 1"]


def test_macro_f1_and_accuracy_equal_the_hand_computed_confusion_counts():
    data = pair_data(["a", "b", "c"], GOLD)
    frame = predictions_frame(data, data.test, one_hot_probabilities(PREDICTED, 3))
    # per label: (true positives, false positives, false negatives) read off GOLD / PREDICTED
    counts = {"a": (2, 1, 1), "b": (1, 2, 1), "c": (3, 1, 2)}
    f1 = [2 * tp / (2 * tp + fp + fn) for tp, fp, fn in counts.values()]  # 2/3, 2/5, 2/3
    assert split_metrics(frame, "test", data) == {
        "test_acc": pytest.approx(6 / 10),
        "test_f1": pytest.approx(sum(f1) / 3),
    }
    assert sum(f1) / 3 == pytest.approx(26 / 45)
    assert data.f1_average == "macro"


def test_a_positive_label_that_is_class_zero_owns_prob_ties_and_f1():
    gold = [0, 0, 1, 1]  # labels "no", "yes": class 0 is "no"
    data = pair_data(["no", "yes"], gold, positive_label="no")
    p_no = torch.tensor([0.5, 0.2, 0.7, 0.4])
    frame = predictions_frame(data, data.dev, torch.stack([p_no, 1 - p_no], dim=1))
    assert list(frame.columns) == ["id", "label", "prob", "pred", "sentence1", "sentence2"]
    assert frame["prob"].tolist() == pytest.approx([0.5, 0.2, 0.7, 0.4])  # P(positive label "no")
    assert frame["pred"].tolist() == ["no", "yes", "no", "yes"]  # the tie at 0.5 goes to the positive label
    # "no": 1 true positive, 1 false positive, 1 false negative -> F1 = 2 / 4
    assert split_metrics(frame, "dev", data) == {"dev_acc": 0.5, "dev_f1": 0.5}
    assert predicted_class(torch.tensor([[0.5, 0.5]]), positive_class=0).tolist() == [0]
    assert predicted_class(torch.tensor([[0.5, 0.5]]), positive_class=1).tolist() == [1]


def test_confusion_figure_names_the_labels():
    data = pair_data(["a", "b", "c"], GOLD)
    frame = predictions_frame(data, data.test, one_hot_probabilities(PREDICTED, 3))
    figure = confusion_figure({"dev": frame, "test": frame}, data)
    axis = figure.axes[0]
    assert [label.get_text() for label in axis.get_xticklabels()] == ["a", "b", "c"]
    assert [[int(text.get_text()) for text in axis.texts][k * 3 : (k + 1) * 3] for k in range(3)] == [
        [2, 1, 0],
        [0, 1, 1],
        [1, 1, 3],
    ]


# ── the CLI: the data set's classes reach the model ──────────────────────────────────────────────


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory) -> Path:
    """A tiny biLM (2 layers of H=8) over the 3-label set's sentences, saved as pretraining exports it."""
    from tests.helpers import save_tiny_bilm

    folder = tmp_path_factory.mktemp("nli3")
    paths = write_three_label_set(folder / "nli3", sizes=(60, 30, 30))
    data = load_pair_data(dataset="tsv", train=paths["train"], dev=paths["dev"], test=paths["test"])
    return save_tiny_bilm(data.sentences("train"), folder)


def parse(checkpoint: Path, monkeypatch, tmp_path, *flags: str):
    from downstream.run.cli import FinetuneCLI

    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{tmp_path / 'mlflow.db'}")
    return FinetuneCLI(
        args=[
            f"--model.encoder={checkpoint}",
            "--model.hidden_size=8",
            "--data.cache_dir=none",
            f"--trainer.default_root_dir={tmp_path}",
            *flags,
        ],
        run=False,
    )


@pytest.mark.slow
def test_the_cli_links_three_classes_into_the_model(checkpoint, monkeypatch, tmp_path):
    folder = checkpoint.parent / "nli3"
    cli = parse(
        checkpoint,
        monkeypatch,
        tmp_path,
        "--data.dataset=tsv",
        f"--data.train={folder / 'train.tsv'}",
        f"--data.dev={folder / 'dev.tsv'}",
        f"--data.test={folder / 'test.tsv'}",
        "--model.standardize=false",
    )  # a forward pass outside fit: no statistics to standardise with
    assert cli.datamodule.num_classes == 3 and cli.model.hparams.num_classes == 3
    cli.datamodule.attach(cli.model.encoder)
    cli.datamodule.setup()
    batch = next(iter(cli.datamodule.loader("dev")))
    assert cli.model(cli.model.batch_inputs(batch)).shape == (len(batch[4]), 3)  # (B, C) logits
    assert cli.experiment_name() == "nli3" and cli.run_name().startswith("nli3-elmo·")


@pytest.mark.slow
def test_a_benchmark_cell_is_named_by_its_method_and_seed(checkpoint, monkeypatch, tmp_path):
    """The method (led by the benchmark's encoder name) keeps the cells of elmo-mrpc and elmo-reuters apart."""
    names = [
        parse(checkpoint, monkeypatch, tmp_path, f"--method={method}", "--seed_everything=2").run_name()
        for method in ("elmo-mrpc-frozen-attn@0.1", "elmo-reuters-frozen-attn@0.1")
    ]
    assert names == ["elmo-mrpc-frozen-attn@0.1·s2", "elmo-reuters-frozen-attn@0.1·s2"]
    assert parse(checkpoint, monkeypatch, tmp_path, "--seed_everything=0").run_name() == "elmo·scalar·pool-mlp·s0"


@pytest.mark.slow
def test_the_cli_links_the_positive_class(checkpoint, monkeypatch, tmp_path):
    folder = tmp_path / "binary"
    folder.mkdir()
    rows = {
        "train": ["a b\ta b\tyes", "a b\tc d\tno", "e f\te f\tyes", "e f\tg h\tno"],
        "dev": ["c d\tc d\tyes", "c d\te f\tno"],
        "test": ["g h\tg h\tyes", "g h\ta b\tno"],
    }
    for split, lines in rows.items():
        (folder / f"{split}.tsv").write_text("sentence1\tsentence2\tlabel\n" + "\n".join(lines) + "\n")
    flags = ["--data.dataset=tsv", *(f"--data.{split}={folder / f'{split}.tsv'}" for split in rows)]
    default = parse(checkpoint, monkeypatch, tmp_path, *flags)
    assert (default.model.hparams.num_classes, default.model.hparams.positive_class) == (2, 1)  # "yes"
    chosen = parse(checkpoint, monkeypatch, tmp_path, *flags, "--data.positive_label=no")
    assert (chosen.model.hparams.num_classes, chosen.model.hparams.positive_class) == (2, 0)
