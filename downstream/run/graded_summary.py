"""The context block of a graded task's finetune summary: this run's test correlations × 100 with
their bootstrap interval over the test pairs, the task's baselines on the same pairs, and its other
arm. A task of classes keeps its own block (``downstream.run.summary_comparisons.context_lines``)."""

from __future__ import annotations

import pandas as pd

from downstream.run.item_intervals import correlation_line
from downstream.run.summary_comparisons import baseline_lines, scores_text
from harness.datasets.task import Task, metric_title


def context_lines(
    results: dict[str, float],
    frame: pd.DataFrame,
    scores: dict[str, dict | str] | None,
    twin,
    is_random: bool,
    task: Task,
    scored_on: str,
    twin_flags: str,
) -> list[str]:
    """``context``: this run's test scores (said collapsed where its test predictions are constant:
    no correlation), its 95% bootstrap interval over the test pairs
    (:func:`downstream.run.item_intervals.correlation_line`), the task's baselines on the same pairs
    (``scores``: ``summary_comparisons.baseline_scores``, None where not computed) and, when the
    store holds it, the other arm (``twin``: an MLflow run or None) with the gap pretrained − random
    in the main metric."""
    other = "pretrained counterpart" if is_random else "random twin"
    collapsed = frame["pred"].nunique() == 1
    lines = [
        f"  {'context':<10} test, × 100 ({scored_on}, the same pairs in every row)",
        f"  {'':<10} {scores_text(results, task)}   this run"
        + (" (one score for every pair: collapsed)" if collapsed else ""),
        f"  {'':<10} {correlation_line(frame)}",
        *baseline_lines(scores, task),
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
        f"  {'':<10} {scores_text(metrics, task)}   {other} (run {twin.info.run_id})",
        f"  {'gap':<10} {100 * (pretrained[main] - random[main]):+.1f}  {metric_title(main)} × 100"
        " (pretrained − random twin), 1 seed each:",
        f"  {'':<10} `make benchmark` repeats seeds and tests such a gap",
    ]
