"""A benchmark report from results folders alone (``make report RESULTS="<folders>" OUT=<folder>``):
the suite's ``results.csv``, ``runs.csv``, ``report.md`` and figures, with no tracking store and
no training. Folders from several machines merge by cell hash (``benchmarks.results_files.folder``)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from benchmarks.plan.lr_selection import lr_grid_table, select_learning_rates
from benchmarks.plan.matrix import load_config
from benchmarks.plan.recipe_picks import selection_settings
from benchmarks.report.cells_from_store import drop_unpaired_controls
from benchmarks.report.fraction_baselines import with_fraction_baselines
from benchmarks.report.outputs import write_outputs
from benchmarks.report.references_section import console_summary
from benchmarks.report.results_table import build_results
from benchmarks.results_files.data_release import release_note
from benchmarks.results_files.folder import ResultSet
from benchmarks.results_files.plan_check import check_plan, incomplete_notes, mark_incomplete
from benchmarks.results_files.recipe_folders import recipe_table
from benchmarks.results_files.seal_chain import seal_lines
from benchmarks.stats.preregistration import adjust_registered, registered_comparisons
from harness.errors import UserError


def report_name(benchmarks: list[dict]) -> str:
    """The benchmarks' name; chunks of one study (``<study>-<chunk>``) read ``<study> (a + b)``."""
    names = list(dict.fromkeys(benchmark["benchmark"] for benchmark in benchmarks))
    if len(names) == 1:
        return names[0]
    stem = os.path.commonprefix(names).rpartition("-")[0]
    if stem:
        return f"{stem} ({' + '.join(name[len(stem) + 1 :] for name in names)})"
    return " + ".join(names)


def build_report(
    folders: list[Path], out: Path, name: str | None = None, registered: list[Path] = (), incomplete: bool = False
) -> tuple[pd.DataFrame, list[Path]]:
    """Write the report of the cells in ``folders`` to ``out``; returns the results table and the written
    paths. Baselines at a smaller fraction that the folders lack are fitted from the data set
    (``benchmarks.report.fraction_baselines``). The pre-registered family is the union of the
    folders' ``comparisons:`` and those of the ``registered`` matrix configs (a study's chunks not
    run yet count, with p = 1)."""
    declared = [load_config(Path(path)).source for path in registered]  # a bad config stops before any work
    results_set = ResultSet(folders, name_twins_by_encoder=True)
    if not results_set.ordered:
        raise UserError(f"{', '.join(map(str, folders))}: no cells to report")
    missing = check_plan(
        results_set.benchmarks, results_set.folder_cells, registered, results_set.twins_by_encoder, incomplete
    )
    runs, predictions = results_set.runs_and_predictions()
    runs, predictions, fitted = with_fraction_baselines(runs, predictions, results_set.benchmarks)
    task = results_set.task
    grid = lr_grid_table(runs, task)
    runs = drop_unpaired_controls(select_learning_rates(runs, task), predictions)
    family_names = registered_comparisons(
        [benchmark.get("settings") for benchmark in results_set.benchmarks] + declared
    )
    results, family = adjust_registered(build_results(runs, predictions, task), family_names)
    results = mark_incomplete(results, runs, missing)
    first = results_set.benchmarks[0]
    settings = (
        first.get("settings")
        if len(results_set.benchmarks) == 1
        else {benchmark["folder"]: benchmark.get("settings") for benchmark in results_set.benchmarks}
    )
    context = {
        "name": name or report_name(results_set.benchmarks),
        "parent_run_id": ", ".join(str(benchmark.get("parent_run_id", "—")) for benchmark in results_set.benchmarks),
        "wall_seconds": None,
        "settings": settings,
        "encoders": results_set.encoders(),
        "dataset": first["dataset"],
        "task": task,
        "labels": first.get("labels"),
        "positive_label": first.get("positive_label"),
        "lr_grid": grid,
        "recipes": recipe_table(
            selection_settings(results_set.benchmarks, registered), results_set.twins_by_encoder, task
        ),
        "throughput": None,
        "family": family,
        "sources": [benchmark["folder"] for benchmark in results_set.benchmarks],
        "seals": seal_lines([benchmark["folder"] for benchmark in results_set.benchmarks], results_set.cell_commits),
    }
    context["notes"] = release_note(first) + incomplete_notes(missing) + results_set.notes + fitted
    for note in context["notes"]:
        print(f"  note: {note}")
    written = write_outputs(Path(out), results, runs, context)
    for line in console_summary(results, family, task):
        print(line)
    return results, written
