"""The remarks of a benchmark report: what its numbers say, written from the results table and
the per-run table (gaps to the random twin and their CIs, the best method, chance findings,
collapsed runs, seed counts, the minimum detectable gap, learning curves)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from benchmarks.cell.run_table import (
    SETTING,
    controls,
    curve_methods,
    full_fraction_method,
    setting_label,
    settings,
    text_column,
)
from benchmarks.report.results_table import CHECK_KINDS, tfidf_baseline
from benchmarks.stats.controls import CONTROL_OK_COLUMN, CONTROL_REASON_COLUMN, control_failed, rule_text
from benchmarks.stats.gaps import NO_SEED_REPLICATION, PVALUE_COLUMN
from benchmarks.stats.multiplicity import chance_remark
from benchmarks.stats.paired_seeds import SEEDS_T_ADJUSTED_COLUMN, SEEDS_T_COLUMNS
from benchmarks.stats.preregistration import PREREGISTERED_COLUMN, Family, family_text
from benchmarks.stats.pretraining_runs import (
    CHECKPOINTS_ADJUSTED_COLUMN,
    CHECKPOINTS_COLUMNS,
    CHECKPOINTS_MDE_COLUMN,
    MDE_UPPER_COLUMN,
    N_PRETRAININGS_COLUMN,
    RECIPE,
    REGISTERED_ADJUSTED_COLUMN,
    REGISTERED_COLUMNS,
    SD_UPPER_COLUMN,
)
from benchmarks.stats.results_columns import COLLAPSED_COLUMN
from harness.datasets.metric_text import is_percent, main_test_metric, metric_title
from harness.datasets.task import CLASSES, Task


def baseline_title(name: str) -> str:
    """How prose names a baseline: ``TF-IDF + LR``, ``TF-IDF + ridge``."""
    from downstream.run.baselines import BASELINES  # sklearn only where a report is written

    return BASELINES[name].title


ALPHA = 0.05  # the level of every CI (95%) and of Holm's adjustment
COLLAPSE_TEXT = {  # a task's target → what a collapsed run is, and which baseline collapses by design
    "classes": (
        "every test prediction one class: the majority rate or its complement",
        " Expected for `majority`; for another method the run learned nothing.",
    ),
    "graded": ("test scores (near) constant: no correlation to read", " The run learned nothing."),
}


def score(value: float, task: Task = CLASSES) -> str:
    """A main test score already × 100: ``85.3%`` (accuracy) or ``85.3`` (a correlation)."""
    return f"{value:.1f}{'%' if is_percent(task.main_metric) else ''}"


def number(value, spec: str) -> str:
    """``value`` formatted with ``spec``, or "—" when it is missing."""
    return "—" if value is None or pd.isna(value) else format(value, spec)


def points(value: float) -> str:
    return f"{100 * value:+.1f}"


def mde(value: float) -> str:
    """The MDE in points; "> 100" when no possible gap is detected with the planned power."""
    return "> 100" if pd.notna(value) and value > 1 else number(100 * value, ".1f")


def _verdict(row: pd.Series) -> str:
    if pd.isna(row["gap_ci_low"]):
        return NO_SEED_REPLICATION
    return "excludes 0" if row["gap_ci_low"] > 0 or row["gap_ci_high"] < 0 else "includes 0"


def _adjustment(family: Family | None) -> str:
    """Over what ``p_adjusted`` went: the report's twin comparisons, or the pre-registered family."""
    return "Holm's adjustment for the report's comparisons" if family is None else family_text(family)


def _holds(adjusted: float, family: Family | None) -> str:
    return "" if pd.isna(adjusted) else f", and it holds after {_adjustment(family)}"


