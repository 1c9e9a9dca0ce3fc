"""How reports print a run metric: × 100, accuracy and F1 as percentages (``85.3%``), a correlation
as points (``85.3``, SentEval's and MTEB's way), each titled by ``harness.datasets.task.metric_title``."""

from __future__ import annotations

import math

from harness.datasets.task import metric_title

PERCENT_METRICS = ("acc", "f1")  # fractions of items; the others (correlations) have no unit
SHORT_TITLES = {"acc": "acc", "f1": "F1", "pearson": "Pearson", "spearman": "Spearman"}  # table headers


def is_percent(metric: str) -> bool:
    """Whether ``metric`` (``test_acc``, ``pearson``) is a fraction of items, printed as a percentage."""
    return metric.rpartition("_")[2] in PERCENT_METRICS


def unit(metric: str) -> str:
    """How a table's header says its numbers are scaled: ``%`` or ``× 100``."""
    return "%" if is_percent(metric) else "× 100"


def points(value: float, metric: str, digits: int = 1) -> str:
    """``value`` of ``metric`` (``test_acc``, ``pearson``) × 100: ``85.3%`` or ``85.3``; ``—`` for NaN."""
    if value is None or math.isnan(value):
        return "—"
    return f"{100 * value:.{digits}f}{'%' if is_percent(metric) else ''}"


def short_title(metric: str) -> str:
    """A table header's name for a run metric: ``test_acc`` → ``test acc``, ``dev_pearson`` → ``dev Pearson``."""
    split, _, name = metric.rpartition("_")
    title = SHORT_TITLES.get(name, name)
    return f"{split} {title}" if split else title


def title_case(text: str) -> str:
    """``test accuracy`` → ``Test accuracy`` (the rest as it is: ``F1``, ``Pearson r``)."""
    return text[:1].upper() + text[1:]


def metrics_sentence(task) -> str:
    """How a table's numbers are said: ``Accuracy and F1 in %``, ``Pearson r and Spearman ρ × 100``."""
    titles = [metric_title(metric) for metric in task.metrics]
    said = " and ".join([title_case(titles[0]), *titles[1:]])
    return f"{said} in %" if all(map(is_percent, task.metrics)) else f"{said} × 100"


def main_test_metric(task) -> str:
    """The test metric a task's rows are ranked by: ``test_acc``, ``test_pearson``."""
    return f"test_{task.main_metric}"


__all__ = ["main_test_metric", "metric_title", "metrics_sentence", "points", "short_title", "title_case", "unit"]
