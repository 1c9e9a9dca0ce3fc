"""The benchmark's parent run as the UI shows it: per-method summary metrics, the gap to the
random twin, a description holding the report's results and remarks, where it came from, and a
saved view of its runs.

Metric keys are ``<method>/<statistic>`` (characters MLflow refuses in a key become ``_``:
``elmo-scalar-pool-mlp_0.1/test_acc_mean`` for ``…@0.1``), so the parent's metrics sort by method.
``results.csv`` and ``report.md`` stay the benchmark's record; these are views of them.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd
from mlflow.entities import Metric
from mlflow.tracking import MlflowClient
from mlflow.utils.validation import MAX_TAG_VAL_LENGTH

from benchmarks.report.results_table import CHECK_KINDS
from benchmarks.stats.results_columns import COLUMNS
from harness.datasets.task import CLASSES, Task
from harness.tracking.links import experiment_link, metrics_compare_link, run_link
from harness.tracking.naming import metric_key
from harness.tracking.views import DESCRIPTION_TAG, benchmark_view

DESCRIPTION_SECTIONS = ("Results", "Remarks")


def summary_metrics(results: pd.DataFrame) -> dict[str, float]:
    """``{<method>/<column>: value}`` for every finite value of the results columns declared ``summary``
    (fractions; p-values as they are); a column the table lacks is skipped."""
    metrics = {}
    summary = [column.name for column in COLUMNS if column.summary]
    for row in results.itertuples(index=False):
        for column in summary:
            value = getattr(row, column, None)
            if value is not None and pd.notna(value) and math.isfinite(float(value)):
                metrics[f"{metric_key(row.method)}/{column}"] = float(value)
    return metrics


def report_sections(report: str, names: tuple[str, ...] = DESCRIPTION_SECTIONS) -> str:
    """The title line and the ``## <name>`` sections of a report, in the report's order."""
    chunks = re.split(r"(?m)^(?=## )", report)
    title = chunks[0].strip().splitlines()[0] if chunks and chunks[0].strip() else ""
    kept = [chunk.strip() for chunk in chunks[1:] if chunk.split("\n", 1)[0].removeprefix("## ").strip() in names]
    return "\n\n".join([title, *kept]).strip() + "\n"


def note_text(description: str, limit: int = MAX_TAG_VAL_LENGTH) -> str:
    """The parent's description (a tag MLflow cuts at ``limit`` characters): the whole of it when
    it fits, else its whole paragraphs that fit, then where the whole report is (``report.md``,
    an artifact of the run) — never a paragraph cut in two."""
    if len(description) <= limit:
        return description
    rest = (
        f"\n\n… the rest ({len(description):,} characters in all, over the {limit:,} a description holds) "
        "is in the whole report: `report.md` among this run's artifacts.\n"
    )
    kept: list[str] = []
    for paragraph in description.split("\n\n"):
        if len("\n\n".join([*kept, paragraph])) + len(rest) > limit:
            break
        kept.append(paragraph)
    return "\n\n".join(kept) + rest


def describe_parent(
    client: MlflowClient,
    parent: str,
    name: str,
    results: pd.DataFrame,
    report_path: Path,
    config_path: Path,
    task: Task = CLASSES,
) -> str:
    """Log the summary metrics, the description and the source tags on ``parent``; save the
    benchmark's view (its task's metrics as columns). Returns the view key."""
    timestamp = client.get_run(parent).info.start_time
    metrics = [Metric(key, value, timestamp, 0) for key, value in summary_metrics(results).items()]
    for start in range(0, len(metrics), 500):
        client.log_batch(parent, metrics=metrics[start : start + 500])
    description = report_sections(report_path.read_text(encoding="utf-8"))
    client.set_tag(parent, DESCRIPTION_TAG, note_text(description))
    client.set_tag(parent, "mlflow.source.name", f"python -m benchmarks.suite --config {config_path}")
    client.set_tag(parent, "mlflow.source.type", "LOCAL")
    experiment_id = client.get_run(parent).info.experiment_id
    return benchmark_view(client, experiment_id, name, task)


def twin_pairs(runs: pd.DataFrame) -> list[tuple[str, str, str]]:
    """``(method, run, twin run)`` of each method with a random twin, at the first seed both have.
    Baselines and probes have none (``CHECK_KINDS``; runs of older benchmarks named a random method
    as a baseline's control, which the results ignore too)."""
    by_key = {(method, seed): run_id for method, seed, run_id in zip(runs["method"], runs["seed"], runs["run_id"])}
    pairs = []
    learned = ~runs["kind"].isin(CHECK_KINDS) if "kind" in runs else True
    for method, group in runs[(runs["control"].fillna("") != "") & learned].groupby("method", sort=False):
        control = group["control"].iloc[0]
        for seed in sorted(group["seed"]):
            if (control, seed) in by_key:
                pairs.append((method, by_key[(method, seed)], by_key[(control, seed)]))
                break
    return pairs


def link_lines(client: MlflowClient, parent: str, view: str, runs: pd.DataFrame) -> list[str]:
    """The benchmark summary's links: its runs (the benchmark's view, a row group per method), its
    parent run, and per method its metrics beside its random twin's (``metrics_compare_link``)."""
    experiment_id = client.get_run(parent).info.experiment_id
    lines = [f"  runs       {experiment_link(experiment_id, view)}", f"  parent     {run_link(experiment_id, parent)}"]
    for method, run_id, twin in twin_pairs(runs):
        link = metrics_compare_link(client, experiment_id, [run_id, twin])
        lines.append(f"  compare    {method} vs its random twin: {link}")
    return lines
