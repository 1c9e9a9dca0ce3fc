"""The report's learned scalar mixes: per method with ``mix=scalar``, the softmax weights its runs
learned (mean over seeds, by layer) beside the uniform 1/L of ``average``, and gamma — so a
reader sees whether "scalar" learned a mix or stayed the average."""

from __future__ import annotations

import pandas as pd

from benchmarks.cell.run_table import text_column, weight_columns


def mix_section(runs: pd.DataFrame) -> list[str]:
    """Markdown lines of the section; [] without scalar-mix runs that logged their weights."""
    columns = weight_columns(runs)
    scalar = runs[text_column(runs, "mix") == "scalar"]
    if not columns or not len(scalar) or scalar[columns].isna().all().all():
        return []
    rows = []
    for method, group in scalar.groupby("method", sort=False):
        logged = [column for column in columns if group[column].notna().any()]
        if not logged:
            continue
        means = group[logged].mean()
        uniform = 1 / len(logged)
        gamma = group["mix_gamma"].mean() if "mix_gamma" in group else float("nan")
        rows.append(
            f"| `{method}` | {group[logged[0]].notna().sum()} | "
            + " ".join(f"{weight:.2f}" for weight in means)
            + f" | {uniform:.2f} | "
            f"{(means - uniform).abs().max():.2f} | " + ("—" if pd.isna(gamma) else f"{gamma:.2f}") + " |"
        )
    if not rows:
        return []
    return [
        "",
        "## Learned scalar mixes",
        "",
        "Softmax weights by layer (0 = token embedding), mean over seeds, beside the uniform 1/L of `average`; "
        "max |w − 1/L| near 0 means the learned mix stayed the average. γ: the learned scale (mean).",
        "",
        "| method | seeds | weights by layer | uniform | max \\|w − 1/L\\| | γ |",
        "|---|---|---|---|---|---|",
        *rows,
    ]
