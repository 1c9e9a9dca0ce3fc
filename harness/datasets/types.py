"""What a sentence-pair data set is, whatever read it: train / dev / test lists of :class:`Pair`
with the id columns of its prediction files, a content hash and its :class:`~harness.datasets.task.Task`.
A task of classes has k >= 2 labels (with 2, F1 is the binary F1 of ``positive_label``; with more,
macro F1); a graded task has no label names, and each pair's ``label`` is its score."""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

from harness.datasets.task import CLASSES, Task

SPLITS = ("train", "dev", "test")


@dataclass(frozen=True, slots=True)
class Pair:
    """One labelled pair: ``label`` indexes ``PairData.labels`` (classes) or is the gold score (a
    graded task); ``ids`` align with ``PairData.id_columns``."""

    label: int | float
    ids: tuple[str, ...]
    sentence1: str
    sentence2: str


@dataclass(frozen=True)
class PairData:
    """A pair data set: three splits, the label names (index = class id; none for a graded task),
    a content hash and the task."""

    name: str  # the data set's name in run names, tags, experiments and reports
    labels: list[str]  # label names; labels[pair.label] is a pair's label ([] for a graded task)
    id_columns: tuple[str, ...]  # names of pair.ids in prediction files: MRPC ("id1", "id2"), TSV ("id",)
    train: list[Pair]
    dev: list[Pair]
    test: list[Pair]
    content_hash: str  # sha256 over the sha256 of each file's normalised text, one hex digest per line
    positive_label: str | None = None  # 2 labels: the class binary F1 is about (default: labels[-1])
    kind: str = "tsv"  # the registry entry that read it (``--data.dataset``)
    source: str = ""  # what was read (a folder or the train file): the source of its MLflow dataset inputs
    train_file: str = ""  # the file of the train split: the source of the pretraining corpus it gives
    split_overlap: dict[str, int] = field(default_factory=dict)  # overlap_train_dev, …: shared pairs (params)
    task: Task = CLASSES  # what is predicted and how it is scored

    def __post_init__(self):
        if self.task.graded:
            self._check_scores()
            return
        if len(self.labels) < 2 or len(set(self.labels)) != len(self.labels):
            raise ValueError(f"a pair data set needs at least 2 distinct labels, got {self.labels}")
        if self.positive_label is None and len(self.labels) == 2:
            object.__setattr__(self, "positive_label", self.labels[-1])
        if self.positive_label is not None and (len(self.labels) != 2 or self.positive_label not in self.labels):
            raise ValueError(f"positive_label {self.positive_label!r} must be one of 2 labels, got {self.labels}")
        for split in SPLITS:
            classes = {pair.label for pair in self.split(split)}
            id_widths = {len(pair.ids) for pair in self.split(split)}
            if not classes <= set(range(len(self.labels))) or id_widths - {len(self.id_columns)}:
                raise ValueError(
                    f"{split} pairs have labels {sorted(classes)} and {sorted(id_widths)} ids; "
                    f"expected indexes into {self.labels} and {len(self.id_columns)} ids"
                )

    def _check_scores(self):
        low, high = self.task.score_range
        if self.labels or self.positive_label is not None:
            raise ValueError(f"a graded data set has no label names, got {self.labels}")
        for split in SPLITS:
            outside = [pair.label for pair in self.split(split) if not low <= float(pair.label) <= high]
            id_widths = {len(pair.ids) for pair in self.split(split)}
            if outside or id_widths - {len(self.id_columns)}:
                raise ValueError(
                    f"{split} pairs have scores {outside[:3]} outside [{low:g}, {high:g}] or {sorted(id_widths)} "
                    f"ids; expected {len(self.id_columns)} ids"
                )

    @property
    def num_classes(self) -> int:
        """Labels of a task of classes (0 for a graded task)."""
        return len(self.labels)

    @property
    def positive_class(self) -> int | None:
        """Class id of ``positive_label`` (None for more than 2 labels)."""
        return None if self.positive_label is None else self.labels.index(self.positive_label)

    @property
    def f1_average(self) -> str:
        """``"binary"`` (F1 of the positive class) for 2 labels, ``"macro"`` for more: sklearn's ``average``."""
        return "binary" if self.num_classes == 2 else "macro"

    def split(self, name: str) -> list[Pair]:
        if name not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {name!r}")
        return getattr(self, name)

    def sentences(self, *splits: str) -> list[str]:
        """Unique sentences of the named splits (default: all), first seen first, sentence1 before sentence2."""
        pairs = (pair for name in splits or SPLITS for pair in self.split(name))
        return list(dict.fromkeys(sentence for pair in pairs for sentence in (pair.sentence1, pair.sentence2)))

    def label_counts(self, split: str) -> dict[str, int]:
        """Pairs per label name in a split, every label listed (0 when absent), in label order ({}
        for a graded task)."""
        counts = Counter(pair.label for pair in self.split(split))
        return {label: counts[index] for index, label in enumerate(self.labels)}

    def ids_by_column(self, pairs: list[Pair]) -> dict[str, list[str]]:
        """The ids of ``pairs`` as columns named by ``id_columns`` (the first columns of a predictions file)."""
        return {column: [pair.ids[k] for pair in pairs] for k, column in enumerate(self.id_columns)}


def combine_digests(digests: list[str]) -> str:
    """sha256 over hex digests, one per line: a data set's content hash from its files' digests."""
    return hashlib.sha256("".join(digest + "\n" for digest in digests).encode("ascii")).hexdigest()
