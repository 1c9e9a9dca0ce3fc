"""The benchmark's one-screen summary on the console."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmarks.report.control_rule import failed_control, named_reason
from benchmarks.report.outputs import SMOKE_NOTE, TFIDF_GAP, TWIN_GAP, gap_cell
from benchmarks.report.remarks import number
from benchmarks.stats.controls import CONTROL_REASON_COLUMN
from benchmarks.stats.gaps import ITEMS_ONLY
from harness.datasets.metric_text import short_title
from harness.datasets.task import CLASSES, Task


def print_summary(
    results: pd.DataFrame,
    config: dict,
    parent: str,
    directory: Path,
    wall: float,
    data_name: str = "mrpc",
    links: list[str] = (),
    engine: str = "",
    task: Task = CLASSES,
) -> None:
    """The results: the task's main dev metric and its test metrics (accuracy and F1, or Pearson and
    Spearman × 100), mean ± std over seeds; the paired gap over the random twin on its main test metric
    with its 95% CI, p and Holm-adjusted p (✗: its control failed, so it is shown and never counted;
    the reason below the table); and the gap over TF-IDF + LR with its CI (points; † = one seed
    pair: no seed replication, no CI or p); then where the runs are and what ran them. A smoke
    matrix (``smoke: true``) says so on the first line."""
    smoke = f" — {SMOKE_NOTE} " if config.get("smoke") else " "
    print(f"\n── benchmark '{config['name']}' on {data_name} finished in {wall / 60:.1f} min{smoke}" + "─" * 30)
    shown = [task.monitor, *task.run_metrics(("test",))]  # dev_acc, test_acc, test_f1
    titles = "  ".join(f"{short_title(metric):>14}" for metric in shown)
    print(
        f"  {'method':<34}{'n':>3}  {titles}  "
        f"{'gap vs random (95% CI)':<24}  {'p':>7}  {'p adj.':>7}  gap vs TF-IDF + LR (95% CI)"
    )
    failed = []
    for _, row in results.iterrows():  # older tables lack the later columns: row.get gives NaN, shown as —
        cells = "  ".join(f"{100 * row[f'{m}_mean']:5.1f} ± {100 * row[f'{m}_std']:4.1f}".rjust(14) for m in shown)
        gap, tfidf = gap_cell(row, TWIN_GAP, alone="†"), gap_cell(row, TFIDF_GAP, alone="†")
        if failed_control(row):
            gap = f"{gap} ✗"
            failed.append(named_reason(row["method"], row.get(CONTROL_REASON_COLUMN, "")))
        p_value, p_adjusted = (number(row.get(name), ".3g") for name in ("p_value_vs_random", "p_adjusted"))
        print(f"  {row['method']:<34}{row['n_seeds']:>3}  {cells}  {gap:<24}  {p_value:>7}  {p_adjusted:>7}  {tfidf}")
    if "gap_test" in results and (results["gap_test"] == ITEMS_ONLY).any():
        print("  † one seed pair: no seed replication, so no CI or p (see report.md, How to read)")
    if failed:
        print(f"  ✗ control failed (an arm did not learn; shown, never counted): {'; '.join(failed)}")
    print(f"  parent run {parent}  (experiment '{config['experiment']}')")
    print(f"  report     {directory / 'report.md'}")
    if engine:
        print(f"  ran on     {engine}")
    for line in links:
        print(line)