def _control_remark(
    method: str, control: str, row: pd.Series, accuracy: pd.Series, family: Family | None, task: Task = CLASSES
) -> str:
    """A method against its twin, from the CI and (where the table has it) Holm's ``p_adjusted``: a
    CI that excludes 0 is a finding only when the adjusted p stays below ``ALPHA``."""
    mean = f"mean {metric_title(main_test_metric(task))}"
    if pd.isna(row.get("gap_vs_random", np.nan)):
        return f"`{method}`: no seed with test predictions in common with its random twin `{control}`, so no test."
    if pd.isna(row.get(PVALUE_COLUMN, np.nan)):
        return (
            f"`{method}` against its random twin `{control}`: {score(accuracy[method], task)} vs "
            f"{score(accuracy[control], task)} {mean}, paired gap {points(row['gap_vs_random'])} points over "
            f"{int(row['paired_items'])} test items of one seed pair: no seed replication, so no CI or p "
            f"(seed luck alone moves a run's {metric_title(task.main_metric)}); run more seeds before concluding."
        )
    adjusted = row.get("p_adjusted", np.nan)
    if control_failed(row.get(CONTROL_OK_COLUMN)):
        return (
            f"`{method}` against its random twin `{control}`: **control failed** ({row[CONTROL_REASON_COLUMN]}), "
            f"so its gap, {points(row['gap_vs_random'])} points (95% CI {points(row['gap_ci_low'])} to "
            f"{points(row['gap_ci_high'])}, p = {row[PVALUE_COLUMN]:.3g}"
            + (f", Holm-adjusted {adjusted:.3g}" if pd.notna(adjusted) else "")
            + "), measures an arm that did not learn, not pretraining: shown, not counted."
        )
    numbers = (
        f"{score(accuracy[method], task)} vs {score(accuracy[control], task)} {mean}; paired gap "
        f"{points(row['gap_vs_random'])} points, 95% CI {points(row['gap_ci_low'])} to "
        f"{points(row['gap_ci_high'])}, p = {row[PVALUE_COLUMN]:.3g}"
        + (f", Holm-adjusted {adjusted:.3g}" if pd.notna(adjusted) else "")
        + f"; {_units(int(row['paired_seeds']), row.get('gap_test') == RECIPE)} × {int(row['paired_items'])} test items"
    )
    if (row["gap_ci_low"] > 0 or row["gap_ci_high"] < 0) and pd.notna(adjusted) and adjusted >= ALPHA:
        ahead = f"`{method}`" if row["gap_ci_low"] > 0 else f"the random twin `{control}`"
        return (
            f"`{method}` against its random twin `{control}`: {ahead} is ahead ({numbers}); the CI excludes 0, "
            f"but not after {_adjustment(family)} (`p_adjusted` ≥ {ALPHA:g}): "
            "a lead to test with more seeds, not a finding."
        )
    exploratory = PREREGISTERED_COLUMN in row and not bool(row[PREREGISTERED_COLUMN])
    if exploratory and (row["gap_ci_low"] > 0 or row["gap_ci_high"] < 0):
        ahead = f"`{method}`" if row["gap_ci_low"] > 0 else f"the random twin `{control}`"
        return (
            f"`{method}` against its random twin `{control}`: {ahead} is ahead ({numbers}); the CI excludes 0, "
            "but the comparison is exploratory (not pre-registered, no adjustment): a lead, not a finding."
        )
    if row["gap_ci_low"] > 0:
        return f"`{method}` beats its random twin `{control}` ({numbers}): the CI excludes 0{_holds(adjusted, family)}."
    if row["gap_ci_high"] < 0:
        return (
            f"**The random twin `{control}` beats `{method}`** ({numbers}): "
            f"the CI excludes 0{_holds(adjusted, family)}; "
            f"pretraining hurt here."
        )
    conservative = (
        f"; {mde(row[MDE_UPPER_COLUMN])} with the between-run SD at its upper bound"
        if pd.notna(row.get(MDE_UPPER_COLUMN, np.nan))
        else ""
    )
    return (
        f"`{method}` against its random twin `{control}`: no gap detected (MDE {mde(row['mde_vs_random'])} points"
        f"{conservative}; {numbers}): the CI spans 0, and a gap smaller than the MDE may go unseen."
    )


