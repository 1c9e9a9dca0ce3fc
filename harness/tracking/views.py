"""What an experiment shows when a user opens it: a description, and saved views of the runs
table with the columns a user compares.

MLflow 3.17 opens a runs table with Dataset / Source / Models columns and no metric. A saved
view (an experiment tag ``mlflow.sharedViewState.<key>`` holding ``{name, createdAt, updatedAt,
state}``, the format of the UI's own "Save as new view") picks columns, sort, filter and
grouping; the link ``…/runs?workflowType=machine_learning&viewStateShareKey=<key>`` opens it.
The UI ignores a view when the link has its own filter parameters, so a benchmark gets a view of
its own (filter ``tags.benchmark = '<name>'``) instead of a filtered link.

Views written here:
- ``compare``: the experiment's runs with its metrics and the ``method``/``encoder``/``seed`` tags,
  benchmark children nested under their parent;
- ``by-method``: the same, grouped by ``method`` and ``encoder`` (mean per group), so runs of
  different encoders never share a group;
- ``benchmark-<name>``: one benchmark's cells and baselines, grouped by ``method``, so each method's
  mean shows without expanding a row (the UI adds their parent, whose metrics are per-method
  summaries, under "Additional runs" instead of nesting the cells collapsed below it);
- ``compare-<digest>``: a few runs (a method and its twin) in the chart view, opening on bar charts
  of their task's test and dev metrics (accuracy and F1, Pearson and Spearman; the UI's compare
  page opens on a parallel-coordinates plot of the first differing params, which here are
  checkpoint digests).

A transfer experiment's metric columns are its task's (``harness.datasets.task``): the task of the
data set it is named after, or a benchmark's own.
"""

from __future__ import annotations

import hashlib
import json
import time

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.datasets.task import CLASSES, EVALUATION_SPLITS, Task

VIEW_PREFIX = "mlflow.sharedViewState."
DESCRIPTION_TAG = "mlflow.note.content"
COMPARE_VIEW = "compare"
GROUPED_VIEW = "by-method"


RUN_TAG_COLUMNS = ["tags.`method`", "tags.`encoder`", "tags.`seed`", "tags.`benchmark`"]
COLUMNS = {
    "pretrain": [
        "tags.`family`",
        "tags.`lm_stage`",
        "metrics.`best_val_ppl`",
        "metrics.`best_val_ppl_word`",
        "metrics.`train_seconds`",
        "tags.`seed`",
        "tags.`benchmark`",
        "attributes.`Duration`",
    ],
}


def compared_metrics(task: Task = CLASSES) -> list[str]:
    """The task's run metrics, test first (``test_acc, test_f1, dev_acc, dev_f1``; a graded task's
    ``test_pearson`` …): the metric columns of a runs table and the charts a compare view opens on."""
    return task.run_metrics(tuple(reversed(EVALUATION_SPLITS)))


def columns_of(kind: str, task: Task = CLASSES) -> list[str]:
    """The runs-table columns of an experiment of ``kind``; a transfer experiment's show its task's metrics."""
    if kind in COLUMNS:
        return COLUMNS[kind]
    return [f"metrics.`{metric}`" for metric in compared_metrics(task)] + RUN_TAG_COLUMNS


COMPARED_METRICS = tuple(compared_metrics())  # a task of classes' (MRPC's): test and dev accuracy and F1
PARENT_TAG = "mlflow.parentRunId"
MODEL_METRICS = "Model metrics"  # the UI's section of metrics without a ``system/`` prefix
DESCRIPTIONS = {
    "pretrain": (
        "Language-model pretraining runs (tag `stage=pretrain`), one per family, size and corpus. "
        "Compare `best_val_ppl` (the best checkpoint's held-out perplexity per token of its own "
        "tokenizer) within a tokenizer, `best_val_ppl_word` across tokenizers. Each run holds "
        "`checkpoint/encoder.ckpt`; registered as `<family>-encoder` in the model registry."
    ),
    "finetune": (
        "Transfer runs (tag `stage=finetune`): an encoder's features under a pair classifier, "
        "each pretrained encoder beside its random-init twin (`encoder` tag `random-…`). "
        "{test_metrics} on the test split, `{monitor}` on dev (the epoch selected). "
        "Benchmarks are parent runs (`stage=benchmark`) with their cells nested below; "
        "baselines are `stage=baseline`. Group by `method` and `encoder` to average seeds."
    ),
}


