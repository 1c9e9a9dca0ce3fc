"""What a pair data set asks of a model, declared once by its registry entry: the target (classes,
or a graded score over a range), the metrics and the main score, what checkpoints monitor, the
per-item values the statistics pair on, and the baselines run beside it. The rest of the harness
reads the task instead of assuming classes.

Metrics are logged as ``<split>_<metric>`` (``dev_acc``, ``test_pearson``): accuracy and F1 as
fractions in [0, 1], correlations in [-1, 1]; reports print both × 100. Every value is sklearn's or
scipy's on the predictions file's columns, so it can be recomputed from a run's artifacts.

Anchors: SentEval (Pearson of a trained regressor on SICK-R and STS-B), MTEB's STS tasks (Spearman
of cosine similarities), lm-eval's task YAML (a task names its metrics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # numpy and pandas load where numbers are handled, not with every data-set import
    import numpy as np
    import pandas as pd

Target = Literal["classes", "graded"]
EVALUATION_SPLITS = ("dev", "test")

METRIC_TITLES = {
    "acc": "accuracy",
    "f1": "F1",
    "pearson": "Pearson r",
    "spearman": "Spearman ρ",
}


@dataclass(frozen=True)
class Task:
    """One kind of pair task.

    ``metrics``: the metric names every run of the task logs per evaluation split; ``main_metric``
    the one a row is ranked by, a recipe picked by (on dev) and checkpoints monitor;
    ``zero_shot_metric`` the main score of a method without training (MTEB's Spearman for graded
    tasks); ``score_range`` a graded target's (low, high); ``baselines`` the names of the control
    systems fit beside every study of the task (``downstream.run.baselines``).
    """

    target: Target
    metrics: tuple[str, ...]
    main_metric: str
    baselines: tuple[str, ...]
    zero_shot_metric: str | None = None
    score_range: tuple[float, float] | None = None

    def __post_init__(self):
        if self.main_metric not in self.metrics or (self.zero_shot_metric or self.main_metric) not in self.metrics:
            raise ValueError(f"main_metric and zero_shot_metric must be among {self.metrics}")
        graded = self.target == "graded"
        if graded != (self.score_range is not None):
            raise ValueError("a graded task states its score_range; a task of classes has none")
        if graded and not self.score_range[0] < self.score_range[1]:
            raise ValueError(f"score_range {self.score_range}: low must be below high")

    @property
    def graded(self) -> bool:
        return self.target == "graded"

    @property
    def monitor(self) -> str:
        """The dev metric checkpoints and early stopping follow (``mode="max"`` for every metric here)."""
        return f"dev_{self.main_metric}"

    def run_metrics(self, splits: tuple[str, ...] = EVALUATION_SPLITS) -> list[str]:
        """``<split>_<metric>`` for each split and metric: what a run of the task logs."""
        return [f"{split}_{metric}" for split in splits for metric in self.metrics]

    def output_size(self, num_classes: int) -> int:
        """Outputs of a head: one logit per class, or one number for a graded score."""
        return 1 if self.graded else num_classes

    def scaled(self, scores: np.ndarray) -> np.ndarray:
        """A graded target mapped onto [0, 1] (what a regression head learns), from its range."""
        import numpy as np

        low, high = self.score_range
        return (np.asarray(scores, dtype=float) - low) / (high - low)

    def unscaled(self, values: np.ndarray) -> np.ndarray:
        """The inverse of :meth:`scaled`: a head's output on the task's own scale."""
        import numpy as np

        low, high = self.score_range
        return low + np.asarray(values, dtype=float) * (high - low)


def metric_title(metric: str) -> str:
    """How a summary names ``acc`` / ``test_pearson`` / …: ``accuracy``, ``test Pearson r``."""
    split, _, name = metric.rpartition("_") if "_" in metric else ("", "", metric)
    title = METRIC_TITLES.get(name, name)
    return f"{split} {title}" if split else title


def graded_metrics(frame: pd.DataFrame, split: str) -> dict[str, float]:
    """``<split>_pearson`` and ``<split>_spearman`` of the predictions file's ``pred`` against its
    gold ``label`` (scipy); NaN where the predictions are constant (a correlation is undefined)."""
    import numpy as np
    from scipy.stats import pearsonr, spearmanr

    gold = frame["label"].to_numpy(dtype=float)
    predicted = frame["pred"].to_numpy(dtype=float)
    if len(gold) < 2 or np.ptp(predicted) == 0 or np.ptp(gold) == 0:
        return {f"{split}_pearson": float("nan"), f"{split}_spearman": float("nan")}
    return {
        f"{split}_pearson": float(pearsonr(predicted, gold).statistic),
        f"{split}_spearman": float(spearmanr(predicted, gold).statistic),
    }


CLASSES = Task(target="classes", metrics=("acc", "f1"), main_metric="acc", baselines=("majority", "tfidf-lr"))


def graded(low: float, high: float) -> Task:
    """A graded similarity task scored over [low, high]: Pearson (main, SentEval's) and Spearman
    (zero-shot's main, MTEB's), beside the word-overlap cosine and ridge over the overlap features."""
    return Task(
        target="graded",
        metrics=("pearson", "spearman"),
        main_metric="pearson",
        zero_shot_metric="spearman",
        score_range=(float(low), float(high)),
        baselines=("overlap-cosine", "tfidf-ridge"),
    )