def remarks(
    results: pd.DataFrame,
    runs: pd.DataFrame,
    published: set[str] = frozenset(),
    family: Family | None = None,
    task: Task = CLASSES,
) -> list[str]:
    """The report's remarks, one finding each, from the results and the per-run table, on the task's
    main test score (accuracy, or a graded task's Pearson × 100); the ``published`` methods
    (encoders pretrained elsewhere) and the checks (baselines, probes) are never the best method."""
    table = results.set_index("method")
    metric = main_test_metric(task)
    accuracy = table[f"{metric}_mean"] * 100
    remarks = []
    pretrained = set(runs.loc[text_column(runs, "kind") == "pretrained", "method"])
    curve = curve_methods(runs)  # their remarks: _curve_remarks
    for method, control in controls(runs).items():
        if method not in table.index or method not in pretrained or method in curve:
            continue
        if control not in table.index:
            remarks.append(f"`{method}`: its random twin `{control}` has no results, so no comparison.")
        elif pd.notna(accuracy[method]) and pd.notna(accuracy[control]):
            remarks.append(_control_remark(method, control, table.loc[method], accuracy, family, task))
    checks = set(runs.loc[text_column(runs, "kind").isin(CHECK_KINDS), "method"])  # baselines, probes: not candidates
    full = [
        method
        for method in table.index
        if method not in curve and pd.notna(accuracy[method]) and method not in published and method not in checks
    ]  # published encoders are a ceiling
    if full:
        best = max(full, key=lambda method: accuracy[method])
        line = f"Best method by mean {metric_title(metric)}: `{best}` ({score(accuracy[best], task)})"
        line += " (published and reference encoders left out)." if published else "."
        for baseline in reversed(task.baselines):  # the fitted one first
            if baseline in table.index and baseline != best:
                gap = accuracy[best] - accuracy[baseline]
                line += f" {gap:+.1f} points vs `{baseline}` ({score(accuracy[baseline], task)}; difference of means)."
        remarks.append(line)
    elif published:
        remarks.append(
            "Best method: none of an encoder pretrained here to rank (published and reference encoders left out)."
        )
    remarks += _tfidf_remarks(table, accuracy, task)
    many = chance_remark(
        table["gap_ci_low"],
        table["gap_ci_high"],
        table.get("p_adjusted"),
        adjustment=None if family is None else family_text(family),
    )
    if many:
        remarks.append(f"Gaps to the random twin: {many}")
    remarks += _control_rule_remark(table, task)
    remarks += _pretraining_remarks(table, runs, task)
    remarks += _sensitivity_remarks(table)
    if COLLAPSED_COLUMN in table and table[COLLAPSED_COLUMN].sum() > 0:
        flagged = [
            f"`{method}` ({int(row[COLLAPSED_COLUMN])}/{int(row['n_seeds'])})"
            for method, row in table.iterrows()
            if row[COLLAPSED_COLUMN] > 0
        ]
        what, expected = COLLAPSE_TEXT[task.target]
        remarks.append(f"Collapsed runs ({what}): " + ", ".join(flagged) + f".{expected}")
    if len(table):
        remarks.append(
            f"Seeds per method: {table['n_seeds'].min()}–{table['n_seeds'].max()}. Restarts move "
            f"{metric_title(task.main_metric)} by themselves (seed luck): compare methods by the paired gap and its "
            "CI, not by the means."
        )
    tested = table[table["mde_vs_random"].notna()] if "mde_vs_random" in table else table.iloc[:0]
    if len(tested):
        effects = tested["mde_vs_random"]
        remarks.append(
            f"Minimum detectable gap (MDE; α = 0.05, power 0.8) with {_design(tested)}, from the variance "
            f"components measured here: {mde(effects.median())} points (median of {len(tested)} "
            f"comparisons; {mde(effects.min())}–{mde(effects.max())}). A smaller gap can hide in a CI "
            "that includes 0; `benchmarks.stats.gaps.minimum_detectable_effect` gives the MDE of a planned "
            "number of seeds and test items."
        )
    return remarks + _curve_remarks(runs, table, accuracy, task)


