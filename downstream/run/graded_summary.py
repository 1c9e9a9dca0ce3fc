"""The lines of a graded task's finetune summary: its dev and test correlations and the context
they are read against (this run's bootstrap interval over the test pairs, its other arm). Like every
report of a correlation here, the summary prints them × 100 (``harness.datasets.task``); a task of
classes keeps its accuracy and F1 lines (``downstream.run.cli``, ``downstream.run.summary_comparisons``)."""

from __future__ import annotations

import pandas as pd

from downstream.run.item_intervals import correlation_line
from harness.datasets.task import Task, metric_title


def scores_text(results: dict[str, float], split: str, task: Task) -> str:
    """``Pearson r 71.2  Spearman ρ 69.8``: the task's metrics of ``split`` × 100."""
    return "  ".join(f"{metric_title(metric)} {100 * results[f'{split}_{metric}']:.1f}" for metric in task.metrics)


def context_lines(
    results: dict[str, float], frame: pd.DataFrame, twin, is_random: bool, task: Task, scored_on: str, twin_flags: str
) -> list[str]:
    """``context``: this run's test scores, its 95% bootstrap interval over the test pairs
    (:func:`downstream.run.item_intervals.correlation_line`) and, when the store holds it, the other
    arm (``twin``: an MLflow run or None) with the gap pretrained − random in the main metric;
    ``collapsed`` said where the test predictions are constant (no correlation)."""
    other = "pretrained counterpart" if is_random else "random twin"
    collapsed = frame["pred"].nunique() == 1
    lines = [
        f"  {'context':<10} test, × 100 ({scored_on}, the same pairs in every row)",
        f"  {'':<10} {scores_text(results, 'test', task)}   this run"
        + (" (one score for every pair: collapsed)" if collapsed else ""),
        f"  {'':<10} {correlation_line(frame)}",
    ]
    if twin is None:
        return [
            *lines,
            f"  {'gap':<10} no {other} with these settings in the store yet; to run it, add",
            f"  {'':<10}   {twin_flags}",
        ]
    metrics = twin.data.metrics
    main = f"test_{task.main_metric}"
    pretrained, random = (metrics, results) if is_random else (results, metrics)
    return [
        *lines,
        f"  {'':<10} {scores_text(metrics, 'test', task)}   {other} (run {twin.info.run_id})",
        f"  {'gap':<10} {100 * (pretrained[main] - random[main]):+.1f}  {metric_title(main)} × 100"
        " (pretrained − random twin), 1 seed each:",
        f"  {'':<10} `make benchmark` repeats seeds and tests such a gap",
    ]
