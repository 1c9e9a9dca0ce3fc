"""The report's account of recipes chosen in a selection (``recipe_from:``): each arm's grid points
with their mean dev score (the task's main metric) and the pick its cells ran at, and the head a ``picked`` arm's cells
used, for ``results.csv``."""

from __future__ import annotations

import pandas as pd

from benchmarks.cell.run_table import text_column
from benchmarks.plan.lr_selection import dev_mean
from benchmarks.plan.matrix import PICKED_HEAD
from benchmarks.report.probe_checks import MAJORITY
from benchmarks.stats.controls import (
    CONTROL_OK_COLUMN,
    CONTROL_REASON_COLUMN,
    MAJORITY_MARGIN,
    control_failed,
    failed_arms,
)
from harness.datasets.metric_text import metric_title, points, short_title, unit
from harness.datasets.task import CLASSES, Task


def picked_heads(runs: pd.DataFrame) -> dict[str, str]:
    """Method → the head its cells ran with, for methods whose head was picked on dev (``…-picked``)."""
    if "recipe_from" not in runs:
        return {}
    picked = runs[(text_column(runs, "recipe_from") != "") & runs["method"].map(is_picked)]
    return {method: "/".join(dict.fromkeys(group["head"].astype(str))) for method, group in picked.groupby("method")}


def is_picked(method: str) -> bool:
    """Whether a method's head is the one chosen on dev: ``<encoder>-<transfer>-picked[@fraction]``."""
    return str(method).partition("@")[0].endswith(f"-{PICKED_HEAD}")


def recipe_section(table: pd.DataFrame, results: pd.DataFrame | None = None, task: Task = CLASSES) -> list[str]:
    """Markdown lines: per arm, its selection's grid (the mean of the task's main dev metric per head
    and rate, × 100, the pick in bold) and the folder it came from, then why each arm that failed the
    control rule at its pick did (``results``: the results table); [] without a selection."""
    if not len(table):
        return []
    mean, short = dev_mean(task), short_title(task.monitor)
    rows = []
    for (method, folder), group in table.groupby(["method", "folder"], sort=False):
        several = group["head"].nunique() > 1
        points = []
        for head, rate, dev, seeds, chosen in zip(
            group["head"], group["learning_rate"], group[mean], group["n_seeds"], group["chosen"]
        ):
            text = f"{head} {rate:g}" if several else f"{rate:g}"
            text = f"{text}: {100 * dev:.1f}" + (f" ({seeds} seeds)" if seeds != 1 else "")
            points.append(f"**{text}**" if chosen else text)
        pick = group[group["chosen"]].iloc[0]
        rows.append(f"| `{method}` | {', '.join(points)} | {pick['head']} at {pick['learning_rate']:g} | `{folder}` |")
    return [
        "",
        "## Recipes chosen per arm on dev",
        "",
        "Each arm (a method, and its random-init twin apart) took the point of its selection's pre-declared grid "
        f"with the best mean {metric_title(task.monitor)} ({unit(task.monitor)}; one seed of its own, pretraining "
        "run 0; test never decides), and every cell of the arm ran at it.",
        "",
        f"| arm | mean {short} by grid point | pick | selection |",
        "|---|---|---|---|",
        *rows,
        *failed_after_selection(table, results, task),
    ]


def failed_after_selection(table: pd.DataFrame, results: pd.DataFrame | None, task: Task = CLASSES) -> list[str]:
    """Why each arm of a comparison that failed the control rule failed at its own pick: no grid
    point learned on dev (the best within 1 point of the majority baseline's dev accuracy, or below),
    or the pick learned on its selection seed and not on the final ones; [] when none failed."""
    if results is None or CONTROL_REASON_COLUMN not in results:
        return []
    reasons = results[results[CONTROL_OK_COLUMN].map(control_failed)][CONTROL_REASON_COLUMN]
    arms = {name: failure for reason in reasons for name, failure in failed_arms(reason).items()}
    mean = dev_mean(task)
    majority = results.loc[results["method"] == MAJORITY, mean] if mean in results else []
    majority = float(majority.iloc[0]) if len(majority) else None
    lines = []
    for method, group in table.groupby("method", sort=False):
        if method not in arms:
            continue
        best = float(group.loc[group["chosen"], mean].iloc[0])
        best_text, majority_text = points(best, task.monitor), points(majority, task.monitor)
        if majority is not None and best <= majority + MAJORITY_MARGIN:
            why = (
                f"no point of its grid learned on dev (the best, {best_text}, against the majority "
                f"baseline's {majority_text}), so its cells ran at a recipe that had not learned either"
            )
        else:
            beside = "" if majority is None else f", the majority baseline {majority_text}"
            why = (
                f"its pick learned on dev on the selection's one seed ({best_text}{beside}) but not on the final seeds"
            )
        lines.append(f"- `{method}` ({arms[method]}): {why}.")
    if not lines:
        return []
    return [
        "",
        "Arms that failed the control rule at their own pick (shown, never counted), and what their selection saw:",
        "",
        *lines,
    ]
