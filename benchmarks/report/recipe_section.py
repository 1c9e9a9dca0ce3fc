"""The report's account of recipes chosen in a selection (``recipe_from:``): each arm's grid points
with their mean dev accuracy and the pick its cells ran at, and the head a ``picked`` arm's cells
used, for ``results.csv``."""

from __future__ import annotations

import pandas as pd

from benchmarks.cell.run_table import text_column
from benchmarks.plan.matrix import PICKED_HEAD


def picked_heads(runs: pd.DataFrame) -> dict[str, str]:
    """Method → the head its cells ran with, for methods whose head was picked on dev (``…-picked``)."""
    if "recipe_from" not in runs:
        return {}
    picked = runs[(text_column(runs, "recipe_from") != "") & runs["method"].map(is_picked)]
    return {method: "/".join(dict.fromkeys(group["head"].astype(str))) for method, group in picked.groupby("method")}


def is_picked(method: str) -> bool:
    """Whether a method's head is the one chosen on dev: ``<encoder>-<transfer>-picked[@fraction]``."""
    return str(method).partition("@")[0].endswith(f"-{PICKED_HEAD}")


def recipe_section(table: pd.DataFrame) -> list[str]:
    """Markdown lines: per arm, its selection's grid (mean dev accuracy per head and rate, the pick in
    bold) and the folder it came from; [] without one."""
    if not len(table):
        return []
    rows = []
    for (method, folder), group in table.groupby(["method", "folder"], sort=False):
        several = group["head"].nunique() > 1
        points = []
        for head, rate, dev, seeds, chosen in zip(
            group["head"], group["learning_rate"], group["dev_acc_mean"], group["n_seeds"], group["chosen"]
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
        "with the best mean dev accuracy (%; one seed of its own, pretraining run 0; test never decides), and "
        "every cell of the arm ran at it.",
        "",
        "| arm | mean dev acc by grid point | pick | selection |",
        "|---|---|---|---|",
        *rows,
    ]
