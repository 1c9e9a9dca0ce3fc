"""The columns of a benchmark's ``results.csv``, declared once: each one's name, type, meaning and
the function that reads its value from what is known about a method (:class:`Evidence`). The CSV's
header and order, its rows, the parent run's summary metrics and the plain columns of the report's
results table are all built from :data:`COLUMNS`; a new statistic is its function and one entry here.

The task decides the metric columns (``<metric>_<statistic>`` for each metric it logs) and what the
gaps are in (:func:`columns`); a meaning names the task's main score as ``{score}``, its unit as
``{unit}`` and a collapsed run as ``{collapse}``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.stats.aggregate import STATISTICS
from benchmarks.stats.controls import CONTROL_OK_COLUMN, CONTROL_REASON_COLUMN
from benchmarks.stats.gaps import (
    PROBE_ADJUSTED_COLUMN,
    PROBE_GAP_COLUMNS,
    PVALUE_COLUMN,
    TFIDF_REGISTERED_COLUMN,
    TWIN_PROBE_COLUMN,
    Gap,
    minimum_detectable_effect,
)
from benchmarks.stats.multiplicity import holm
from benchmarks.stats.paired_seeds import SEEDS_T_ADJUSTED_COLUMN, SEEDS_T_COLUMNS, SeedPairTest
from benchmarks.stats.preregistration import PREREGISTERED_COLUMN
from benchmarks.stats.pretraining_runs import (
    CHECKPOINTS_ADJUSTED_COLUMN,
    CHECKPOINTS_COLUMNS,
    CHECKPOINTS_MDE_COLUMN,
    MDE_UPPER_COLUMN,
    N_PRETRAININGS_COLUMN,
    REGISTERED_ADJUSTED_COLUMN,
    REGISTERED_COLUMNS,
    SD_UPPER_COLUMN,
    PretrainingGaps,
    checkpoints_detectable_effect,
    recipe_detectable_effects,
)
from harness.datasets.task import CLASSES, Task, metric_title

COLLAPSED_COLUMN = "collapsed_runs"
TFIDF_REFERENCE_COLUMN = "tfidf_reference"  # which TF-IDF row a method's ``gap_vs_tfidf`` is against
STEPS_COLUMN = "train_steps_mean"  # mean optimiser steps of a method's runs (NaN for baselines)


@dataclass(frozen=True)
class Evidence:
    """What the table knows of one method when its row is built.

    Args:
        aggregate: its row of ``aggregate_runs`` (``n_seeds`` and each metric's statistics).
        gap: the gap over its random-init twin (the headline reading), None without one.
        baseline: the gap over TF-IDF + LR, None without one; ``reference``: which TF-IDF row ("" none).
        collapsed: its runs whose test predictions collapsed (``aggregate.is_collapsed``).
        control: the control rule's ``(held, reason)``, None without a twin gap.
        pretrainings: how many pretraining runs its pretrained cells come from (None: no pretrained arm).
        over_runs: both readings over pretraining runs, None unless its cells come from several.
        rate: the learning rate chosen from its grid (NaN: none for it; None: no grid in the benchmark).
        steps: its runs' mean optimiser steps (NaN: none logged for it; None: no run logged any).
        head: the head a ``picked`` arm chose on dev (NaN: its head was declared; None: no arm picked one).
        seeds_t: the sensitivity reading, a paired t over its seed pairs, None without two.
        probe: the gap over the twin's linear probe at its fraction (read as ``gap``), None without one;
            ``probe_reference``: that probe's method ("" none).
    """

    method: str
    aggregate: dict
    gap: Gap | None = None
    baseline: Gap | None = None
    reference: str = ""
    collapsed: int = 0
    control: tuple[bool, str] | None = None
    pretrainings: int | None = None
    over_runs: PretrainingGaps | None = None
    rate: float | None = None
    steps: float | None = None
    head: str | float | None = None
    seeds_t: SeedPairTest | None = None
    probe: Gap | None = None
    probe_reference: str = ""


@dataclass(frozen=True)
class Column:
    """One column of ``results.csv``.

    Args:
        type: what its values are: ``int``, ``float`` (NaN where missing), ``str`` or ``bool`` (empty
            where missing).
        value: its value for one method; None for a column computed over the whole table (``over_table``)
            or added after the table is built (``preregistered``).
        over_table: its values from the table's other columns (Holm's adjustment over all rows).
        optional: written only where the value of some method is not None (e.g. a grid's chosen rate).
        shown: its header in the report's results table, shown where some row has a value ("": not
            shown there as a plain number); ``shown_format`` the format of its cells.
        summary: logged as a summary metric of the benchmark's parent run.
        per_metric: one of the ``<metric>_<statistic>`` columns, which the task's metrics replace.
    """

    name: str
    type: type
    meaning: str
    value: Callable[[Evidence], Any] | None = None
    over_table: Callable[[pd.DataFrame], Any] | None = None
    optional: bool = False
    shown: str = ""
    shown_format: str = "g"
    summary: bool = False
    per_metric: bool = False


def field_of(gap_of: Callable[[Evidence], Gap | None], field: str, missing=np.nan) -> Callable[[Evidence], Any]:
    """A value function: ``field`` of the gap ``gap_of`` picks, ``missing`` without one."""
    return lambda evidence: missing if gap_of(evidence) is None else getattr(gap_of(evidence), field)


def twin(evidence: Evidence) -> Gap | None:
    return evidence.gap


def tfidf(evidence: Evidence) -> Gap | None:
    return evidence.baseline


def twin_probe(evidence: Evidence) -> Gap | None:
    return evidence.probe


def detectable_effect(evidence: Evidence) -> float:
    """The minimum detectable effect of the twin comparison's design (NaN with one seed pair or none)."""
    gap = evidence.gap
    if gap is None or gap.seeds < 2:
        return np.nan
    return minimum_detectable_effect(gap.seed_variance, gap.item_variance, gap.residual_variance, gap.seeds, gap.items)