def _control_rule_remark(table: pd.DataFrame, task: Task = CLASSES) -> list[str]:
    """How many twin comparisons failed the pre-registered control rule, named; [] without any check."""
    if CONTROL_OK_COLUMN not in table:
        return []
    checked = table[table[CONTROL_OK_COLUMN].notna()]
    failed = checked[checked[CONTROL_OK_COLUMN].map(control_failed)]
    if not len(checked):
        return []
    named = ", ".join(f"`{method}`" for method in failed.index)
    return [
        f"Control rule (pre-registered: {rule_text(task)}): {len(failed)} of {len(checked)} twin comparisons failed it"
        + (f" ({named}): their gaps are shown, never counted among the gaps that hold." if len(failed) else ".")
    ]


def gaps_by_pretraining_run(method: str, runs: pd.DataFrame, task: Task = CLASSES) -> list[float]:
    """The gap to the twin of each of ``method``'s pretraining runs (its seeds' mean difference in the
    task's main test score to the twin's cell at the same seed), runs in the order of their first
    seed; [] where the per-run table lacks the fields."""
    metric = main_test_metric(task)
    if not {"encoder_run", metric, "seed"} <= set(runs.columns):
        return []
    twin = controls(runs).get(method)
    twin_by_seed = runs[runs["method"] == twin].groupby("seed")[metric].first()
    mine = runs[(runs["method"] == method) & runs["seed"].isin(twin_by_seed.index)]
    differences = mine[metric].to_numpy() - twin_by_seed.loc[mine["seed"]].to_numpy()
    by_run = pd.DataFrame({"run": mine["encoder_run"].to_numpy(), "seed": mine["seed"].to_numpy(), "d": differences})
    grouped = by_run.groupby("run", sort=False)
    return [float(gap) for gap in grouped["d"].mean().loc[grouped["seed"].min().sort_values().index]]


def _pretraining_remarks(table: pd.DataFrame, runs: pd.DataFrame, task: Task = CLASSES) -> list[str]:
    """Per method pretrained more than once: both readings of its gap and the spread between runs."""
    if N_PRETRAININGS_COLUMN not in table or CHECKPOINTS_COLUMNS[0] not in table:
        return []
    several = table[table[N_PRETRAININGS_COLUMN] > 1]
    return [
        f"`{method}` over {int(row[N_PRETRAININGS_COLUMN])} pretraining runs: this recipe (runs random, the "
        f"headline) {points(row['gap_vs_random'])} points (95% CI {points(row['gap_ci_low'])} to "
        f"{points(row['gap_ci_high'])}, p = {row[PVALUE_COLUMN]:.3g}"
        f"{_holm_and_mde(row, 'p_adjusted', 'mde_vs_random')}); these checkpoints (runs fixed) CI "
        f"{points(row['checkpoints_ci_low'])} to {points(row['checkpoints_ci_high'])}, p = "
        f"{row['checkpoints_p']:.3g}{_holm_and_mde(row, CHECKPOINTS_ADJUSTED_COLUMN, CHECKPOINTS_MDE_COLUMN)}; "
        f"{_by_run(gaps_by_pretraining_run(method, runs, task))}the gap's SD between pretraining runs "
        f"{100 * row['between_run_sd']:.1f} points{_upper(row)}{_registered(row)}."
        for method, row in several.iterrows()
        if pd.notna(row.get("checkpoints_p", np.nan))
    ]


def _upper(row: pd.Series) -> str:
    """ " (one-sided 95% upper bound 1.4; MDE 3.4 points there)" where the table has the bound."""
    if pd.isna(row.get(SD_UPPER_COLUMN, np.nan)):
        return ""
    there = f"; MDE {mde(row[MDE_UPPER_COLUMN])} points there" if pd.notna(row.get(MDE_UPPER_COLUMN, np.nan)) else ""
    return f" (one-sided 95% upper bound {100 * row[SD_UPPER_COLUMN]:.1f}{there})"


