"""The study's answer in six lines, from its ``results.csv`` alone: what holds over the random-init
twin (with its gaps to the twin's linear probe and to TF-IDF + LR), what is a lead, what is not
counted, where no gap was detected and how large a gap could hide there, and how much the gap moves
between pretraining runs. The report opens with it, and ``docs/study.md`` and ``results/README.md``
carry it between ``BEGIN``/``END`` markers that ``python -m benchmarks.report.answer`` rewrites
(``make study-report`` does, for the published study), so the words cannot drift from the table.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from benchmarks.stats.pretraining_runs import SD_UPPER_COLUMN, STATISTICS_VERSION
from harness.entry_point import run_main
from harness.errors import UserError

ALPHA = 0.05
BEGIN = "<!-- answer: generated from {source} by make study-report; do not edit by hand -->"
END = "<!-- /answer -->"


def points(value: float) -> str:
    return f"{100 * value:+.1f}"


def _p(value: float) -> str:
    return f"{value:.2g}"


def _ci(row: pd.Series, low: str, high: str) -> str:
    return f"{points(row[low])} to {points(row[high])}"


def _holds(row: pd.Series) -> bool:
    return bool(row["p_adjusted"] < ALPHA and row["gap_vs_random"] > 0)


def _references(row: pd.Series) -> str:
    """ "+6.3 over the twin's linear probe (+4.9 to +7.7, Holm p 2e-05), +2.4 vs TF-IDF + LR (…)"."""
    parts = []
    if "gap_vs_twin_probe" in row and pd.notna(row["gap_vs_twin_probe"]):
        parts.append(
            f"{points(row['gap_vs_twin_probe'])} over the twin's linear probe "
            f"({_ci(row, 'gap_vs_twin_probe_ci_low', 'gap_vs_twin_probe_ci_high')}, "
            f"Holm p {_p(row['p_vs_twin_probe_adjusted'])})"
        )
    if pd.notna(row.get("gap_vs_tfidf", np.nan)):
        parts.append(
            f"{points(row['gap_vs_tfidf'])} over TF-IDF + LR "
            f"({_ci(row, 'gap_vs_tfidf_ci_low', 'gap_vs_tfidf_ci_high')}, "
            f"Holm p {_p(row['p_vs_tfidf_registered_adjusted'])})"
        )
    return ", ".join(parts)


def _twin(row: pd.Series) -> str:
    return (
        f"{points(row['gap_vs_random'])} points over its random-init twin "
        f"(95% CI {_ci(row, 'gap_ci_low', 'gap_ci_high')}, Holm p {_p(row['p_adjusted'])})"
    )


def answer_lines(results: pd.DataFrame) -> list[str]:
    """Up to six markdown bullets from the registered rows of a study's results table; [] without them."""
    if "preregistered" not in results:
        return []
    registered = results[results["preregistered"].map(lambda value: str(value).lower() in ("true", "1", "1.0"))]
    registered = registered[registered["gap_vs_random"].notna()].set_index("method")
    if registered.empty:
        return []
    learned = registered[registered["control_ok"].map(lambda value: str(value).lower() in ("true", "1", "1.0"))]
    failed = registered.drop(learned.index)
    holds = learned[learned.apply(_holds, axis=1)]
    excludes = (learned["gap_ci_low"] > 0) | (learned["gap_ci_high"] < 0)
    leads = learned[excludes & ~learned.index.isin(holds.index)]
    undetected = learned[~excludes]
    runs = int(registered["n_pretrainings"].max()) if "n_pretrainings" in registered else 1
    unit = (
        f"the gap over pretraining runs, i.e. for another pretraining of the recipe: {runs} runs × "
        f"{int(registered['n_seeds'].max()) // runs} seeds × {int(registered['paired_items'].max()):,} test items"
        if runs > 1
        else "the gap for this one pretraining per encoder, which cannot generalise over pretraining runs"
    )
    holm = f"Holm over the {len(registered)} pre-registered comparisons, per reference"
    lines = [
        f"**What holds** ({unit}; {holm}): "
        + (
            "; ".join(f"`{method}` {_twin(row)}, {_references(row)}" for method, row in holds.iterrows())
            if len(holds)
            else "no gap over the random-init twin"
        )
        + ".",
        "**Leads, not findings** over the twin (CI above or below 0, Holm p ≥ 0.05): "
        + ("; ".join(f"`{method}` {_twin(row)}, {_references(row)}" for method, row in leads.iterrows()) or "none")
        + ".",
        f"**Not counted** (the control rule failed: an arm did not learn): {len(failed)} of {len(registered)}"
        + (
            ", the largest gap `{}` {}".format(
                failed["gap_vs_random"].idxmax(), _twin(failed.loc[failed["gap_vs_random"].idxmax()])
            )
            if len(failed)
            else ""
        )
        + ".",
        f"**No gap detected** (CI spans 0) in {len(undetected)} of the {len(learned)} comparisons whose arms learned"
        + (
            ": "
            + ", ".join(
                f"`{method}` {points(row['gap_vs_random'])} (MDE {100 * row['mde_vs_random']:.1f})"
                for method, row in undetected.iterrows()
            )
            + " points; a smaller gap may hide there"
            if len(undetected)
            else ""
        )
        + ".",
        _tfidf_line(registered),
    ]
    if runs > 1 and "between_run_sd" in registered:
        lines.append(_runs_line(registered, holds))
    return [f"- {line}" for line in lines]


