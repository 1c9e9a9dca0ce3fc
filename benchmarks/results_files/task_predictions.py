"""What a results folder's predictions files hold and score, read from the folder's task: the
columns after the ids, which values each may take, and the run metrics recomputed from them, so a
graded cell is checked field by field exactly as a cell of classes is.

A folder names its data set in its settings (``settings.dataset.dataset``, MRPC when absent, as the
suite reads it); the registry entry of that name gives the task (``harness.datasets.task``). Its
labels must agree with it: two or more for classes, none for a graded task."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from harness.datasets.registry import DATASETS, dataset_choices, task_of
from harness.datasets.spec import PairDataSpec
from harness.datasets.task import Task, graded_metrics
from harness.errors import UserError

SPLITS = ("dev", "test")
NUMBER_BYTES = 32  # a number's text in a predictions file, at most (a probability, a score)


def folder_dataset(benchmark: dict) -> str:
    """The registry name of a folder's data set: its settings' ``dataset.dataset``, else the default."""
    section = (benchmark.get("settings") or {}).get("dataset") or {}
    return str(section.get("dataset") or PairDataSpec().dataset) if isinstance(section, dict) else ""


def folder_task(benchmark: dict, path: Path) -> Task:
    """The task of a folder's data set, checked against its labels; a data set this harness does not
    know or labels that do not fit the task are one line naming ``path``."""
    name = folder_dataset(benchmark)
    if name not in DATASETS:
        raise UserError(
            f"{path}: settings.dataset.dataset {name[:40]!r} is not a data set this harness knows "
            f"({dataset_choices()}): register it to read the folder"
        )
    task = task_of(name)
    labels = benchmark["labels"]
    if task.graded == bool(labels) or not task.graded and len(labels) < 2:
        expected = "no labels (a graded score)" if task.graded else "at least 2 labels"
        raise UserError(f"{path}: labels {labels[:5]} for data set {name!r}, which has {expected}: edited by hand?")
    return task


@dataclass(frozen=True)
class ClassPredictions:
    """Predictions of a task of classes: a probability per class (``prob`` = P(positive) for 2
    labels), the predicted label; accuracy and F1 as ``downstream.run.evaluation`` computes them."""

    labels: list[str]
    positive_label: str | None

    def number_bytes(self) -> int:
        """Room a row needs for its probabilities (beside a row's split, ids, label and prediction)."""
        return NUMBER_BYTES * len(self.labels)

    def columns(self) -> list[str]:
        return ["label", *(["prob"] if len(self.labels) == 2 else [f"prob_{label}" for label in self.labels]), "pred"]

    def check_values(self, frame: pd.DataFrame, path: Path) -> None:
        """Labels and predictions among the data set's labels; probabilities numbers."""
        for column in ("label", "pred"):
            strange = sorted(set(frame[column]) - set(self.labels))
            if strange:
                raise UserError(f"{path}: {column} {strange[0][:40]!r} is not one of {', '.join(self.labels)[:200]}")
        for column in self.columns()[1:-1]:
            if not pd.api.types.is_float_dtype(frame[column]) and not pd.api.types.is_integer_dtype(frame[column]):
                raise UserError(f"{path}: {column} holds something other than numbers")

    def metrics(self, frame: pd.DataFrame, split: str) -> dict[str, float]:
        """``<split>_acc`` and ``<split>_f1`` as sklearn computes them (binary F1 of the positive label
        for 2 labels, else macro F1 over the labels present), from counts: sklearn's input checks cost
        seconds over a folder."""
        if not len(frame):
            return {f"{split}_acc": math.nan, f"{split}_f1": math.nan}
        truth, predicted = frame["label"].astype(str).to_numpy(), frame["pred"].astype(str).to_numpy()
        if len(self.labels) == 2:
            score = f1(truth, predicted, self.positive_label or self.labels[-1])
        else:
            score = float(np.mean([f1(truth, predicted, label) for label in np.union1d(truth, predicted)]))
        return {f"{split}_acc": float(np.mean(truth == predicted)), f"{split}_f1": score}


@dataclass(frozen=True)
class GradedPredictions:
    """Predictions of a graded task: the gold score (``label``, within the task's range) and the
    predicted score (``pred``, any finite number); the task's correlations (scipy)."""

    task: Task

    def number_bytes(self) -> int:
        """Room a row needs for its two scores written in full."""
        return 2 * NUMBER_BYTES

    def columns(self) -> list[str]:
        return ["label", "pred"]

    def check_values(self, frame: pd.DataFrame, path: Path) -> None:
        low, high = self.task.score_range
        for column in ("label", "pred"):
            values = pd.to_numeric(frame[column], errors="coerce")
            bad = ~np.isfinite(values.to_numpy(dtype=float))
            if column == "label":
                bad |= ~values.between(low, high).to_numpy()
            if bad.any():
                shown = str(frame[column][bad].iloc[0])[:40]
                where = f"a score in [{low:g}, {high:g}]" if column == "label" else "a finite number"
                raise UserError(f"{path}: {column} {shown!r} is not {where}")

    def metrics(self, frame: pd.DataFrame, split: str) -> dict[str, float]:
        numbers = frame[["label", "pred"]].apply(pd.to_numeric)
        return graded_metrics(numbers, split)


TARGETS = {  # a task's target → how its predictions look and score
    "classes": lambda task, labels, positive: ClassPredictions(labels, positive),
    "graded": lambda task, labels, positive: GradedPredictions(task),
}


Predictions = ClassPredictions | GradedPredictions


def predictions_of(task: Task, labels: list[str], positive_label: str | None) -> Predictions:
    """How the predictions of ``task`` (with the folder's ``labels``) look and score."""
    return TARGETS[task.target](task, list(labels), positive_label)


def f1(truth: np.ndarray, predicted: np.ndarray, label: str) -> float:
    """F1 of one label: 2·TP / (2·TP + FP + FN), 0 where it has no true positive (sklearn's zero_division=0)."""
    true_positives = np.sum((truth == label) & (predicted == label))
    errors = np.sum((truth == label) != (predicted == label))
    return float(2 * true_positives / (2 * true_positives + errors)) if true_positives else 0.0
