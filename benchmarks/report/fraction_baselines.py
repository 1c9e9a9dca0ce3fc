"""Baselines at a labelled fraction that results folders lack, fitted when the report is built.

Studies run before the suite planned ``<baseline>@<fraction>`` cells compared their 10% arms with a
TF-IDF + LR fitted on all the labels. Majority and TF-IDF + LR are cheap (seconds) and deterministic
given the seed, so the report fits them on each seed's labelled subset from the data set itself
(the folders' digest checked first), through the suite's own code (``benchmarks.tasks.baselines``).
Without the data set the report goes on without them and says so.
"""

from __future__ import annotations

import pandas as pd

from benchmarks.cell.definition import Cell
from benchmarks.cell.method_names import fraction_suffix
from benchmarks.cell.run_table import text_column, train_fractions
from benchmarks.plan.matrix import dataset_spec
from benchmarks.report.cells_from_store import cell_row
from harness.errors import UserError

REPORT_TIME = "report-time"  # the run id prefix (and parent) of a baseline fitted by the report


def missing_fraction_baselines(runs: pd.DataFrame, benchmarks: list[dict]) -> list[Cell]:
    """The baseline cells at a fraction below 1 that no folder holds: each baseline the benchmarks
    list, at each fraction and seed their other cells trained on."""
    names = list(
        dict.fromkeys(
            name for benchmark in benchmarks for name in (benchmark.get("settings") or {}).get("baselines") or []
        )
    )
    trained = runs[(train_fractions(runs) < 1) & ~text_column(runs, "kind").isin(["baseline"])]
    have = set(zip(runs["method"], runs["seed"]))
    pairs = dict.fromkeys(zip(train_fractions(trained), trained["seed"]))
    return [
        Cell(f"{name}{fraction_suffix(fraction)}", "baseline", int(seed), train_fraction=float(fraction))
        for fraction, seed in sorted(pairs)
        for name in names
        if (f"{name}{fraction_suffix(fraction)}", seed) not in have
    ]


def fit_missing(cells: list[Cell], benchmark: dict) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """Fit ``cells`` on the data set ``benchmark`` (a folder's ``benchmark.json``) names, after
    checking that its content is the one the folder's cells saw.

    Returns:
        the per-run rows (``cells_from_store.cell_row``'s columns) and ``{run_id: test predictions}``.
        Raises UserError when the data set cannot be read or is another one.
    """
    from benchmarks.tasks.baselines import fit_baseline  # sklearn and torch only when fitting
    from downstream.run.evaluation import predictions_frame, split_metrics
    from harness.datasets.registry import load_pair_data

    data = load_pair_data(**dataset_spec(benchmark.get("settings") or {}))
    if data.content_hash != benchmark["data_digest"]:
        raise UserError(
            f"the data set read ({data.name}, digest {data.content_hash[:12]}) is not the one the "
            f"results were computed on ({benchmark['data_digest'][:12]})"
        )
    rows, predictions = [], {}
    for cell in cells:
        probabilities = fit_baseline(cell.method, data, cell.train_fraction, cell.seed)
        frames = {split: predictions_frame(data, data.split(split), probabilities[split]) for split in ("dev", "test")}
        metrics = {
            name: value for split, frame in frames.items() for name, value in split_metrics(frame, split, data).items()
        }
        run_id = f"{REPORT_TIME}:{cell.method}:s{cell.seed}"
        rows.append(
            cell_row(
                cell.fields(),
                run_id,
                REPORT_TIME,
                metrics,
                {"dev_pairs": len(data.dev), "test_pairs": len(data.test)},
                data.task,
            )
        )
        predictions[run_id] = frames["test"].astype({"label": str, "pred": str})
    return pd.DataFrame(rows), predictions


def with_fraction_baselines(
    runs: pd.DataFrame, predictions: dict[str, pd.DataFrame], benchmarks: list[dict]
) -> tuple[pd.DataFrame, dict[str, pd.DataFrame], list[str]]:
    """``runs`` and ``predictions`` with the missing fraction baselines fitted and appended, and the
    report's notes on what was fitted (or why it could not be)."""
    cells = missing_fraction_baselines(runs, benchmarks)
    if not cells:
        return runs, predictions, []
    methods = ", ".join(f"`{method}`" for method in dict.fromkeys(cell.method for cell in cells))
    try:
        rows, fitted = fit_missing(cells, benchmarks[0])
    except UserError as error:
        return (
            runs,
            predictions,
            [
                f"baselines at the smaller fractions ({methods}) are not in the results folders "
                f"and could not be fitted here ({error}): below 100% of the labels the gap to "
                "TF-IDF + LR is against the one fitted on the whole train split"
            ],
        )
    note = (
        f"{len(cells)} baseline run(s) at the smaller fractions ({methods}) are not in the results folders: "
        "fitted by this report from the data set (digest checked), on each seed's labelled subset, with the "
        "suite's code (deterministic, seconds)"
    )
    return pd.concat([runs, rows], ignore_index=True), {**predictions, **fitted}, [note]
