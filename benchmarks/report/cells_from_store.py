"""A finished benchmark read back from MLflow: one row per cell (metrics, mix weights, steps, the parent
it belongs to) and each cell's test predictions, the input of the results table and report."""

from __future__ import annotations

import tempfile

import pandas as pd
from mlflow.tracking import MlflowClient

from benchmarks.cell.definition import Cell
from benchmarks.cell.run_table import prediction_keys
from benchmarks.stats.gaps import ID_COLUMNS
from harness.datasets.task import CLASSES, Task
from harness.tracking.runs import tracking_uri

STEP_METRICS = ("train_steps", "train_epochs")  # how long each cell's fit ran (downstream.run.evaluation)


def read_predictions(path: str) -> pd.DataFrame:
    """A predictions file with ids, labels and predictions as text (label names compare as written)."""
    return pd.read_csv(path, dtype={column: str for column in (*ID_COLUMNS, "label", "pred")}, keep_default_na=False)


def cell_row(cell: dict, run_id: str, parent_run_id: str, metrics: dict, params: dict, task: Task = CLASSES) -> dict:
    """A cell's row of the per-run table: its settings (``Cell.fields()``), its task's metrics
    (``dev_acc`` … or ``dev_pearson`` …), mix weights, steps and times, the pairs its encoder read
    in pretraining and the metrics without them where the run logged them, and its parent."""
    row = {
        "run_id": run_id,
        "parent_run_id": parent_run_id,
        **{
            key: cell.get(key)
            for key in (
                "method",
                "seed",
                "encoder",
                "family",
                "transfer",
                "kind",
                "mix",
                "head",
                "train_fraction",
                "control",
                "probe_of",
                "grid_of",
                "learning_rate",
                "encoder_run",
            )
        },  # encoder_run: the pretraining run (or source)
        **({"recipe_from": cell["recipe_from"]} if cell.get("recipe_from") else {}),  # a pick's folder
        **{m: metrics.get(m) for m in task.run_metrics()},
        "encoder_layers": params.get("encoder_layers"),
        "finetune": params.get("model.finetune"),  # frozen, or how the encoder was fine-tuned
        **{f"{split}_pairs": params.get(f"{split}_pairs") for split in ("dev", "test")},
    }
    row.update({k: v for k, v in metrics.items() if k.startswith(("mix_", "time_")) or k in STEP_METRICS})
    row.update({k: v for k, v in metrics.items() if k.endswith(("_seen_pairs", "_unseen"))})  # where logged
    return row


def run_table(done: list[tuple[Cell, str]], task: Task = CLASSES) -> tuple[pd.DataFrame, dict[str, pd.DataFrame]]:
    """One row per finished cell (the task's metrics, mix weights, the parent it belongs to: this
    benchmark's, or an earlier one's for a linked cell) and its test predictions."""
    client = MlflowClient(tracking_uri())
    rows, predictions = [], {}
    with tempfile.TemporaryDirectory() as scratch:
        for cell, run_id in done:
            run = client.get_run(run_id)
            rows.append(
                cell_row(
                    cell.fields(),
                    run_id,
                    run.data.tags.get("mlflow.parentRunId", ""),
                    run.data.metrics,
                    run.data.params,
                    task,
                )
            )
            path = client.download_artifacts(run_id, "predictions/test.csv", scratch)
            predictions[run_id] = read_predictions(path)
    return pd.DataFrame(rows), predictions


def drop_unpaired_controls(runs: pd.DataFrame, predictions: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Clear the control of a method whose test predictions cover other pairs than its control's
    (baselines on the full test set against cells capped by ``--data.max_pairs``): a paired test
    needs the same items, so such a method gets no p-value rather than a crash."""

    def ids(frame: pd.DataFrame) -> set[tuple]:  # each pair's ids (MRPC: id1, id2; a TSV data set: id)
        return set(frame[[column for column in ID_COLUMNS if column in frame]].astype(str).itertuples(index=False))

    pairs = {key: ids(frame) for key, frame in predictions.items()}
    keys = prediction_keys(runs)
    run_of = {(method, seed): key for method, seed, key in zip(runs["method"], runs["seed"], keys)}
    unpaired = {
        row.method
        for row, key in zip(runs.itertuples(), keys)
        if row.control and (row.control, row.seed) in run_of and pairs[key] != pairs[run_of[(row.control, row.seed)]]
    }
    for method in sorted(unpaired):
        print(f"  note: {method} was evaluated on other test pairs than its control: no p-value")
    return runs.assign(
        control=["" if method in unpaired else control for method, control in zip(runs["method"], runs["control"])]
    )
