"""The pre-registered control rule: a comparison counts only when both of its arms learned.

A gap over a twin that collapsed, or sits at chance, measures the recipe's failure on the twin, not
pretraining. The rule is the task's (:data:`RULES`, keyed by ``Task.target``); a failed comparison
is still shown, named with its reason, but never counted among the gaps that hold.

**Classes.** A comparison's control fails when any run of either arm predicts one class for every
test item, or either arm's mean test accuracy is no more than ``MAJORITY_MARGIN`` above the majority
rate (within it, or below the rate). The majority rate is the share of the most frequent gold label
among the test items: the best accuracy a one-class predictor reaches there (MRPC test: 66.5%).

**Graded** (stated before any study of a graded task used it). A comparison's control fails when
any run of either arm collapsed (test predictions (near) constant: ``aggregate.is_collapsed``), or
either arm's mean test correlation (the compared one: Pearson for a trained regressor, Spearman for
zero-shot similarity) is not clearly above zero: the lower end of its 95% CI, over seeds × items
from the arm's per-item scores (``gaps.crossed_gap`` against 0; over items alone with one seed), is
at or below 0. A correlation has no majority rate: its chance level is 0 whatever the labels, and a
bound set by the arm's own noise, not a fixed margin, says "learned something" at any test-set size.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pandas as pd
from scipy import stats

from benchmarks.stats.aggregate import is_collapsed
from benchmarks.stats.gaps import crossed_gap
from benchmarks.stats.pairing import correctness, paired_metric, paired_scores
from harness.datasets.task import CLASSES, Task, metric_title

CONTROL_OK_COLUMN = "control_ok"  # results.csv: true / false for a method with a twin, empty otherwise
CONTROL_REASON_COLUMN = "control_reason"  # why it failed ("" when it held)
CONTROL_COLUMNS = (CONTROL_OK_COLUMN, CONTROL_REASON_COLUMN)
MAJORITY_MARGIN = 0.01  # an arm's mean test accuracy must exceed the majority rate by more than 1 point
RULE_TEXT = (
    "a comparison's control fails when any run of either arm predicts one class on test, or either "
    "arm's mean test accuracy is within 1 point of the majority rate (or below it)"
)
RULE_TEXTS = {
    "classes": RULE_TEXT,
    "graded": (
        "a comparison's control fails when any run of either arm predicts a (near) constant score on "
        "test, or the lower end of either arm's 95% CI of its mean test correlation (seeds × items) "
        "is at or below 0"
    ),
}


def rule_text(task: Task = CLASSES) -> str:
    """The control rule of ``task``'s comparisons, as reports state it."""
    return RULE_TEXTS[task.target]


def control_failed(value) -> bool:
    """Whether a ``control_ok`` value says the control failed: False (or "false" read back from a
    CSV); True, None or NaN (no twin comparison) do not."""
    if isinstance(value, str):
        return value.strip().lower() == "false"
    return value is not None and not pd.isna(value) and not bool(value)


def majority_rate(predictions: pd.DataFrame) -> float:
    """The share of the most frequent gold label among a predictions table's items."""
    return float(predictions["label"].astype(str).value_counts(normalize=True).iloc[0])


def _class_failures(runs: Mapping, reference: pd.DataFrame, task: Task, metric: str | None) -> list[str]:
    """Collapsed runs and a mean test accuracy at or below the majority rate (of ``reference``'s
    items) plus the margin."""
    failures = []
    collapsed = sum(is_collapsed(frame, task) for frame in runs.values())
    if collapsed:
        failures.append(f"one class in {collapsed}/{len(runs)} runs")
    rate = majority_rate(reference)
    accuracy = float(np.mean([correctness(frame).mean() for frame in runs.values()]))
    if accuracy <= rate + MAJORITY_MARGIN:
        failures.append(
            f"mean test acc {100 * accuracy:.1f}% ≤ majority {100 * rate:.1f}% + {100 * MAJORITY_MARGIN:g} point"
        )
    return failures


def correlation_lower_bound(runs: Mapping, task: Task, metric: str | None = None, confidence: float = 0.95):
    """An arm's mean test correlation over its runs and the lower end of its CI: ``crossed_gap`` on
    its (S, N) per-item scores against 0, or over items alone (a t on N - 1 df) with one run."""
    _, scores, _ = paired_scores(runs, runs, "arm", task, metric)  # (S, N), items aligned on their ids
    if len(scores) >= 2:
        reading = crossed_gap(scores, confidence)
        return float(reading.gap), float(reading.ci_low)
    items = scores.shape[1]
    error = scores[0].std(ddof=1) / np.sqrt(items)
    mean = float(scores[0].mean())
    return mean, float(mean - stats.t.ppf(0.5 + confidence / 2, items - 1) * error)


def _graded_failures(runs: Mapping, reference: pd.DataFrame, task: Task, metric: str | None) -> list[str]:
    """Collapsed runs, and a mean test correlation whose 95% lower bound (over the rest) is not above 0."""
    failures = []
    collapsed = {seed for seed, frame in runs.items() if is_collapsed(frame, task)}
    if collapsed:
        failures.append(f"constant predictions in {len(collapsed)}/{len(runs)} runs")
    learned = {seed: frame for seed, frame in runs.items() if seed not in collapsed}
    if learned:
        mean, low = correlation_lower_bound(learned, task, metric)
        if not low > 0:
            title = metric_title(f"test_{paired_metric(task, metric)}")
            failures.append(f"mean {title} {100 * mean:.1f} (95% CI low {100 * low:.1f}) not above 0")
    return failures


RULES: dict[str, Callable[[Mapping, pd.DataFrame, Task, str | None], list[str]]] = {
    "classes": _class_failures,
    "graded": _graded_failures,
}


def _arm_failure(name: str, runs: Mapping, reference: pd.DataFrame, task: Task, metric: str | None) -> str:
    """What the task's rule finds wrong with one arm (``{seed: predictions}``); "" when nothing."""
    failures = RULES[task.target](runs, reference, task, metric)
    return f"`{name}`: {', '.join(failures)}" if failures else ""


def failed_arms(reason: str) -> dict[str, str]:
    """The arms a ``control_check`` reason names, each with what the rule found wrong with it."""
    arms = {}
    for part in filter(None, (text.strip() for text in str(reason).split("; `"))):
        name, _, failures = part.strip("`").partition("`: ")
        if failures:
            arms[name] = failures
    return arms


def control_check(
    method: str,
    method_runs: Mapping,
    twin: str,
    twin_runs: Mapping,
    task: Task = CLASSES,
    metric: str | None = None,
) -> tuple[bool, str]:
    """Whether the comparison of ``method`` with its ``twin`` passes the task's rule, and why not.

    Args:
        method_runs, twin_runs: ``{seed: test predictions DataFrame}``, every run of each arm.
        task, metric: the task and the compared score (a graded task's correlation; its main one by default).

    Returns:
        ``(True, "")`` or ``(False, reason)``, the reason naming each failing arm.
    """
    if not method_runs or not twin_runs:
        raise ValueError(f"control_check: {method} or its twin {twin} has no test predictions")
    reference = next(iter(method_runs.values()))
    failures = [
        text
        for text in (
            _arm_failure(method, method_runs, reference, task, metric),
            _arm_failure(twin, twin_runs, reference, task, metric),
        )
        if text
    ]
    return not failures, "; ".join(failures)