def description_of(kind: str, task: Task = CLASSES) -> str:
    """An experiment's description; a transfer experiment's names its task's metrics."""
    test_metrics = "/".join(f"`{metric}`" for metric in task.run_metrics(("test",)))
    return DESCRIPTIONS[kind].replace("{test_metrics}", test_metrics).replace("{monitor}", task.monitor)


def kind_of(experiment_name: str) -> str:
    """``pretrain`` for the pretraining experiment, else ``finetune`` (transfer and benchmarks)."""
    return "pretrain" if experiment_name == "pretrain" else "finetune"


def view_state(columns: list[str], search_filter: str = "", group_by: list[str] | None = None) -> dict:
    """The runs-table state a saved view restores (keys of the UI's search facets and view state)."""
    state = {
        "searchFilter": search_filter,
        "orderByKey": "attributes.start_time",
        "orderByAsc": False,
        "selectedColumns": columns,
        "groupBy": None,
    }
    if group_by:
        state["groupBy"] = {
            "aggregateFunction": "average",
            "groupByKeys": [{"mode": "tag", "groupByData": tag} for tag in group_by],
        }
    return state


def save_view(client: MlflowClient, experiment_id: str, key: str, name: str, state: dict) -> None:
    """Write the saved view ``key`` unless it already holds ``state`` (a view edited in the UI
    under another key is the user's and is never touched)."""
    tag = VIEW_PREFIX + key
    current = client.get_experiment(experiment_id).tags.get(tag)
    if current:
        try:
            envelope = json.loads(current)
            if envelope.get("name") == name and json.loads(envelope.get("state", "{}")) == state:
                return
        except (ValueError, AttributeError):
            pass
    now = int(time.time() * 1000)
    set_experiment_tag(
        client,
        experiment_id,
        tag,
        json.dumps({"name": name, "createdAt": now, "updatedAt": now, "state": json.dumps(state)}),
    )


def set_experiment_tag(client: MlflowClient, experiment_id: str, key: str, value: str) -> None:
    """``set_experiment_tag``, safe against another process writing the same new tag at the same
    moment: a SQL store inserts a new tag, so the second of two concurrent first writes fails on
    the primary key; written again, the tag exists and is updated."""
    try:
        client.set_experiment_tag(experiment_id, key, value)
    except MlflowException:
        client.set_experiment_tag(experiment_id, key, value)


def experiment_task(experiment_name: str) -> Task:
    """The task of the data set an experiment is named after (runs go to the experiment of their
    data set's name: ``sick-r``, ``stsb``); a task of classes for any other name."""
    from harness.datasets.registry import DATASETS  # the readers load only where an experiment is prepared

    entry = DATASETS.get(experiment_name)
    return entry.task if entry else CLASSES


def prepare_experiment(client: MlflowClient, experiment_id: str, experiment_name: str) -> None:
    """Give the experiment its description (unless it has one) and its saved views, whose metric
    columns are its task's; hide MLflow's empty ``Default`` experiment."""
    kind = kind_of(experiment_name)
    task = experiment_task(experiment_name)
    columns = columns_of(kind, task)
    experiment = client.get_experiment(experiment_id)
    if not experiment.tags.get(DESCRIPTION_TAG):
        set_experiment_tag(client, experiment_id, DESCRIPTION_TAG, description_of(kind, task))
    save_view(client, experiment_id, COMPARE_VIEW, "Compare runs", view_state(columns))
    if kind == "finetune":
        save_view(
            client,
            experiment_id,
            GROUPED_VIEW,
            "By method and encoder",
            view_state(columns, group_by=["method", "encoder"]),
        )
    hide_empty_default(client)