def _registered(row: pd.Series) -> str:
    """ "; sensitivity, study v3's registered test …" where the table has it."""
    if pd.isna(row.get(REGISTERED_COLUMNS[2], np.nan)):
        return ""
    return (
        f"; sensitivity, study v3's registered test (run variance truncated at 0, chosen before the results; "
        f"the floor replaced it after they were seen): CI {points(row[REGISTERED_COLUMNS[0]])} to "
        f"{points(row[REGISTERED_COLUMNS[1]])}, p = {row[REGISTERED_COLUMNS[2]]:.3g}"
        f"{_holm_and_mde(row, REGISTERED_ADJUSTED_COLUMN, '')}"
    )


def _by_run(gaps: list[float]) -> str:
    """ "the gap by pretraining run (in seed order) +3.9, +5.2, …; " or nothing without per-run gaps."""
    return f"the gap by pretraining run (in seed order) {', '.join(points(gap) for gap in gaps)}; " if gaps else ""


def _holm_and_mde(row: pd.Series, adjusted: str, detectable: str) -> str:
    """ ", Holm p …, MDE … points" of one reading, each only where the table has it."""
    parts = [f"Holm p {row[adjusted]:.3g}" if pd.notna(row.get(adjusted, np.nan)) else ""]
    parts.append(f"MDE {mde(row[detectable])} points" if pd.notna(row.get(detectable, np.nan)) else "")
    return "".join(f", {part}" for part in parts if part)


def _sensitivity_remarks(table: pd.DataFrame) -> list[str]:
    """Per pre-registered comparison: the headline test beside the paired t over its seed pairs,
    each with Holm's adjustment over the family; [] without a family or the sensitivity columns."""
    if SEEDS_T_ADJUSTED_COLUMN not in table or PREREGISTERED_COLUMN not in table:
        return []
    tested = table[(table[PREREGISTERED_COLUMN] == True) & table[SEEDS_T_COLUMNS[-1]].notna()]  # noqa: E712
    if not len(tested):
        return []
    low, high, p_value = SEEDS_T_COLUMNS
    return [
        "Sensitivity of the pre-registered comparisons: beside the headline test, a paired t-test over the "
        "seed pairs' test accuracies, as most papers test a gap. It holds the test items fixed and ignores the "
        "pretraining runs the pairs share, two sources of noise the headline counts; a claim that holds under "
        "one test and not the other is one to read with care."
    ] + [
        f"Sensitivity, `{method}` ({points(row['gap_vs_random'])} points): headline CI {points(row['gap_ci_low'])} "
        f"to {points(row['gap_ci_high'])}, Holm p {number(row['p_adjusted'], '.3g')}; paired t over "
        f"{int(row['n_seeds'])} seed pairs CI {points(row[low])} to {points(row[high])}, p {row[p_value]:.3g}, "
        f"Holm p {number(row[SEEDS_T_ADJUSTED_COLUMN], '.3g')}."
        for method, row in tested.iterrows()
    ]


def _tfidf_gap(method: str, row: pd.Series) -> str:
    return (
        f"`{method}` {points(row['gap_vs_tfidf'])} (CI {points(row['gap_vs_tfidf_ci_low'])} to "
        f"{points(row['gap_vs_tfidf_ci_high'])})"
    )


