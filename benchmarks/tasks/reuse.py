"""Which finished run a suite may reuse for a cell (found again by its settings hash): never one
of two copies that disagree on a result number, which no start time may settle."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from harness.errors import UserError
from harness.tracking.runs import ensure_experiment, tracking_uri

RESULT_METRICS = ("dev_acc", "dev_f1", "test_acc", "test_f1")  # what copies of one cell must agree on
COPIES_LIMIT = 100


def result_numbers(metrics: dict) -> dict:
    """The metrics two copies of a cell must share (accuracy and F1 on dev and test)."""
    return {key: float(metrics[key]) for key in RESULT_METRICS if key in metrics}


def conflicting(runs: list) -> bool:
    """Whether ``runs`` (copies of one cell) disagree on any result number."""
    return len({tuple(sorted(result_numbers(run.data.metrics).items())) for run in runs}) > 1


def finished_run(experiment: str, cell_hash: str, parent_run_id: str | None = None) -> str | None:
    """The newest FINISHED run of ``experiment`` tagged with ``cell_hash``: among the children of
    ``parent_run_id`` first (a resumed benchmark), else anywhere in the experiment (a cell another
    benchmark already ran with the same settings, data and code: the caller links it). Copies with
    other numbers are one line, never a choice."""
    client = MlflowClient(tracking_uri())
    experiment_id = ensure_experiment(experiment)
    query = f"tags.cell_hash = '{cell_hash}' and attributes.status = 'FINISHED'"
    scopes = [f" and tags.mlflow.parentRunId = '{parent_run_id}'", ""] if parent_run_id else [""]
    for scope in scopes:
        runs = client.search_runs([experiment_id], query + scope, order_by=["attributes.start_time DESC"],
                                  max_results=COPIES_LIMIT)
        if runs and conflicting(runs):
            numbers = ", ".join(f"{run.info.run_id} (test_acc {run.data.metrics.get('test_acc', float('nan')):.4f})"
                                for run in runs)
            raise UserError(f"cell {cell_hash}: experiment '{experiment}' holds copies with other numbers: {numbers}; "
                            f"not reused, none is chosen: `python -m benchmarks duplicates` names them, delete the "
                            f"wrong one")
        if runs:
            return runs[0].info.run_id
    return None
