"""End of a finetune run: the best checkpoint on the data set's dev and test splits (MRPC: GLUE dev
and MSR test), with predictions and figures logged so that any metric can be recomputed from the run.

What a predictions file holds and which metrics and figure come from it is the task's
(``harness.datasets.task``): for classes, label names, class probabilities and the predicted label,
accuracy and F1 (sklearn), a confusion matrix; for a graded task, the gold score (``label``) and the
predicted one (``pred``) on the task's own scale, Pearson and Spearman (scipy, ``graded_metrics``),
a scatter of predicted against gold scores."""

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
from harness.datasets.seen_sentences import seen_pairs
from harness.datasets.task import graded_metrics
from harness.datasets.types import Pair, PairData
from harness.training.checkpoints import read_best

PREDICTION_COLUMNS = ["id1", "id2", "label", "prob", "pred", "sentence1", "sentence2"]  # MRPC's predictions files
GRADED_COLUMNS = ["label", "pred", "sentence1", "sentence2"]  # a graded task's, after its id columns


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


def gold_labels(data: PairData, pairs: list[Pair]) -> list:
    """The ``label`` column of ``pairs``: label names (classes), or gold scores (a graded task)."""
    if data.task.graded:
        return [float(pair.label) for pair in pairs]
    return pd.Series(data.labels, dtype=object)[[pair.label for pair in pairs]].tolist()


def predictions_frame(data: PairData, pairs: list[Pair], values, indices: torch.Tensor | None = None) -> pd.DataFrame:
    """The predictions file of a split, one row per pair, in split order.

    ``values``: of ``pairs[indices[i]]`` (``indices`` None: of ``pairs[i]``), a tensor or array:
    (N, C) class probabilities, or a graded task's (N,) predicted scores on [0, 1]
    (``LitPairClassifier.predictions``).

    Returns:
        columns: the data set's id columns (MRPC ``id1, id2``; TSV ``id``), ``label``, then for
        classes ``prob`` = P(positive label) for 2 labels or ``prob_<label>`` per label, ``pred``
        (:func:`predicted_class`), labels as label names; for a graded task ``label`` the gold score
        and ``pred`` the predicted score on the task's scale (``Task.unscaled``); then
        ``sentence1``, ``sentence2``.
    """
    values = torch.as_tensor(values).double()  # (N, C) or (N,)
    if indices is None:
        indices = torch.arange(len(values))
    order = torch.argsort(indices)
    rows = [pairs[i] for i in indices[order].tolist()]
    frame = pd.DataFrame({**data.ids_by_column(rows), "label": gold_labels(data, rows)})
    PREDICTED_COLUMNS[data.task.target](frame, data, values[order])
    frame["sentence1"] = [pair.sentence1 for pair in rows]
    frame["sentence2"] = [pair.sentence2 for pair in rows]
    return frame


def graded_columns(frame: pd.DataFrame, data: PairData, scores: torch.Tensor) -> None:
    """``pred``: the (N,) scores on [0, 1] on the task's own scale."""
    frame["pred"] = data.task.unscaled(scores.numpy())


def class_columns(frame: pd.DataFrame, data: PairData, probabilities: torch.Tensor) -> None:
    """``prob`` or ``prob_<label>`` from the (N, C) probabilities, then ``pred`` (a label name)."""
    names = pd.Series(data.labels, dtype=object)
    if data.num_classes == 2:
        frame["prob"] = probabilities[:, data.positive_class].numpy()
    else:
        for column, k in zip(probability_columns(data), range(data.num_classes)):
            frame[column] = probabilities[:, k].numpy()
    positive = data.positive_class if data.positive_class is not None else 1
    frame["pred"] = names[predicted_class(probabilities, positive).numpy()].tolist()


PREDICTED_COLUMNS = {"classes": class_columns, "graded": graded_columns}


def split_metrics(frame: pd.DataFrame, split: str, data: PairData) -> dict[str, float]:
    """The task's metrics of a predictions file: a graded task's ``<split>_pearson`` and
    ``<split>_spearman`` (scipy, ``graded_metrics``), or ``<split>_acc`` and ``<split>_f1``
    (:func:`class_metrics`)."""
    return SPLIT_METRICS[data.task.target](frame, split, data)


def class_metrics(frame: pd.DataFrame, split: str, data: PairData) -> dict[str, float]:
    """``<split>_acc`` and ``<split>_f1`` from sklearn over the label names of ``frame``: binary F1
    of the positive label (MRPC: paraphrase) for 2 labels; for more, macro F1 over the labels that
    occur among the split's gold labels or predictions (sklearn's default set)."""
    labels, predictions = frame["label"].astype(str), frame["pred"].astype(str)
    if data.f1_average == "binary":
        f1 = f1_score(labels, predictions, average="binary", pos_label=data.positive_label, zero_division=0)
    else:
        f1 = f1_score(labels, predictions, average="macro", zero_division=0)
    return {f"{split}_acc": float(accuracy_score(labels, predictions)), f"{split}_f1": float(f1)}