def adjusted(column: str) -> Callable[[pd.DataFrame], np.ndarray]:
    """Holm's adjustment of ``column``'s p-values over every row of the table."""
    return lambda table: holm(table[column].to_numpy(dtype=float))


def checkpoints_reading(index: int) -> Callable[[Evidence], Any]:
    """One value of the "these checkpoints" reading beside a gap over pretraining runs."""

    def value(evidence: Evidence):
        if evidence.over_runs is None:
            return None
        gaps = evidence.over_runs
        return (
            gaps.checkpoints.ci_low,
            gaps.checkpoints.ci_high,
            gaps.checkpoints.p_value,
            float(np.sqrt(gaps.between_run_variance)),
        )[index]

    return value


def registered_reading(field: str) -> Callable[[Evidence], Any]:
    """One value of study v3's registered test over runs (run component truncated at 0); None without it."""

    def value(evidence: Evidence):
        if evidence.over_runs is None or evidence.over_runs.registered is None:
            return None
        return getattr(evidence.over_runs.registered, field)

    return value


def between_run_sd_upper(evidence: Evidence):
    """The one-sided 95% upper bound of the between-run SD; None unless read over runs."""
    if evidence.over_runs is None:
        return None
    return float(np.sqrt(evidence.over_runs.between_run_upper))


def detectable_at_sd_upper(evidence: Evidence):
    """The headline's MDE with the between-run SD at its upper bound; None unless read over runs."""
    return None if evidence.over_runs is None else recipe_detectable_effects(evidence.over_runs)[1]


def seeds_t_reading(field: str) -> Callable[[Evidence], Any]:
    """One value of the paired t over seed pairs beside the twin gap; None without it."""
    return lambda evidence: None if evidence.seeds_t is None else getattr(evidence.seeds_t, field)


