"""The report's "Against every reference" table: each pre-registered comparison's pretrained arm beside
the three references a transfer claim has to beat: its random-init twin (the headline gap), the twin's
linear probe at the same fraction (what a linear read-out of random features reaches already) and
TF-IDF + LR fitted on the same labels. A claim beats a reference when that gap is positive and its
Holm-adjusted p is below 0.05; the twin only where both arms learned (the control rule)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from benchmarks.report.remarks import number, points
from benchmarks.stats.controls import CONTROL_OK_COLUMN, control_failed
from benchmarks.stats.gaps import PROBE_ADJUSTED_COLUMN, PROBE_GAP_COLUMNS, TFIDF_REGISTERED_COLUMN, TWIN_PROBE_COLUMN
from benchmarks.stats.preregistration import PREREGISTERED_COLUMN, Family
from harness.datasets.metric_text import main_test_metric, metric_title, short_title, title_case
from harness.datasets.task import CLASSES, Task

ALPHA = 0.05
TWIN = ("gap_vs_random", "gap_ci_low", "gap_ci_high", "p_adjusted")
PROBE = (*PROBE_GAP_COLUMNS[:3], PROBE_ADJUSTED_COLUMN)
TFIDF = ("gap_vs_tfidf", "gap_vs_tfidf_ci_low", "gap_vs_tfidf_ci_high", TFIDF_REGISTERED_COLUMN)


def registered_rows(results: pd.DataFrame) -> pd.DataFrame:
    """The pre-registered comparisons with a twin gap, where the results have a twin's probe gap; else none."""
    if PROBE_ADJUSTED_COLUMN not in results or PREREGISTERED_COLUMN not in results:
        return results.iloc[0:0]
    registered = results[PREREGISTERED_COLUMN].astype(str).str.lower().eq("true")
    return results[registered & results["gap_vs_random"].notna()]


def beats(row: pd.Series) -> dict[str, bool]:
    """Whether the row's pretrained arm beats its twin (both arms learned), the twin's probe and TF-IDF."""
    learned = not control_failed(row.get(CONTROL_OK_COLUMN))
    return {
        "twin": learned and _above(row, TWIN),
        "twin's probe": _above(row, PROBE),
        "TF-IDF": _above(row, TFIDF),
    }


def _above(row: pd.Series, columns: tuple[str, ...]) -> bool:
    gap, p_value = row.get(columns[0], np.nan), row.get(columns[3], np.nan)
    return bool(pd.notna(gap) and pd.notna(p_value) and gap > 0 and p_value < ALPHA)


def verdict(row: pd.Series) -> str:
    """ "**all three**", the references it beats ("… only"), or "none"; a failed control named first."""
    held = beats(row)
    prefix = "✗ control failed; " if control_failed(row.get(CONTROL_OK_COLUMN)) else ""
    if all(held.values()):
        return prefix + "**all three**"
    won = [name for name, value in held.items() if value]
    return prefix + (", ".join(won) + " only" if won else "none")


def _interval(row: pd.Series, columns: tuple[str, ...]) -> str:
    """``+5.0 (+1.2, +8.8)`` in points, the gap alone without a CI, — without a gap."""
    gap, low, high = (row.get(column, np.nan) for column in columns[:3])
    if pd.isna(gap):
        return "—"
    return points(gap) + (f" ({points(low)}, {points(high)})" if pd.notna(low) else "")


def _gap(row: pd.Series, columns: tuple[str, ...]) -> str:
    interval = _interval(row, columns)
    return interval if interval == "—" else f"{interval} p={number(row.get(columns[3], np.nan), '.2g')}"


def references_section(results: pd.DataFrame, task: Task = CLASSES) -> list[str]:
    """Markdown lines: per pre-registered comparison, its gap to each reference with its 95% CI and Holm
    p, and which references it beats; [] without a registered family or a twin's probe."""
    rows = registered_rows(results)
    if not len(rows):
        return []
    metric = main_test_metric(task)
    lines = [
        "",
        "## Against every reference",
        "",
        "Each pre-registered comparison's pretrained arm against the three references a transfer claim has to "
        "beat: its random-init twin (the headline gap), the twin's linear probe at the same fraction (what a "
        "linear read-out of random features reaches already) and TF-IDF + LR fitted on the same labels, all three "
        "in one unit: the same test, over pretraining runs where the arm has several. "
        f"{title_case(metric_title(metric))} gap in points, its 95% CI and p adjusted by Holm over the pre-registered "
        "comparisons, a family per reference (`p_adjusted`, `p_vs_twin_probe_adjusted`, "
        "`p_vs_tfidf_registered_adjusted`). Beats: the gap is positive with p < 0.05; the twin only where both "
        "arms learned.",
        "",
        f"| comparison | {short_title(metric)} | vs twin | vs twin's linear probe | vs TF-IDF at its fraction "
        "| beats |",
        "|---|---|---|---|---|---|",
    ]
    for _, row in rows.iterrows():
        probe, probe_text = row.get(TWIN_PROBE_COLUMN), _gap(row, PROBE)
        if isinstance(probe, str) and probe_text != "—":
            probe_text += f" (`{probe}`)"
        lines.append(
            f"| `{row['method']}` | {number(100 * row[f'{metric}_mean'], '.1f')} | {_gap(row, TWIN)} | "
            f"{probe_text} | {_gap(row, TFIDF)} | {verdict(row)} |"
        )
    return lines


def console_summary(results: pd.DataFrame, family: Family | None, task: Task = CLASSES) -> list[str]:
    """The study's answer on one screen: each pre-registered comparison's test accuracy, its gap to
    each reference (points, 95% CI, Holm p) and what it beats, the comparisons not yet run named;
    [] without a registered family or a twin's probe."""
    rows = registered_rows(results)
    if family is None or not len(rows):
        return []
    missing = f"; not yet run: {', '.join(family.missing)}" if family.missing else ""
    metric = main_test_metric(task)
    lines = [
        f"── pre-registered comparisons: {len(rows)} of {family.size} with a gap{missing} " + "─" * 20,
        f"  {'comparison':<40}{short_title(task.main_metric):>5}   "
        f"{'vs twin (95% CI)':<20}{'p':>8}   {'vs twin probe':<20}{'p':>8}   "
        f"{'vs TF-IDF':<20}{'p':>8}   beats (Holm p < 0.05)",
    ]
    for _, row in rows.iterrows():
        parts = []
        for columns in (TWIN, PROBE, TFIDF):
            parts.append(f"{_interval(row, columns):<20}{number(row.get(columns[3], np.nan), '.2g'):>8}")
        lines.append(
            f"  {row['method']:<40}{100 * row[f'{metric}_mean']:5.1f}   {'   '.join(parts)}   "
            + verdict(row).replace("**", "")
        )
    names = "|".join(map(re.escape, task.baselines))  # majority|tfidf-lr
    baselines = results[results["method"].str.match(rf"^({names})(@|$)")]
    if len(baselines):
        lines.append(
            f"  baselines ({short_title(metric)}): "
            + ", ".join(
                f"{method} {100 * score:.1f}" for method, score in zip(baselines["method"], baselines[f"{metric}_mean"])
            )
        )
    return lines
