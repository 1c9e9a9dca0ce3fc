"""The transfer study's part of a benchmark report (matrices with ``transfers``): where does
pretraining pay, for which family, with how much text and how many labels?

For every pretrained method (encoder × transfer × head × labelled fraction) the table gives the
accuracy gap over its random-init twin with the 95% CI and p of ``benchmarks.stats`` (seeds and
test items both random) and, where results carry it, the Holm-adjusted p the remarks rely on.
Two figures: the gap against the labelled fraction, one line per encoder/transfer/head, and the
gap at the full labelled set against the pretraining text's size (whitespace words), one line per
family/transfer/head.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from benchmarks.run_table import text_column, train_fractions

ALPHA = 0.05  # a gap holds below this Holm-adjusted p


def study_rows(results: pd.DataFrame, runs: pd.DataFrame, encoders: list[dict]) -> pd.DataFrame:
    """One row per pretrained method of a transfers matrix: its family, encoder, corpus words,
    transfer, head, fraction, mean test acc/F1 and the gap over its twin (points). Empty when the
    runs come from a mixes × heads matrix."""
    if "transfer" not in runs or not (text_column(runs, "transfer") != "").any():
        return pd.DataFrame()
    words = {encoder["name"]: encoder.get("train_words") or np.nan for encoder in encoders}
    corpora = {encoder["name"]: encoder.get("corpus", "") for encoder in encoders}
    cells = runs.assign(fraction=train_fractions(runs), kind=text_column(runs, "kind"))
    cells = cells[cells["kind"] == "pretrained"].drop_duplicates("method")
    table = results.set_index("method")
    rows = []
    for cell in cells.itertuples():
        if cell.method not in table.index:
            continue
        result = table.loc[cell.method]
        rows.append({"family": cell.family, "encoder": cell.encoder, "corpus": corpora.get(cell.encoder, ""),
                     "words": words.get(cell.encoder, np.nan), "transfer": cell.transfer, "head": cell.head,
                     "fraction": cell.fraction, "method": cell.method, "seeds": int(result["n_seeds"]),
                     "test_acc": 100 * result["test_acc_mean"], "test_f1": 100 * result["test_f1_mean"],
                     **{key: 100 * result.get(column, np.nan) for key, column in
                        (("gap", "gap_vs_random"), ("low", "gap_ci_low"), ("high", "gap_ci_high"),
                         ("mde", "mde_vs_random"))},
                     "p": result.get("p_value_vs_random", np.nan),
                     **({"p_adjusted": result["p_adjusted"]} if "p_adjusted" in result else {})})
    return pd.DataFrame(rows)


def _gap_text(row: pd.Series) -> str:
    if pd.isna(row["gap"]):
        return "—"
    if pd.isna(row["low"]):
        return f"{row['gap']:+.1f} (no seed replication)"
    holm = f" p_adj={row['p_adjusted']:.2g}" if pd.notna(row.get("p_adjusted", np.nan)) else ""
    return f"{row['gap']:+.1f} ({row['low']:+.1f}, {row['high']:+.1f}) p={row['p']:.2g}{holm}"


def study_tables(rows: pd.DataFrame) -> list[str]:
    """Markdown: per family, rows = encoder (corpus) · transfer · head, columns = labelled fraction."""
    lines = ["## Transfer study: gap to the random-init twin", "",
             "Test accuracy gap (pretrained − twin, points) with its 95% CI and p (p_adj: Holm-adjusted over the "
             "report's twin comparisons, where computed), per labelled fraction. "
             "Each pair shares family, architecture, tokenizer, transfer, head, data and seeds; only the "
             "encoder's weights differ.", ""]
    fractions = sorted(rows["fraction"].unique())
    for family, group in rows.groupby("family", sort=False):
        lines += [f"### {family}", "",
                  "| encoder (corpus) | transfer | head | " + " | ".join(f"{f:g} of train" for f in fractions) + " |",
                  "|---|---|---|" + "---|" * len(fractions)]
        for (encoder, transfer, head), cells in group.groupby(["encoder", "transfer", "head"], sort=False):
            by_fraction = {row["fraction"]: _gap_text(row) for _, row in cells.iterrows()}
            corpus = cells["corpus"].iloc[0]
            lines.append(f"| `{encoder}` ({corpus}) | {transfer} | {head} | "
                         + " | ".join(by_fraction.get(f, "—") for f in fractions) + " |")
        lines.append("")
    best = rows.sort_values("test_acc", ascending=False).head(3)
    lines += ["Best absolute test scores (mean over seeds): " + "; ".join(
        f"`{row['method']}` {row['test_acc']:.1f} acc / {row['test_f1']:.1f} F1" for _, row in best.iterrows())
        + " — against the published anchors below.", ""]
    return lines


def _holds(tested: pd.DataFrame, side: str) -> pd.DataFrame:
    """The comparisons whose gap is on ``side`` ("above" or "below" 0) and holds: Holm-adjusted p <
    0.05 where the rows carry ``p_adjusted``, else a CI that excludes 0."""
    signed = tested["low"] > 0 if side == "above" else tested["high"] < 0
    if "p_adjusted" in tested:
        signed &= tested["p_adjusted"] < ALPHA
    return tested[signed]


def study_remarks(rows: pd.DataFrame, comparisons: int | None = None) -> list[str]:
    """What the numbers say, per family: its largest gap that holds (Holm-adjusted p < 0.05, or a CI
    that excludes 0 for tables without ``p_adjusted``), or that none does. ``comparisons``: how many
    twin comparisons Holm adjusted over (default: the rows' adjusted p-values)."""
    adjusted = "p_adjusted" in rows
    if adjusted and comparisons is None:
        comparisons = int(rows["p_adjusted"].notna().sum())
    holm = f"p_adjusted < {ALPHA:g}, Holm over the report's {comparisons} twin comparisons"
    rule = holm if adjusted else "CI above 0, not adjusted for the number of comparisons"
    remarks = []
    for family, group in rows.groupby("family", sort=False):
        tested = group[group["low"].notna()]  # comparisons with a CI (one seed pair has none)
        winning = _holds(tested, "above").sort_values("gap", ascending=False)
        losing = _holds(tested, "below")
        above = int((tested["low"] > 0).sum())
        if len(winning):
            top = winning.iloc[0]
            which = ("the only gap that holds" if len(winning) == 1
                     else f"the largest of the {len(winning)} gaps that hold")
            remarks.append(f"{family}: pretraining pays most with `{top['method']}`: {_gap_text(top)} over its twin "
                           f"— {which} ({rule}) among the family's {len(tested)} tested comparisons.")
        elif len(tested):
            before = (f"; {above} had a CI above 0 before Holm's adjustment" if adjusted and above else "")
            remarks.append(f"{family}: no gap over the twin holds ({rule}; {len(tested)} tested{before}; median MDE "
                           f"{tested['mde'].median():.1f} points) — no measurable transfer here.")
        if len(losing):
            behind = f"CI below 0, {holm}" if adjusted else "CI below 0, not adjusted for the number of comparisons"
            remarks.append(f"{family}: the random twin is ahead ({behind}) for "
                           + ", ".join(f"`{m}`" for m in losing["method"]) + ".")
    return remarks


def _lines(axes, rows: pd.DataFrame, x: str, keys: list[str]) -> None:
    for key, group in rows.sort_values(x).groupby(keys, sort=False):
        label = " · ".join(str(part) for part in (key if isinstance(key, tuple) else (key,)))
        errors = np.vstack([group["gap"] - group["low"], group["high"] - group["gap"]])
        axes.errorbar(group[x], group["gap"], yerr=errors, marker="o", capsize=3, label=label)
    axes.axhline(0, color="grey", linewidth=1, linestyle="--")
    axes.legend(fontsize=7)


def study_figures(rows: pd.DataFrame, directory: Path) -> list[Path]:
    """``gap_by_fraction.png`` and, with encoders of several corpus sizes, ``gap_by_words.png``."""
    written = []
    tested = rows[rows["gap"].notna()]
    if tested["fraction"].nunique() > 1:
        figure = Figure(figsize=(7, 4.5))
        axes = figure.subplots()
        _lines(axes, tested, "fraction", ["encoder", "transfer", "head"])
        axes.set_xscale("log")
        ticks = sorted(tested["fraction"].unique())
        axes.set_xticks(ticks, [f"{tick:g}" for tick in ticks])
        axes.set(xlabel="fraction of the labelled train split", ylabel="gap to random twin (test acc, points)",
                 title=f"Does pretraining pay more with fewer labels? ({_interval_text(tested)})")
        written.append(_save(figure, directory / "gap_by_fraction.png"))
    full = tested[(tested["fraction"] == tested["fraction"].max()) & tested["words"].notna()]
    if full["words"].nunique() > 1:
        figure = Figure(figsize=(7, 4.5))
        axes = figure.subplots()
        _lines(axes, full, "words", ["family", "transfer", "head"])
        axes.set_xscale("log")
        axes.set(xlabel="pretraining text (whitespace words)", ylabel="gap to random twin (test acc, points)",
                 title=f"Does pretraining pay more with more text? ({_interval_text(full)})")
        written.append(_save(figure, directory / "gap_by_words.png"))
    return written


def _interval_text(rows: pd.DataFrame) -> str:
    """What the error bars are: a 95% CI, or none where every gap rests on one seed pair."""
    return "1 seed: no CI" if (rows["seeds"] <= 1).all() else "95% CI"


def _save(figure: Figure, path: Path) -> Path:
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    return path
