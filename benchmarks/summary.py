"""The benchmark's one-screen summary on the console."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from benchmarks.stats import ITEMS_ONLY


def points_with_ci(gap: float, low: float, high: float) -> str:
    """A gap with its 95% CI in accuracy points; one seed pair (no CI) gets a †; no gap a dash."""
    if pd.isna(gap):
        return "—"
    if pd.isna(low):
        return f"{100 * gap:+.1f} †"
    return f"{100 * gap:+.1f} ({100 * low:+.1f}, {100 * high:+.1f})"


def column(row, name: str) -> float:
    """A row's value, NaN where an older table lacks the column."""
    return getattr(row, name, float("nan"))


def p_text(value: float) -> str:
    return "—" if pd.isna(value) else f"{value:.3g}"


def print_summary(results: pd.DataFrame, config: dict, parent: str, directory: Path, wall: float,
                  data_name: str = "mrpc", links: list[str] = (), engine: str = "") -> None:
    """The results: mean ± std over seeds; the paired gap over the random twin on test accuracy
    with its 95% CI, p and Holm-adjusted p; and the gap over TF-IDF + LR with its CI (points; † =
    one seed pair: no seed replication, no CI or p); then where the runs are and what ran them."""
    print(f"\n── benchmark '{config['name']}' on {data_name} finished in {wall / 60:.1f} min " + "─" * 30)
    print(f"  {'method':<34}{'n':>3}  {'dev acc':>14}  {'test acc':>14}  {'test F1':>14}  "
          f"{'gap vs random (95% CI)':<24}  {'p':>7}  {'p adj.':>7}  gap vs TF-IDF + LR (95% CI)")
    for row in results.itertuples():
        cells = [f"{100 * getattr(row, f'{m}_mean'):5.1f} ± {100 * getattr(row, f'{m}_std'):4.1f}"
                 for m in ("dev_acc", "test_acc", "test_f1")]
        gap = points_with_ci(*(column(row, name) for name in ("gap_vs_random", "gap_ci_low", "gap_ci_high")))
        tfidf = points_with_ci(*(column(row, f"gap_vs_tfidf{end}") for end in ("", "_ci_low", "_ci_high")))
        p_value, p_adjusted = (p_text(column(row, name)) for name in ("p_value_vs_random", "p_adjusted"))
        print(f"  {row.method:<34}{row.n_seeds:>3}  {cells[0]:>14}  {cells[1]:>14}  {cells[2]:>14}  "
              f"{gap:<24}  {p_value:>7}  {p_adjusted:>7}  {tfidf}")
    if "gap_test" in results and (results["gap_test"] == ITEMS_ONLY).any():
        print("  † one seed pair: no seed replication, so no CI or p (see report.md, How to read)")
    print(f"  parent run {parent}  (experiment '{config['experiment']}')")
    print(f"  report     {directory / 'report.md'}")
    if engine:
        print(f"  ran on     {engine}")
    for line in links:
        print(line)
