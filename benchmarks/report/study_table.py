"""The transfer study's part of a benchmark report (matrices with ``transfers``): where does
pretraining pay, for which family, with how much text and how many labels?

For every pretrained method (encoder × transfer × head × labelled fraction) the table gives the
accuracy gap over its random-init twin with the 95% CI and p of ``benchmarks.stats.gaps`` (seeds and
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

from benchmarks.cell.run_table import controls, text_column, train_fractions
from benchmarks.plan.lr_selection import CHOSEN_COLUMN
from benchmarks.plan.matrix import PICKED_HEAD
from benchmarks.plan.pretraining_runs import entry_name
from benchmarks.report.control_rule import control_fields, failed_control, failed_mask, failed_note, learned_text
from benchmarks.report.figures import _save, legend_outside
from benchmarks.report.pairing_text import pairing_sentence
from benchmarks.report.recipe_section import is_picked
from benchmarks.stats.preregistration import PREREGISTERED_COLUMN, Family, family_text
from benchmarks.stats.results_columns import COLLAPSED_COLUMN
from harness.datasets.metric_text import main_test_metric, metric_title, short_title, title_case
from harness.datasets.task import CLASSES, Task

ALPHA = 0.05  # a gap holds below this Holm-adjusted p


def study_rows(results: pd.DataFrame, runs: pd.DataFrame, encoders: list[dict], task: Task = CLASSES) -> pd.DataFrame:
    """One row per pretrained method of a transfers matrix: its family, encoder, corpus words,
    transfer, head, fraction, mean test acc/F1 and the gap over its twin (points). Empty when the
    runs come from a mixes × heads matrix."""
    if "transfer" not in runs or not (text_column(runs, "transfer") != "").any():
        return pd.DataFrame()
    words = {entry_name(encoder["name"]): encoder.get("train_words") or np.nan for encoder in encoders}
    corpora = {entry_name(encoder["name"]): encoder.get("corpus", "") for encoder in encoders}
    cells = runs.assign(fraction=train_fractions(runs), kind=text_column(runs, "kind"))
    cells = cells[cells["kind"] == "pretrained"].drop_duplicates("method")
    table = results.set_index("method")
    twin_of = controls(runs)
    rows = []
    for cell in cells.itertuples():
        if cell.method not in table.index:
            continue
        result = table.loc[cell.method]
        twin = twin_of.get(cell.method, "")
        rows.append(
            {
                "family": cell.family,
                "encoder": cell.encoder,
                "corpus": corpora.get(cell.encoder, ""),
                "words": words.get(cell.encoder, np.nan),
                "transfer": cell.transfer,
                "head": f"{PICKED_HEAD} ({cell.head})" if is_picked(cell.method) else cell.head,
                "fraction": cell.fraction,
                "method": cell.method,
                "seeds": int(result["n_seeds"]),
                **{metric: 100 * result[f"{metric}_mean"] for metric in task.run_metrics(("test",))},
                **{
                    key: 100 * result.get(column, np.nan)
                    for key, column in (
                        ("gap", "gap_vs_random"),
                        ("low", "gap_ci_low"),
                        ("high", "gap_ci_high"),
                        ("mde", "mde_vs_random"),
                    )
                },
                "p": result.get("p_value_vs_random", np.nan),
                **({"p_adjusted": result["p_adjusted"]} if "p_adjusted" in result else {}),
                "registered": bool(result.get(PREREGISTERED_COLUMN, False)),
                "recipe": recipe_of(
                    getattr(cell, "finetune", None), result.get(CHOSEN_COLUMN, np.nan), getattr(cell, "recipe_from", "")
                ),
                "rate": result.get(CHOSEN_COLUMN, np.nan),
                "twin_rate": table.loc[twin].get(CHOSEN_COLUMN, np.nan) if twin in table.index else np.nan,
                "twin_head": table.loc[twin].get("picked_head", np.nan) if twin in table.index else np.nan,
                "pretrainings": result.get("n_pretrainings", np.nan),
                "collapsed": _collapsed(table, cell.method),
                "twin": twin,
                "twin_collapsed": _collapsed(table, twin),
                **control_fields(result),
            }
        )
    return pd.DataFrame(rows)


PRETRAINED_RECIPE = "under the pretrained arm's recipe"


def recipe_of(finetune, chosen_rate, recipe_from="") -> str:
    """Whose training recipe a fine-tuned gap is measured under: both arms share the pretrained
    arm's (its rates and schedule, tuned for pretrained weights) unless each chose its own on dev,
    from an ``lr_grid`` or in a selection (``recipe_from``); frozen cells train only a head on
    features, so the question does not arise."""
    if pd.isna(finetune) or finetune in ("", "frozen"):
        return ""
    if isinstance(recipe_from, str) and recipe_from and pd.notna(chosen_rate):
        return f"each arm's rate chosen on dev in `{recipe_from}`"
    return "each arm's rate from a grid, on dev" if pd.notna(chosen_rate) else PRETRAINED_RECIPE


def _collapsed(table: pd.DataFrame, method: str) -> str:
    """``k/n`` runs of ``method`` that predicted one class throughout, or "" (none, or no row)."""
    if method not in table.index or COLLAPSED_COLUMN not in table:
        return ""
    count = int(table.loc[method, COLLAPSED_COLUMN])
    return f"{count}/{int(table.loc[method, 'n_seeds'])}" if count else ""


def _conditions(row: pd.Series) -> str:
    """The caveats of a gap: its recipe and any collapsed arm."""
    parts = [row["recipe"]] if row.get("recipe") == PRETRAINED_RECIPE else []
    parts += [f"pretrained arm collapsed in {row['collapsed']} runs"] if row.get("collapsed") else []
    parts += [f"twin collapsed in {row['twin_collapsed']} runs"] if row.get("twin_collapsed") else []
    return f" ({'; '.join(parts)})" if parts else ""


def _gap_text(row: pd.Series) -> str:
    if pd.isna(row["gap"]):
        return "—"
    if pd.isna(row["low"]):
        return f"{row['gap']:+.1f} (no seed replication)"
    holm = f" p_adj={row['p_adjusted']:.2g}" if pd.notna(row.get("p_adjusted", np.nan)) else ""
    failed = " ✗ control failed" if failed_control(row) else ""
    return f"{row['gap']:+.1f} ({row['low']:+.1f}, {row['high']:+.1f}) p={row['p']:.2g}{holm}{failed}"


def _runs_note(rows: pd.DataFrame) -> str:
    """Which pretraining runs the gaps generalise over: several (the recipe), or one (that checkpoint)."""
    runs = pd.to_numeric(rows.get("pretrainings", pd.Series(dtype=float)), errors="coerce")
    if runs.gt(1).any():
        return (
            f" Gaps are read over the {int(runs.max())} pretraining runs (this recipe: runs random; the run "
            "variance floored at the seeds' own), these checkpoints (runs fixed) and study v3's registered test "
            "beside them in the remarks."
        )
    return (
        " Each encoder was pretrained once: the gaps are those of that checkpoint (runs fixed) and cannot "
        "generalise over pretraining runs."
    )


def study_tables(rows: pd.DataFrame, family: Family | None = None, task: Task = CLASSES) -> list[str]:
    """Markdown: per family, rows = encoder (corpus) · transfer · head, columns = labelled fraction."""
    adjusted = (
        f"p_adj: {family_text(family)}; a gap without p_adj is exploratory"
        if family
        else "p_adj: Holm-adjusted over the report's twin comparisons, where computed"
    )
    lines = [
        "## Transfer study: gap to the random-init twin",
        "",
        f"{title_case(metric_title(main_test_metric(task)))} gap (pretrained − twin, points) with its 95% CI and "
        f"p ({adjusted}), per labelled fraction. {pairing_sentence(rows)}{_runs_note(rows)}",
        "",
    ]
    fractions = sorted(rows["fraction"].unique())
    for family, group in rows.groupby("family", sort=False):
        lines += [
            f"### {family}",
            "",
            "| encoder (corpus) | transfer | head | " + " | ".join(f"{f:g} of train" for f in fractions) + " |",
            "|---|---|---|" + "---|" * len(fractions),
        ]
        for (encoder, transfer, head), cells in group.groupby(["encoder", "transfer", "head"], sort=False):
            by_fraction = {row["fraction"]: _gap_text(row) for _, row in cells.iterrows()}
            corpus = cells["corpus"].iloc[0]
            lines.append(
                f"| `{encoder}` ({corpus}) | {transfer} | {head} | "
                + " | ".join(by_fraction.get(f, "—") for f in fractions)
                + " |"
            )
        lines.append("")
    shared = rows[rows["recipe"] == PRETRAINED_RECIPE] if "recipe" in rows else rows.iloc[:0]
    if len(shared):
        lines += [
            f"Fine-tuned rows ({', '.join(sorted(set(shared['transfer'])))}) are measured {PRETRAINED_RECIPE}: "
            "the twin trains with the rates and schedule tuned for pretrained weights, so a gap there may be "
            "the recipe's, not pretraining's alone." + _collapse_text(rows),
            "",
        ]
    lines += failed_note(rows)
    metrics = task.run_metrics(("test",))
    best = rows.sort_values(main_test_metric(task), ascending=False).head(3)
    lines += [
        "Best absolute test scores (mean over seeds): "
        + "; ".join(
            f"`{row['method']}` "
            + " / ".join(f"{row[metric]:.1f} {short_title(metric.removeprefix('test_'))}" for metric in metrics)
            for _, row in best.iterrows()
        )
        + " — against the published anchors below.",
        "",
    ]
    return lines


def _collapse_text(rows: pd.DataFrame) -> str:
    """The arms that collapsed, named, or nothing."""
    named = [f"`{row['method']}` {row['collapsed']}" for _, row in rows.iterrows() if row.get("collapsed")]
    named += [f"`{row['twin']}` {row['twin_collapsed']}" for _, row in rows.iterrows() if row.get("twin_collapsed")]
    return f" Collapsed arms (runs predicting one class): {', '.join(named)}." if named else ""


def _which(winning: pd.DataFrame) -> str:
    """How the picked gap was selected among the ones that hold."""
    return "the only gap that holds" if len(winning) == 1 else f"the largest of the {len(winning)} gaps that hold"


def _significant(tested: pd.DataFrame, side: str) -> pd.DataFrame:
    """The comparisons whose gap is on ``side`` ("above" or "below" 0) and significant: Holm-adjusted
    p < 0.05 where the rows carry ``p_adjusted``, else a CI that excludes 0."""
    signed = tested["low"] > 0 if side == "above" else tested["high"] < 0
    if "p_adjusted" in tested:
        signed &= tested["p_adjusted"] < ALPHA
    return tested[signed]


def _holds(tested: pd.DataFrame, side: str) -> pd.DataFrame:
    """The significant comparisons (``_significant``) whose control passed the pre-registered rule:
    a gap over a twin that did not learn is shown, never counted."""
    significant = _significant(tested, side)
    return significant[~failed_mask(significant)]


def _failed_text(tested: pd.DataFrame, side: str = "above") -> str:
    """The significant gaps left out because their control failed, named with the reason, or ""."""
    failed = _significant(tested, side)
    failed = failed[failed_mask(failed)]
    if not len(failed):
        return ""
    return (
        " Not counted, control failed: "
        + "; ".join(
            f"`{row['method']}` {_gap_text(row).replace(' ✗ control failed', '')} ({row['control_reason']})"
            for _, row in failed.iterrows()
        )
        + "."
    )


def study_remarks(rows: pd.DataFrame, comparisons: int | None = None, family: Family | None = None) -> list[str]:
    """What the numbers say, per family: its largest gap that holds (Holm-adjusted p < 0.05, or a CI
    that excludes 0 for tables without ``p_adjusted``), or that none does. ``comparisons``: how many
    twin comparisons Holm adjusted over (default: the rows' adjusted p-values). With a pre-registered
    ``family`` the claims come from its comparisons alone, the selection says among how many, and
    a family with none registered (the positive control) is told apart as exploratory."""
    adjusted = "p_adjusted" in rows
    if adjusted and comparisons is None:
        comparisons = int(rows["p_adjusted"].notna().sum())
    holm = f"p_adjusted < {ALPHA:g}, {family_text(family, comparisons)}"
    rule = holm if adjusted else "CI above 0, not adjusted for the number of comparisons"
    remarks = []
    for name, group in rows.groupby("family", sort=False):
        tested = group[group["low"].notna()]  # comparisons with a CI (one seed pair has none)
        if family is not None:
            if not group["registered"].any():
                remarks += _exploratory_remark(name, tested)
                continue
            tested = tested[tested["registered"]]
        winning = _holds(tested, "above").sort_values("gap", ascending=False)
        losing = _holds(tested, "below")
        above = int((tested["low"] > 0).sum())
        among = "registered" if family is not None else "tested"
        failed = _failed_text(tested)
        if len(winning):
            top = winning.iloc[0]
            which = _which(winning)
            remarks.append(
                f"{name}: pretraining pays most with `{top['method']}`: {_gap_text(top)} over its twin"
                f"{_conditions(top)} — {which} ({rule}{learned_text(top)}) among the family's "
                f"{len(tested)} {among} comparisons.{failed}"
            )
        elif failed:
            remarks.append(
                f"{name}: no gap over the twin holds among the comparisons whose arms both learned "
                f"({rule}; {len(tested)} {among}).{failed}"
            )
        elif len(tested):
            before = f"; {above} had a CI above 0 before Holm's adjustment" if adjusted and above else ""
            remarks.append(
                f"{name}: no gap over the twin holds ({rule}; {len(tested)} {among}{before}; median MDE "
                f"{tested['mde'].median():.1f} points) — no gap detected (a gap below the MDE may go unseen)."
            )
        if len(losing):
            behind = f"CI below 0, {holm}" if adjusted else "CI below 0, not adjusted for the number of comparisons"
            remarks.append(
                f"{name}: the random twin is ahead ({behind}) for "
                + ", ".join(f"`{row['method']}`{_conditions(row)}" for _, row in losing.iterrows())
                + "."
            )
        failed_below = _failed_text(tested, "below")
        if failed_below:
            remarks.append(
                f"{name}: a twin ahead of a pretrained arm that did not learn is no finding either.{failed_below}"
            )
    if family is not None:
        remarks += _study_answer(rows, family)
    return remarks


def _exploratory_remark(name: str, tested: pd.DataFrame) -> list[str]:
    """A family outside the registered comparisons (e.g. the positive control): its largest gap, unadjusted."""
    if not len(tested):
        return []
    top = tested.sort_values("gap", ascending=False).iloc[0]
    return [
        f"{name}: outside the pre-registered comparisons (exploratory, e.g. the positive control): largest gap "
        f"`{top['method']}` {_gap_text(top)}{_conditions(top)}, not adjusted and no claim."
    ]


def _study_answer(rows: pd.DataFrame, family: Family) -> list[str]:
    """The study's one-line answer: the largest registered gap that holds among the comparisons whose
    arms both learned, selected among how many, and the registered comparisons whose control failed."""
    registered = rows[rows["registered"] & rows["low"].notna()] if len(rows) else rows
    winning = _holds(registered, "above").sort_values("gap", ascending=False)
    failed = [row["method"] for _, row in registered.iterrows() if failed_control(row)]
    scope = f"the {family.size} pre-registered comparisons" + (
        f", {len(family.missing)} of them not yet run" if family.missing else ""
    )
    if failed:
        scope += f"; {len(failed)} of them failed the control rule and are not counted"
    counted = "" if not failed else " whose arms both learned"
    if not len(winning):
        return [
            f"The study: no pre-registered gap over the twin holds (p_adjusted < {ALPHA:g}){counted} among "
            f"{scope}.{_failed_text(registered)}"
        ]
    top = winning.iloc[0]
    which = _which(winning)
    return [
        f"The study: pretraining pays most with `{top['method']}` ({top['family']}, {top['fraction']:.0%} of the "
        f"labels): {_gap_text(top)}{_conditions(top)} — {which}{counted} among {scope}.{_failed_text(registered)}"
    ]


FAILED_CONTROL_LABEL = "✗ control failed: shown, not counted"


def _lines(axes, rows: pd.DataFrame, x: str, keys: list[str]) -> None:
    """A line of gaps (with their intervals) per ``keys``; a comparison whose control failed
    (:mod:`benchmarks.report.control_rule`) crossed out in red; the legend beside the axes."""
    for key, group in rows.sort_values(x).groupby(keys, sort=False):
        label = " · ".join(str(part) for part in (key if isinstance(key, tuple) else (key,)))
        errors = np.vstack([group["gap"] - group["low"], group["high"] - group["gap"]])
        axes.errorbar(group[x], group["gap"], yerr=errors, marker="o", capsize=3, label=label)
    failed = rows[failed_mask(rows)]
    if len(failed):
        axes.scatter(
            failed[x], failed["gap"], marker="x", s=110, linewidths=2, color="red", zorder=4, label=FAILED_CONTROL_LABEL
        )
    axes.axhline(0, color="grey", linewidth=1, linestyle="--")
    legend_outside(axes, fontsize=7)


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
        axes.set(
            xlabel="fraction of the labelled train split",
            ylabel="gap to random twin (test acc, points)",
            title=f"Does pretraining pay more with fewer labels? ({_interval_text(tested)})",
        )
        written.append(_save(figure, directory / "gap_by_fraction.png"))
    full = tested[(tested["fraction"] == tested["fraction"].max()) & tested["words"].notna()]
    if full["words"].nunique() > 1:
        figure = Figure(figsize=(7, 4.5))
        axes = figure.subplots()
        _lines(axes, full, "words", ["family", "transfer", "head"])
        axes.set_xscale("log")
        axes.set(
            xlabel="pretraining text (whitespace words)",
            ylabel="gap to random twin (test acc, points)",
            title=f"Does pretraining pay more with more text? ({_interval_text(full)})",
        )
        written.append(_save(figure, directory / "gap_by_words.png"))
    return written


def _interval_text(rows: pd.DataFrame) -> str:
    """What the error bars are: a 95% CI, or none where every gap rests on one seed pair."""
    return "1 seed: no CI" if (rows["seeds"] <= 1).all() else "95% CI"
