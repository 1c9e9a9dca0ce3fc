"""Learning rates chosen per arm (``lr_grid:`` in a matrix): every grid point of a setting is a
cell of its own for the pretrained arm and for its twin alike (``<method>~lr<rate>``, tagged
``grid_of`` and ``learning_rate``); each arm keeps the rate with the best mean **dev** score of
its task's main metric (accuracy, or Pearson for a graded task: ``Task.monitor``) over its seeds
(test is never looked at; a tie goes to the smaller rate), so a pretrained encoder
and its random-init twin each get the rate that suits them, from the same grid. The results and
the report then read the chosen points under the arm's own method name."""

from __future__ import annotations

import pandas as pd

from benchmarks.cell.run_table import text_column
from harness.datasets.metric_text import metric_title, short_title, unit
from harness.datasets.task import CLASSES, Task

CHOSEN_COLUMN = "learning_rate"  # results.csv: the rate chosen for a method (NaN: no grid)


def dev_mean(task: Task) -> str:
    """The grid tables' column of the task's mean dev score over seeds: ``dev_acc_mean``, ``dev_pearson_mean``."""
    return f"{task.monitor}_mean"


def lr_grid_table(runs: pd.DataFrame, task: Task = CLASSES) -> pd.DataFrame:
    """Per arm and grid rate: seeds and the mean of the task's main dev metric, and whether it was chosen.

    Returns:
        DataFrame ``method, learning_rate, n_seeds, <dev metric>_mean, chosen`` (``dev_acc_mean`` for
        a task of classes; empty without a grid).
    """
    mean = dev_mean(task)
    columns = ["method", "learning_rate", "n_seeds", mean, "chosen"]
    arms = text_column(runs, "grid_of")
    grid = runs[arms != ""].assign(method=arms[arms != ""])
    if not len(grid):
        return pd.DataFrame(columns=columns)
    grid = grid.assign(learning_rate=pd.to_numeric(grid["learning_rate"]))
    table = (
        grid.groupby(["method", "learning_rate"], sort=False)[task.monitor]
        .agg(["size", "mean"])
        .reset_index()
        .rename(columns={"size": "n_seeds", "mean": mean})
    )
    best = table.sort_values(["method", mean, "learning_rate"], ascending=[True, False, True])
    chosen = set(best.groupby("method", sort=False).head(1).index)
    return table.assign(chosen=[index in chosen for index in table.index])[columns]


def select_learning_rates(runs: pd.DataFrame, task: Task = CLASSES) -> pd.DataFrame:
    """The runs with each arm's grid reduced to its chosen rate, renamed to the arm's method (its
    control to the twin's arm); ``learning_rate`` holds the chosen rate. Runs without a grid as they are."""
    table = lr_grid_table(runs, task)
    if not len(table):
        return runs
    chosen = {
        (method, rate)
        for method, rate, picked in zip(table["method"], table["learning_rate"], table["chosen"])
        if picked
    }
    arms = text_column(runs, "grid_of")
    rates = pd.to_numeric(runs["learning_rate"], errors="coerce")
    keep = (arms == "") | pd.Series([(arm, rate) in chosen for arm, rate in zip(arms, rates)], index=runs.index)
    arm_of = dict(zip(runs.loc[arms != "", "method"], arms[arms != ""]))  # grid point → its arm
    selected = runs.assign(
        method=[arm_of.get(method, method) for method in runs["method"]],
        control=[arm_of.get(control, control) for control in text_column(runs, "control")],
    )
    first_seen = {method: index for index, method in reversed(list(enumerate(selected["method"])))}
    order = selected["method"].map(first_seen)  # the plan's order of the arms, whichever rate each kept
    return (
        selected[keep]
        .assign(_order=order[keep])
        .sort_values("_order", kind="stable")
        .drop(columns="_order")
        .reset_index(drop=True)
    )


def lr_grid_section(table: pd.DataFrame, task: Task = CLASSES) -> list[str]:
    """Markdown lines: each arm's grid (the mean of the task's main dev metric per rate, × 100, the
    chosen one in bold); [] without one."""
    if not len(table):
        return []
    mean, short, title = dev_mean(task), short_title(task.monitor), metric_title(task.monitor)
    rows = []
    for method, group in table.groupby("method", sort=False):
        points = [
            (f"**{rate:g}: {100 * dev:.1f}**" if picked else f"{rate:g}: {100 * dev:.1f}")
            for rate, dev, picked in zip(group["learning_rate"], group[mean], group["chosen"])
        ]
        rows.append(f"| `{method}` | {', '.join(points)} | {group.loc[group['chosen'], 'learning_rate'].iloc[0]:g} |")
    return [
        "",
        "## Learning rates chosen per arm",
        "",
        "Each arm (a method, and its random-init twin apart) trained at every rate of the same grid; the rate "
        f"with the best mean {title} over seeds ({unit(task.monitor)}) is the one its rows above report (test never "
        "decides).",
        "",
        f"| arm | mean {short} by learning rate | chosen |",
        "|---|---|---|",
        *rows,
    ]
