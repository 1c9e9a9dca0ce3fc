"""How reports print a run metric: × 100, accuracy and F1 as percentages (``85.3%``), a correlation
as points (``85.3``, SentEval's and MTEB's way), each titled by ``harness.datasets.task.metric_title``."""

from __future__ import annotations

import math

from harness.datasets.task import metric_title

PERCENT_METRICS = ("acc", "f1")  # fractions of items; the others (correlations) have no unit


def points(value: float, metric: str, digits: int = 1) -> str:
    """``value`` of ``metric`` (``test_acc``, ``pearson``) × 100: ``85.3%`` or ``85.3``; ``—`` for NaN."""
    if value is None or math.isnan(value):
        return "—"
    unit = "%" if metric.rpartition("_")[2] in PERCENT_METRICS else ""
    return f"{100 * value:.{digits}f}{unit}"


def main_test_metric(task) -> str:
    """The test metric a task's rows are ranked by: ``test_acc``, ``test_pearson``."""
    return f"test_{task.main_metric}"


__all__ = ["main_test_metric", "metric_title", "points"]
