"""End of a finetune run: the best checkpoint on the data set's dev and test splits (MRPC: GLUE dev
and MSR test), with predictions and figures logged so that any metric can be recomputed from the run."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytorch_lightning as pl
import torch
from sklearn.metrics import ConfusionMatrixDisplay, accuracy_score, f1_score

from harness.datasets.registry import class_titles
from harness.datasets.types import Pair, PairData
from harness.training.checkpoints import read_best

PREDICTION_COLUMNS = ["id1", "id2", "label", "prob", "pred", "sentence1", "sentence2"]  # MRPC's predictions files


def predicted_class(probabilities: torch.Tensor, positive_class: int = 1) -> torch.Tensor:
    """(N, C) class probabilities → (N,) predicted classes, one rule for validation and the final
    metrics: with two classes, ``positive_class`` when its probability is ≥ 0.5 (ties go to it, as
    the predictions contract says); with more, the most probable class."""
    if probabilities.shape[-1] == 2:
        positive = probabilities[:, positive_class] >= 0.5
        return torch.where(positive, positive_class, 1 - positive_class).long()
    return probabilities.argmax(dim=-1)


def probability_columns(data: PairData) -> list[str]:
    """``prob`` (P(positive label)) for 2 labels, else ``prob_<label>`` per label in label order."""
    return ["prob"] if data.num_classes == 2 else [f"prob_{label}" for label in data.labels]


def predictions_frame(
    data: PairData, pairs: list[Pair], probabilities, indices: torch.Tensor | None = None
) -> pd.DataFrame:
    """The predictions file of a split, one row per pair, in split order.

    ``probabilities``: (N, C) class probabilities (tensor or array) of ``pairs[indices[i]]``
    (``indices`` None: of ``pairs[i]``).

    Returns:
        columns: the data set's id columns (MRPC ``id1, id2``; TSV ``id``), ``label``, then ``prob``
        = P(positive label) for 2 labels or ``prob_<label>`` per label, ``pred``
        (:func:`predicted_class`), ``sentence1``, ``sentence2``; labels are label names.
    """
    probabilities = torch.as_tensor(probabilities).double()  # (N, C)
    if indices is None:
        indices = torch.arange(len(probabilities))
    order = torch.argsort(indices)
    rows = [pairs[i] for i in indices[order].tolist()]
    probabilities = probabilities[order]
    names = pd.Series(data.labels, dtype=object)
    frame = pd.DataFrame({**data.ids_by_column(rows), "label": names[[pair.label for pair in rows]].tolist()})
    if data.num_classes == 2:
        frame["prob"] = probabilities[:, data.positive_class].numpy()
    else:
        for column, k in zip(probability_columns(data), range(data.num_classes)):
            frame[column] = probabilities[:, k].numpy()
    positive = data.positive_class if data.positive_class is not None else 1
    frame["pred"] = names[predicted_class(probabilities, positive).numpy()].tolist()
    frame["sentence1"] = [pair.sentence1 for pair in rows]
    frame["sentence2"] = [pair.sentence2 for pair in rows]
    return frame


def split_metrics(frame: pd.DataFrame, split: str, data: PairData) -> dict[str, float]:
    """``<split>_acc`` and ``<split>_f1`` from sklearn over the label names of ``frame``: binary F1
    of the positive label (MRPC: paraphrase) for 2 labels; for more, macro F1 over the labels that
    occur among the split's gold labels or predictions (sklearn's default set)."""
    labels, predictions = frame["label"].astype(str), frame["pred"].astype(str)
    if data.f1_average == "binary":
        f1 = f1_score(labels, predictions, average="binary", pos_label=data.positive_label, zero_division=0)
    else:
        f1 = f1_score(labels, predictions, average="macro", zero_division=0)
    return {f"{split}_acc": float(accuracy_score(labels, predictions)), f"{split}_f1": float(f1)}


COUNTED_CELLS_UP_TO = 20  # labels; more: the confusion matrix is shaded, without a count per cell


def confusion_figure(frames: dict[str, pd.DataFrame], data: PairData):
    """One confusion matrix per split, rows and columns named by the data set's labels; above
    ``COUNTED_CELLS_UP_TO`` labels the cells are shaded only (a number in each of C² cells would
    take minutes to draw and be unreadable) and the figure stops growing."""
    display = class_titles(data)
    classes = data.num_classes
    side = min(max(4, 1.2 * classes + 1.6), 16)
    figure, axes = plt.subplots(
        1, len(frames), figsize=(side * len(frames), 3.6 if classes <= 3 else side), squeeze=False
    )
    for axis, (split, frame) in zip(axes[0], frames.items()):
        ConfusionMatrixDisplay.from_predictions(
            frame["label"].astype(str),
            frame["pred"].astype(str),
            labels=data.labels,
            display_labels=display,
            ax=axis,
            colorbar=False,
            include_values=classes <= COUNTED_CELLS_UP_TO,
        )
        axis.set_title(f"{split} ({len(frame)} pairs)")
    figure.tight_layout()
    return figure


def mix_figure(weights: list[float], gamma: float, title: str):
    figure, axis = plt.subplots(figsize=(1.2 * len(weights) + 2, 3))
    axis.bar(range(len(weights)), weights, color="tab:blue")
    axis.set_xticks(range(len(weights)), [f"layer {k}" for k in range(len(weights))])
    axis.set_ylim(0, 1)
    axis.set_ylabel("softmax weight")
    axis.set_title(f"{title}  (γ = {gamma:.2f})")
    figure.tight_layout()
    return figure


def rendered(figure) -> np.ndarray:
    """A matplotlib figure drawn once, as an (H, W, 3) uint8 array; the figure is closed."""
    figure.canvas.draw()
    image = np.asarray(figure.canvas.buffer_rgba())[..., :3].copy()  # (H, W, 3)
    plt.close(figure)
    return image


class EvaluateBest(pl.Callback):
    """At the end of fit (before the run closes): reload the best dev checkpoint, predict dev and
    test, log ``dev_acc, dev_f1, test_acc, test_f1`` computed by sklearn from exactly the logged
    ``predictions/{dev,test}.csv``, the optimiser steps and epochs the fit took (``train_steps``,
    ``train_epochs``), a confusion matrix and the mix-weight bar chart. The best
    checkpoint is read from the run's own checkpoint folder only, without running pickled code.
    Each figure is drawn once (``images``: name → pixels, which ``LogPredictionViews`` logs again
    as keyed images)."""

    def __init__(self):
        self.results: dict[str, float] = {}
        self.frames: dict[str, pd.DataFrame] = {}
        self.images: dict[str, np.ndarray] = {}

    def on_fit_end(self, trainer, pl_module):
        if not trainer.is_global_zero:
            return
        checkpoint_callback = trainer.checkpoint_callback
        best = checkpoint_callback.best_model_path if checkpoint_callback else ""
        if best:
            pl_module.load_state_dict(read_best(best, Path(checkpoint_callback.dirpath))["state_dict"])
        data = trainer.datamodule
        for split in ("dev", "test"):
            probabilities, indices = pl_module.probabilities(data.loader(split))
            self.frames[split] = predictions_frame(data.pair_data, data.pairs[split], probabilities, indices)
            self.results.update(split_metrics(self.frames[split], split, data.pair_data))
        self.results.update(pl_module.mix_metrics())
        self.results.update(train_steps=trainer.global_step, train_epochs=trainer.current_epoch)
        logger = trainer.logger
        client, run_id = logger.experiment, logger.run_id
        logger.log_metrics(self.results, step=trainer.global_step + 1)
        for split, frame in self.frames.items():
            client.log_text(run_id, frame.to_csv(index=False), f"predictions/{split}.csv")
        self.images = {"confusion_matrix": rendered(confusion_figure(self.frames, data.pair_data))}
        if pl_module.mix is not None:
            weights = [self.results[f"mix_weight_{k}"] for k in range(pl_module.mix.num_layers)]
            self.images["mix_weights"] = rendered(
                mix_figure(weights, self.results["mix_gamma"], f"mix = {pl_module.hparams.mix}")
            )
        for name, image in self.images.items():
            client.log_image(run_id, image, artifact_file=f"figures/{name}.png")
