"""The pre-registered control rule: a comparison counts only when both of its arms learned.

A gap over a twin that collapsed to one class, or sits at the majority rate, measures the recipe's
failure on the twin, not pretraining. So a comparison's control fails when any run of either arm
predicts one class for every test item, or either arm's mean test accuracy is no more than
``MAJORITY_MARGIN`` above the majority rate (within it, or below the rate). A failed comparison is
still shown, named with its reason, but never counted among the gaps that hold.

The majority rate is the share of the most frequent gold label among the test items: the best
accuracy a one-class predictor reaches there (MRPC test: 66.5%).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from benchmarks.stats.aggregate import is_collapsed
from benchmarks.stats.pairing import correctness

CONTROL_OK_COLUMN = "control_ok"  # results.csv: true / false for a method with a twin, empty otherwise
CONTROL_REASON_COLUMN = "control_reason"  # why it failed ("" when it held)
CONTROL_COLUMNS = (CONTROL_OK_COLUMN, CONTROL_REASON_COLUMN)
MAJORITY_MARGIN = 0.01  # an arm's mean test accuracy must exceed the majority rate by more than 1 point
RULE_TEXT = (
    "a comparison's control fails when any run of either arm predicts one class on test, or either "
    "arm's mean test accuracy is within 1 point of the majority rate (or below it)"
)


def control_failed(value) -> bool:
    """Whether a ``control_ok`` value says the control failed: False (or "false" read back from a
    CSV); True, None or NaN (no twin comparison) do not."""
    if isinstance(value, str):
        return value.strip().lower() == "false"
    return value is not None and not pd.isna(value) and not bool(value)


def majority_rate(predictions: pd.DataFrame) -> float:
    """The share of the most frequent gold label among a predictions table's items."""
    return float(predictions["label"].astype(str).value_counts(normalize=True).iloc[0])


def _arm_failure(name: str, runs: Mapping, rate: float) -> str:
    """What the rule finds wrong with one arm (``{seed: predictions}``): its collapsed runs and a
    mean test accuracy at or below the majority rate plus the margin; "" when nothing."""
    failures = []
    collapsed = sum(is_collapsed(frame) for frame in runs.values())
    if collapsed:
        failures.append(f"one class in {collapsed}/{len(runs)} runs")
    accuracy = float(np.mean([correctness(frame).mean() for frame in runs.values()]))
    if accuracy <= rate + MAJORITY_MARGIN:
        failures.append(
            f"mean test acc {100 * accuracy:.1f}% ≤ majority {100 * rate:.1f}% + {100 * MAJORITY_MARGIN:g} point"
        )
    return f"`{name}`: {', '.join(failures)}" if failures else ""


def failed_arms(reason: str) -> dict[str, str]:
    """The arms a ``control_check`` reason names, each with what the rule found wrong with it."""
    arms = {}
    for part in filter(None, (text.strip() for text in str(reason).split("; `"))):
        name, _, failures = part.strip("`").partition("`: ")
        if failures:
            arms[name] = failures
    return arms


def control_check(method: str, method_runs: Mapping, twin: str, twin_runs: Mapping) -> tuple[bool, str]:
    """Whether the comparison of ``method`` with its ``twin`` passes the rule, and why not.

    Args:
        method_runs, twin_runs: ``{seed: test predictions DataFrame}``, every run of each arm.

    Returns:
        ``(True, "")`` or ``(False, reason)``, the reason naming each failing arm.
    """
    if not method_runs or not twin_runs:
        raise ValueError(f"control_check: {method} or its twin {twin} has no test predictions")
    rate = majority_rate(next(iter(method_runs.values())))
    failures = [text for text in (_arm_failure(method, method_runs, rate), _arm_failure(twin, twin_runs, rate)) if text]
    return not failures, "; ".join(failures)