# what a task's scores are in, and what its collapsed run predicts (by ``Task.target``)
UNITS = {"classes": "fraction", "graded": "correlation in [-1, 1]"}
COLLAPSES = {"classes": "all one class", "graded": "(near) constant"}


def metric_column(metric: str, statistic: str, task: Task = CLASSES) -> Column:
    """``<metric>_<statistic>`` over a method's runs; the parent run's summary holds each test metric's
    mean, the main one's test SD and its dev mean."""
    name = f"{metric}_{statistic}"
    main = task.main_metric
    summary_names = {f"test_{other}_mean" for other in task.metrics} | {f"test_{main}_std", f"dev_{main}_mean"}
    return Column(
        name,
        float,
        f"{statistic} of {metric} over the method's runs ({UNITS[task.target]})",
        lambda evidence: evidence.aggregate[name],
        summary=name in summary_names,
        per_metric=True,
    )


def missing_if_none(value):
    return np.nan if value is None else value


COLUMNS: list[Column] = [
    Column("method", str, "the method: an arm of the matrix, a baseline or a probe", lambda e: e.method),
    Column("n_seeds", int, "its runs (one per seed)", lambda e: e.aggregate["n_seeds"], summary=True),
    *[metric_column(metric, statistic) for metric in CLASSES.run_metrics() for statistic in STATISTICS],
    Column(
        PVALUE_COLUMN,
        float,
        "two-sided p of the gap over the random-init twin",
        field_of(twin, "p_value"),
        summary=True,
    ),
    Column(COLLAPSED_COLUMN, int, "runs whose test predictions are {collapse}", lambda e: e.collapsed),
    Column(
        "gap_vs_random",
        float,
        "test {score} gap over the twin ({unit}; over pretraining runs where there are several)",
        field_of(twin, "gap"),
        summary=True,
    ),
    Column("gap_ci_low", float, "its 95% CI, low end", field_of(twin, "ci_low"), summary=True),
    Column("gap_ci_high", float, "its 95% CI, high end", field_of(twin, "ci_high"), summary=True),
    Column(
        "mde_vs_random",
        float,
        "minimum detectable effect of the design from the variance its test uses (alpha 0.05, power 0.8)",
        detectable_effect,
    ),
    Column(
        "paired_seeds",
        int,
        "seed pairs the gap is over, or pretraining runs where it is read over runs (gap_test 'runs x items'); "
        "0: no twin comparison",
        field_of(twin, "seeds", 0),
    ),
    Column("paired_items", int, "test items the gap is over", field_of(twin, "items", 0)),
    Column("gap_test", str, "the procedure: seeds x items, or no seed replication", field_of(twin, "procedure")),
    Column(
        "p_adjusted",
        float,
        "Holm's adjustment of p over the table's twin comparisons",
        over_table=adjusted(PVALUE_COLUMN),
        summary=True,
    ),
    Column(
        "gap_vs_tfidf",
        float,
        "test {score} gap over TF-IDF + LR at the method's fraction",
        field_of(tfidf, "gap"),
        summary=True,
    ),
    Column("gap_vs_tfidf_ci_low", float, "its 95% CI, low end", field_of(tfidf, "ci_low"), summary=True),
    Column("gap_vs_tfidf_ci_high", float, "its 95% CI, high end", field_of(tfidf, "ci_high"), summary=True),
    Column("p_vs_tfidf", float, "two-sided p of the gap over TF-IDF + LR", field_of(tfidf, "p_value"), summary=True),
    Column(
        "p_vs_tfidf_adjusted",
        float,
        "Holm's adjustment over the TF-IDF comparisons, a family of their own",
        over_table=adjusted("p_vs_tfidf"),
        summary=True,
    ),
    Column(
        TFIDF_REGISTERED_COLUMN,
        float,
        "Holm's adjustment of p_vs_tfidf over the pre-registered comparisons (added with a registered family)",
    ),
    Column(
        CONTROL_OK_COLUMN,
        bool,
        "whether both arms learned (the pre-registered control rule)",
        lambda e: np.nan if e.control is None else e.control[0],
    ),
    Column(
        CONTROL_REASON_COLUMN,
        str,
        "why the control failed",
        lambda e: e.control[1] if e.control is not None and e.control[0] is False else np.nan,
    ),
    Column(TFIDF_REFERENCE_COLUMN, str, "the TF-IDF + LR row gap_vs_tfidf is against", lambda e: e.reference or np.nan),
    Column(
        PROBE_GAP_COLUMNS[0],
        float,
        "test {score} gap over the twin's linear probe at the method's fraction (read as gap_vs_random)",
        field_of(twin_probe, "gap", None),
        optional=True,
    ),
    Column(PROBE_GAP_COLUMNS[1], float, "its 95% CI, low end", field_of(twin_probe, "ci_low", None), optional=True),
    Column(PROBE_GAP_COLUMNS[2], float, "its 95% CI, high end", field_of(twin_probe, "ci_high", None), optional=True),
    Column(
        PROBE_GAP_COLUMNS[3],
        float,
        "two-sided p of the gap over the twin's linear probe",
        field_of(twin_probe, "p_value", None),
        optional=True,
    ),
    Column(
        PROBE_ADJUSTED_COLUMN,
        float,
        "Holm's adjustment of p_vs_twin_probe over the pre-registered comparisons (added with a registered family)",
    ),
    Column(
        TWIN_PROBE_COLUMN,
        str,
        "the twin's linear probe gap_vs_twin_probe is against",
        lambda e: e.probe_reference or None,
        optional=True,
    ),
    Column(
        N_PRETRAININGS_COLUMN,
        float,
        "pretraining runs among the pretrained method's cells",
        lambda e: missing_if_none(e.pretrainings),
    ),
    *[
        Column(name, float, meaning, checkpoints_reading(index), optional=True)
        for index, (name, meaning) in enumerate(
            zip(
                CHECKPOINTS_COLUMNS[:3],
                ("the gap's 95% CI with the pretraining runs fixed, low end", "high end", "its two-sided p"),
            )
        )
    ],
    Column(
        CHECKPOINTS_ADJUSTED_COLUMN,
        float,
        "Holm's adjustment of checkpoints_p over the pre-registered comparisons (added with a registered family)",
    ),
    Column(
        CHECKPOINTS_COLUMNS[3], float, "SD of the gap between pretraining runs", checkpoints_reading(3), optional=True
    ),
    Column(
        SD_UPPER_COLUMN,
        float,
        "one-sided 95% upper bound of between_run_sd",
        between_run_sd_upper,
        optional=True,
    ),
    Column(
        MDE_UPPER_COLUMN,
        float,
        "minimum detectable effect of the headline with the between-run SD at its upper bound (conservative)",
        detectable_at_sd_upper,
        optional=True,
    ),
    *[
        Column(name, float, meaning, registered_reading(field), optional=True)
        for name, field, meaning in zip(
            REGISTERED_COLUMNS,
            ("ci_low", "ci_high", "p_value"),
            (
                "sensitivity: the gap's 95% CI by study v3's registered test over runs (run component "
                "truncated at 0), low end",
                "high end",
                "its two-sided p",
            ),
        )
    ],
    Column(
        REGISTERED_ADJUSTED_COLUMN,
        float,
        "Holm's adjustment of registered_p over the pre-registered comparisons (added with a registered family)",
    ),
    Column(
        CHECKPOINTS_MDE_COLUMN,
        float,
        "minimum detectable effect with the pretraining runs fixed (alpha 0.05, power 0.8)",
        lambda e: None if e.over_runs is None else checkpoints_detectable_effect(e.over_runs),
        optional=True,
    ),
    *[
        Column(name, float, meaning, seeds_t_reading(field), optional=True)
        for name, field, meaning in zip(
            SEEDS_T_COLUMNS,
            ("ci_low", "ci_high", "p_value"),
            (
                "sensitivity: the gap's 95% CI by a paired t over seed pairs' test accuracies (items fixed), low end",
                "high end",
                "its two-sided p",
            ),
        )
    ],
    Column(
        SEEDS_T_ADJUSTED_COLUMN,
        float,
        "Holm's adjustment of seeds_t_p over the pre-registered comparisons (added with a registered family)",
    ),
    Column(
        "learning_rate",
        float,
        "the rate chosen from the method's grid on dev",
        lambda e: e.rate,
        optional=True,
        shown="lr",
        shown_format="g",
    ),
    Column(
        "picked_head",
        str,
        "the head a `picked` arm chose on dev in its recipe_from selection",
        lambda e: e.head,
        optional=True,
    ),
    Column(
        STEPS_COLUMN,
        float,
        "mean optimiser steps of its runs",
        lambda e: e.steps,
        optional=True,
        shown="steps",
        shown_format=".0f",
    ),
    Column(  # added by a report from folders told the study lost cells (``results_files.plan_check``)
        "planned_cells_missing", int, "planned cells its comparison lacks, its control's included (report --incomplete)"
    ),
    Column(PREREGISTERED_COLUMN, bool, "one of the pre-registered comparisons (added with a registered family)"),
]