def benchmark_view(client: MlflowClient, experiment_id: str, benchmark: str, task: Task = CLASSES) -> str:
    """The saved view of one benchmark's cells and baselines, a group per method (the UI adds the
    parent, under "Additional runs"), with its task's metrics as columns; returns its key."""
    key = f"benchmark-{benchmark}"
    cells = f"tags.benchmark = '{benchmark}' and tags.stage != 'benchmark'"
    save_view(
        client,
        experiment_id,
        key,
        f"Benchmark {benchmark}",
        view_state(columns_of("finetune", task), search_filter=cells, group_by=["method"]),
    )
    return key


def logged_task_metrics(logged: set[str]) -> list[str]:
    """The metrics a compare view charts: those of the task whose run metrics the runs logged (a
    registered data set's; runs of one comparison share one), else a task of classes'."""
    from harness.datasets.registry import DATASETS

    for task in dict.fromkeys(entry.task for entry in DATASETS.values()):
        if set(compared_metrics(task)) <= logged:
            return compared_metrics(task)
    return compared_metrics()


def _bar_chart(metric: str, shown: bool) -> dict:
    """A bar chart of ``metric`` in the UI's chart view (its "BAR" card); ``shown=False`` marks a
    metric's chart deleted, so the UI does not add one of its own."""
    return {
        "uuid": f"chart-{metric}",
        "type": "BAR",
        "deleted": not shown,
        "isGenerated": False,
        "metricSectionId": "metrics",
        "metricKey": metric,
        "displayName": metric,
    }


def compare_view(client: MlflowClient, experiment_id: str, run_ids: list[str]) -> str:
    """The saved view of ``run_ids`` alone, its charts their task's test and dev metrics (every
    other metric of the runs hidden); returns its key (``compare-<digest of the run ids>``)."""
    key = "compare-" + hashlib.sha256(",".join(sorted(run_ids)).encode()).hexdigest()[:12]
    runs = [client.get_run(run_id) for run_id in run_ids]
    parents = {run.data.tags[PARENT_TAG] for run in runs if run.data.tags.get(PARENT_TAG)}
    runs += [client.get_run(parent) for parent in parents]  # the UI shows a child's parent beside it
    logged = {metric for run in runs for metric in run.data.metrics}
    compared = logged_task_metrics(logged)
    charts = [_bar_chart(metric, True) for metric in compared]
    charts += [_bar_chart(metric, False) for metric in sorted(logged - set(compared))]
    listed = ", ".join(f"'{run_id}'" for run_id in run_ids)
    # Grouped by method: a benchmark cell's parent, which the UI adds to the rows, then cannot hold its
    # children collapsed under it; it lands in "Additional runs", its own metrics' charts hidden.
    columns = [f"metrics.`{metric}`" for metric in compared] + RUN_TAG_COLUMNS
    state = view_state(columns, search_filter=f"attributes.run_id IN ({listed})", group_by=["method"])
    state.update(
        compareRunCharts=charts,
        compareRunSections=[{"uuid": "metrics", "name": MODEL_METRICS, "display": True, "isReordered": True}],
    )
    save_view(client, experiment_id, key, f"Compare {len(run_ids)} runs", state)
    return key


def hide_empty_default(client: MlflowClient) -> None:
    """MLflow creates experiment 0, ``Default``, with every new store (its SQL store does so on
    first connection, the server too). The harness never logs there: delete it while it is empty,
    so the experiment list holds only the harness's experiments. A Default with runs stays."""
    try:
        default = client.get_experiment("0")
    except Exception:  # noqa: BLE001 - a store without experiment 0
        return
    if (
        default.name == "Default"
        and default.lifecycle_stage == "active"
        and not client.search_runs(["0"], max_results=1)
    ):
        try:
            client.delete_experiment("0")
        except MlflowException:  # another process deleted it first
            pass
