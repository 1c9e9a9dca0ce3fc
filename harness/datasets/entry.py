"""What a named data set of the registry states: how to read it from the ``--data.*`` flags, and
the facts runs and reports show about it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from harness.datasets.spec import PairDataSpec
from harness.datasets.task import CLASSES, Task
from harness.datasets.types import PairData

ANCHOR_TITLES = {"acc": "acc", "f1": "F1", "pearson": "Pearson", "spearman": "Spearman"}  # table columns


@dataclass(frozen=True)
class Anchors:
    """Published results on a data set's test split, shown beside a benchmark's for context: one
    figure × 100 per metric of ``metrics`` (the task's metric names), None where the paper gives none."""

    split: str  # the split they are on, as the report titles it
    rows: tuple[tuple[str | float | None, ...], ...]  # (system, one figure per metric, source)
    note: str = ""  # a line under the table
    metrics: tuple[str, ...] = ("acc", "f1")  # what the figures of a row are, in order

    def __post_init__(self):
        widths = {len(row) for row in self.rows} - {len(self.metrics) + 2}
        if widths:
            raise ValueError(f"anchor rows are (system, {', '.join(self.metrics)}, source), got widths {widths}")

    def column_titles(self) -> list[str]:
        """The table's figure columns: ``test acc``, ``test F1`` / ``test Pearson``, ``test Spearman``."""
        return [f"test {ANCHOR_TITLES.get(metric, metric)}" for metric in self.metrics]


@dataclass(frozen=True)
class DataSet:
    """One entry of the registry (``harness.datasets.registry``), named by ``--data.dataset``."""

    name: str  # the --data.dataset value
    load: Callable[[PairDataSpec], PairData]  # reads and checks it: a PairData of kind ``name``, or a UserError
    default_name: Callable[[PairDataSpec], str]  # its name in runs and reports without --data.name (no reading)
    task: Task = CLASSES  # what its pairs ask (the PairData it loads carries the same task)
    split_titles: Mapping[str, str] = field(default_factory=dict)  # e.g. dev "GLUE dev"; else "<name> <split>"
    class_titles: tuple[str, ...] = ()  # how figures name the labels, in label order; () the label names
    anchors: Anchors | None = None
    plain_run_names: bool = False  # True: runs of it under its own name carry no "<name>-" prefix
    hash_param: str | None = None  # a second param name for its content hash (beside dataset_hash)
    split_sizes: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # {content hash: {split: pairs}}
    # of a release whose content is fixed: what bounds a results folder's predictions of it
    release_overlap: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # {content hash:
    # {"train/dev": pairs, ...}}: the pairs a fixed release's own splits share, which the literature's
    # split keeps; exactly these are accepted (and said) whatever --data.max_split_overlap allows
    findable: Callable[[], bool] = lambda: False  # whether its files are where ``load`` looks without flags
    # (its variable, the data root), checked without reading or downloading: the data sets whose dev and
    # test sentences a pretraining run counts in its text