def _tfidf_line(registered: pd.DataFrame) -> str:
    adjusted = registered["p_vs_tfidf_registered_adjusted"]
    above = registered[(adjusted < ALPHA) & (registered["gap_vs_tfidf"] > 0)]
    below = registered[(adjusted < ALPHA) & (registered["gap_vs_tfidf"] < 0)]
    excludes = (registered["gap_vs_tfidf_ci_low"] > 0) | (registered["gap_vs_tfidf_ci_high"] < 0)
    leads = registered[excludes & (adjusted >= ALPHA)]
    undetected = registered[~excludes & registered["gap_vs_tfidf"].notna()]
    return (
        f"**Against TF-IDF + LR** at the same labels: {len(above)} of {len(registered)} above it after Holm"
        + (f" ({', '.join(f'`{method}`' for method in above.index)})" if len(above) else "")
        + f", {len(below)} below it"
        + (
            "; leads, not findings (CI off 0, Holm p ≥ 0.05): "
            + ", ".join(
                f"`{method}` {points(row['gap_vs_tfidf'])} ({_ci(row, 'gap_vs_tfidf_ci_low', 'gap_vs_tfidf_ci_high')}, "
                f"Holm p {_p(row['p_vs_tfidf_registered_adjusted'])})"
                for method, row in leads.iterrows()
            )
            if len(leads)
            else ""
        )
        + f"; no gap detected (CI spans 0) in {len(undetected)}."
    )


def _runs_line(registered: pd.DataFrame, holds: pd.DataFrame) -> str:
    sd, upper = 100 * registered["between_run_sd"], 100 * registered[SD_UPPER_COLUMN]
    learned = registered["control_ok"].map(lambda value: str(value).lower() in ("true", "1", "1.0"))
    registered_holds = registered[(registered.get("registered_p_adjusted", np.nan) < ALPHA) & learned]
    extra = [method for method in registered_holds.index if method not in holds.index]
    return (
        f"**Between pretraining runs** the gap's SD estimates {sd.min():.1f}–{sd.max():.1f} points "
        f"({int((sd == 0).sum())} of {len(registered)} at 0; one-sided 95% upper bounds {upper.min():.1f}–"
        f"{upper.max():.1f}). Statistics {STATISTICS_VERSION.split(':')[0]}, changed after the results were seen: "
        "the run variance is floored at the seeds' own; study v3's registered test (run variance truncated at 0) "
        "is kept as a sensitivity line"
        + (f"; it would also count {', '.join(f'`{method}`' for method in extra)}" if extra else "")
        + "."
    )


def answer_section(results: pd.DataFrame) -> list[str]:
    """The report's first screen: the answer, where the table has registered comparisons."""
    lines = answer_lines(results)
    return ["", "## The answer", "", *lines] if lines else []


def rewrite_block(path: Path, lines: list[str], source: str) -> bool:
    """Replace the text between the answer markers of ``path`` with ``lines``; True if it changed.
    Raises ValueError naming the file when it has no markers."""
    text = path.read_text()
    begin = BEGIN.format(source=source)
    start, end = text.find("<!-- answer:"), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{path}: no answer markers ({begin!r} … {END!r}); add them where the answer goes")
    updated = text[:start] + begin + "\n" + "\n".join(lines) + "\n" + text[end:]
    if updated != text:
        path.write_text(updated)
    return updated != text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="rewrite the answer blocks of docs from a study's results.csv")
    parser.add_argument("results", type=Path)
    parser.add_argument("documents", type=Path, nargs="+")
    arguments = parser.parse_args(argv)
    if not arguments.results.is_file():
        raise UserError(f"{arguments.results}: no such results.csv; run make study-report first")
    lines = answer_lines(pd.read_csv(arguments.results))
    if not lines:
        print(f"error: {arguments.results}: no pre-registered comparison with a gap; nothing to write", file=sys.stderr)
        return 2
    for document in arguments.documents:
        try:
            changed = rewrite_block(document, lines, str(arguments.results))
        except ValueError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(f"  answer in {document}: {'rewritten' if changed else 'current'}")
    return 0


if __name__ == "__main__":
    run_main(main)