def register(column: Column) -> None:
    """Declare a new column: written after the declared ones (``preregistered``, added later, stays last)."""
    if column.name in [item.name for item in COLUMNS]:
        raise ValueError(f"results column {column.name!r} is declared already")
    COLUMNS.insert(len(COLUMNS) - 1, column)


def columns(task: Task = CLASSES) -> list[Column]:
    """The declared columns for ``task``: its metrics' columns in place of the per-metric block, and
    each meaning with the task's main score, unit and collapse named."""
    words = {
        "{score}": metric_title(task.main_metric),
        "{unit}": UNITS[task.target],
        "{collapse}": COLLAPSES[task.target],
    }
    chosen, metrics_placed = [], False
    for column in COLUMNS:
        if column.per_metric:
            if not metrics_placed:
                chosen += [metric_column(m, statistic, task) for m in task.run_metrics() for statistic in STATISTICS]
                metrics_placed = True
            continue
        meaning = column.meaning
        for placeholder, word in words.items():
            meaning = meaning.replace(placeholder, word)
        chosen.append(replace(column, meaning=meaning))
    return chosen


def names(task: Task = CLASSES) -> list[str]:
    """Every declared column's name for ``task``, in the order ``results.csv`` writes them."""
    return [column.name for column in columns(task)]


def results_frame(evidence: list[Evidence], task: Task = CLASSES) -> pd.DataFrame:
    """The table of ``evidence`` (one method each, in the table's order): every column declared for
    ``task`` with a value or over-table function, in declared order, of its declared type; an optional
    column only where some method has a value."""
    declared = columns(task)
    values = {item.name: [item.value(method) for method in evidence] for item in declared if item.value is not None}
    kept = [
        item
        for item in declared
        if item.over_table is not None
        or (item.value is not None and (not item.optional or any(value is not None for value in values[item.name])))
    ]
    table = pd.DataFrame(
        {name: [missing_if_none(value) for value in column_values] for name, column_values in values.items()},
        index=range(len(evidence)),
    )
    for item in kept:
        if item.over_table is not None:
            table[item.name] = item.over_table(table)
    table = table[[item.name for item in kept]]
    return table.astype({item.name: item.type if item.type in (int, float) else object for item in kept})


def shown_columns(results: pd.DataFrame) -> list[Column]:
    """The plain columns the report's results table shows for ``results``: declared ``shown``, with a value."""
    return [item for item in COLUMNS if item.shown and item.name in results and results[item.name].notna().any()]