SPLIT_METRICS = {"classes": class_metrics, "graded": lambda frame, split, data: graded_metrics(frame, split)}


def unseen_metrics(frames: dict[str, pd.DataFrame], seen: np.ndarray, data: PairData) -> dict[str, float]:
    """Per split, ``<split>_seen_pairs``: the pairs with a sentence among the encoder's pretraining
    text (``seen``: its digests, :mod:`harness.datasets.seen_sentences`), and where some but not all
    are, the task's metrics over the other pairs alone (``<split>_acc_unseen`` …): the result
    without the items the encoder may have memorised."""
    results: dict[str, float] = {}
    for split, frame in frames.items():
        seen_rows = seen_pairs(frame["sentence1"], frame["sentence2"], seen)
        results[f"{split}_seen_pairs"] = int(seen_rows.sum())
        if seen_rows.any() and not seen_rows.all():
            unseen = split_metrics(frame[~seen_rows], split, data)
            results.update({f"{name}_unseen": value for name, value in unseen.items()})
    return results


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


def scatter_figure(frames: dict[str, pd.DataFrame], data: PairData):
    """Predicted against gold score, one panel per split, over the task's range with the diagonal
    (a perfect regressor's line) and each split's Pearson r in its title."""
    low, high = data.task.score_range
    figure, axes = plt.subplots(1, len(frames), figsize=(4 * len(frames), 4), squeeze=False)
    for axis, (split, frame) in zip(axes[0], frames.items()):
        axis.scatter(frame["label"], frame["pred"], s=6, alpha=0.4, color="tab:blue", linewidths=0)
        axis.plot([low, high], [low, high], color="grey", linewidth=0.8)
        margin = 0.03 * (high - low)  # the points at either end of the range stay whole
        axis.set_xlim(low - margin, high + margin)
        axis.set_xlabel("gold score")
        axis.set_ylabel("predicted score")
        pearson = graded_metrics(frame, split)[f"{split}_pearson"]
        axis.set_title(f"{split} ({len(frame)} pairs, r = {pearson:.3f})")
    figure.tight_layout()
    return figure


# the figure of a task's predictions, by target: (its name under figures/, how it is drawn)
PREDICTION_FIGURES = {"classes": ("confusion_matrix", confusion_figure), "graded": ("scatter", scatter_figure)}


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
    test, log the task's metrics (``dev_acc, dev_f1, test_acc, test_f1``, or ``{dev,test}_pearson``
    and ``_spearman``) computed by sklearn or scipy from exactly the logged
    ``predictions/{dev,test}.csv``, the optimiser steps and epochs the fit took (``train_steps``,
    ``train_epochs``), where the encoder's pretraining text is known the pairs it holds and the
    metrics without them (:func:`unseen_metrics`), the task's figure (a confusion matrix, or a
    scatter of predicted against gold scores) and the mix-weight bar chart. The best
    checkpoint is read from the run's own checkpoint folder only, without running pickled code.
    Each figure is drawn once (``images``: name → pixels, which ``LogPredictionViews`` logs again
    as keyed images)."""

    def __init__(self):
        self.results: dict[str, float] = {}
        self.frames: dict[str, pd.DataFrame] = {}
        self.images: dict[str, np.ndarray] = {}
        self.seen: np.ndarray | None = None  # the digests of the encoder's pretraining text, where known

    def on_fit_end(self, trainer, pl_module):
        if not trainer.is_global_zero:
            return
        checkpoint_callback = trainer.checkpoint_callback
        best = checkpoint_callback.best_model_path if checkpoint_callback else ""
        if best:
            pl_module.load_state_dict(read_best(best, Path(checkpoint_callback.dirpath))["state_dict"])
        data = trainer.datamodule
        for split in ("dev", "test"):
            values, indices = pl_module.predictions(data.loader(split))
            self.frames[split] = predictions_frame(data.pair_data, data.pairs[split], values, indices)
            self.results.update(split_metrics(self.frames[split], split, data.pair_data))
        if self.seen is not None:
            self.results.update(unseen_metrics(self.frames, self.seen, data.pair_data))
        self.results.update(pl_module.mix_metrics())
        self.results.update(train_steps=trainer.global_step, train_epochs=trainer.current_epoch)
        logger = trainer.logger
        client, run_id = logger.experiment, logger.run_id
        logger.log_metrics(self.results, step=trainer.global_step + 1)
        for split, frame in self.frames.items():
            client.log_text(run_id, frame.to_csv(index=False), f"predictions/{split}.csv")
        figure_name, draw = PREDICTION_FIGURES[data.pair_data.task.target]
        self.images = {figure_name: rendered(draw(self.frames, data.pair_data))}
        if pl_module.mix is not None:
            weights = [self.results[f"mix_weight_{k}"] for k in range(pl_module.mix.num_layers)]
            self.images["mix_weights"] = rendered(
                mix_figure(weights, self.results["mix_gamma"], f"mix = {pl_module.hparams.mix}")
            )
        for name, image in self.images.items():
            client.log_image(run_id, image, artifact_file=f"figures/{name}.png")