def _tfidf_remarks(table: pd.DataFrame, accuracy: pd.Series, task: Task = CLASSES) -> list[str]:
    """Each method against the task's TF-IDF baseline (TF-IDF + LR, or + ridge for a graded task), by
    where its CI of ``gap_vs_tfidf`` lies: above 0, below 0 or across it; one-seed rows have no CI.
    [] without a TF-IDF comparison."""
    reference = tfidf_baseline(task)
    title = baseline_title(reference)
    if "gap_vs_tfidf" not in table or reference not in table.index:
        return []
    compared = table[table["gap_vs_tfidf"].notna()]
    if not len(compared):
        return []
    low, high = compared["gap_vs_tfidf_ci_low"], compared["gap_vs_tfidf_ci_high"]
    groups = [
        ("above it (CI above 0)", compared[low > 0]),
        ("below it (CI below 0)", compared[high < 0]),
        ("no gap detected (CI includes 0)", compared[(low <= 0) & (high >= 0)]),
    ]
    pieces = [
        f"{label}: " + ", ".join(_tfidf_gap(method, row) for method, row in group.iterrows())
        for label, group in groups
        if len(group)
    ]
    alone = compared[low.isna()]
    if len(alone):
        pieces.append(f"{NO_SEED_REPLICATION}, so no test: " + ", ".join(f"`{method}`" for method in alone.index))
    at_fractions = [method for method in table.index if method.startswith(f"{reference}@")]
    unit = "%" if is_percent(task.main_metric) else ""
    fitted = "".join(
        f", `{method}` {number(accuracy[method], '.1f')}{unit} (mean over the seeds' labelled subsets)"
        for method in at_fractions
    )
    line = (
        f"Against {title} (`{reference}`, {number(accuracy[reference], '.1f')}{unit}{fitted}; each "
        "method's seeds × test items against the one at its own labelled fraction, gap in points with its 95% "
        "CI) — " + "; ".join(pieces) + "."
    )
    if low.notna().any() and not (low > 0).any():
        line += f" No method is measurably above {title} (a CI that includes 0 is not evidence of no gap)."
    many = chance_remark(
        low, high, compared.get("p_vs_tfidf_adjusted"), what="CIs against TF-IDF", adjusted_name="p_vs_tfidf_adjusted"
    )
    return [line] + ([f"Gaps to {title}: {many}"] if many else [])


def _span(values: pd.Series) -> str:
    low, high = int(values.min()), int(values.max())
    return f"{low}" if low == high else f"{low}–{high}"


def _units(count: int | str, over_runs: bool) -> str:
    """What a gap is over: seed pairs, or pretraining runs where it is read over runs (``paired_seeds``
    then counts the runs, each run's seed pairs averaged)."""
    return f"{count} pretraining run(s)" if over_runs else f"{count} seed pair(s)"


def _design(tested: pd.DataFrame) -> str:
    over_runs = {procedure == RECIPE for procedure in tested["gap_test"]} if "gap_test" in tested else {False}
    count = _span(tested["paired_seeds"])
    units = (
        f"{count} seed pairs or pretraining runs" if over_runs == {True, False} else _units(count, True in over_runs)
    )
    return f"{units} × {_span(tested['paired_items'])} test items"


def _curve_remarks(runs: pd.DataFrame, table: pd.DataFrame, accuracy: pd.Series, task: Task = CLASSES) -> list[str]:
    """Per learning curve of a pretrained setting: its gap at the smallest fraction and on the
    whole training set."""
    twins, remarks = controls(runs), []
    cells = settings(runs)
    curve = cells[(cells["fraction"] < 1) & (cells["kind"] == "pretrained")]
    for setting, group in curve.groupby(SETTING, sort=False):
        smallest = group.loc[group["fraction"].idxmin()]
        full = full_fraction_method(runs, setting)
        pieces, gaps = [], []
        for fraction, method in ((smallest["fraction"], smallest["method"]), (1.0, full)):
            control = twins.get(method)
            row = table.loc[method] if method in table.index else None
            if row is not None and pd.notna(row.get("gap_vs_random", np.nan)):
                gaps.append(row["gap_vs_random"])
                interval = (
                    f"CI {points(row['gap_ci_low'])} to {points(row['gap_ci_high'])}, "
                    if pd.notna(row["gap_ci_low"])
                    else ""
                )
                pieces.append(
                    f"{points(gaps[-1])} points vs `{control}` at {fraction:g} of the training data "
                    f"({interval}{_verdict(row)})"
                )
            elif method in accuracy:
                pieces.append(f"{score(accuracy[method], task)} at {fraction:g} of the training data (no paired twin)")
        trend = ""
        if len(gaps) == 2:  # the signed values: "grows" would not say in whose favour
            trend = (
                (
                    f" — the point estimate moves from {points(gaps[0])} to {points(gaps[1])} points with more "
                    "training data (read the CIs before calling it a trend)"
                )
                if gaps[0] != gaps[1]
                else " — the same point estimate at both"
            )
        remarks.append(f"Learning curve `{full or setting_label(setting)}`: " + "; ".join(pieces) + trend + ".")
    return remarks
