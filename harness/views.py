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
- ``benchmark-<name>``: one benchmark's parent and children.
"""

from __future__ import annotations

import json
import time

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

VIEW_PREFIX = "mlflow.sharedViewState."
DESCRIPTION_TAG = "mlflow.note.content"
COMPARE_VIEW = "compare"
GROUPED_VIEW = "by-method"

COLUMNS = {
    "pretrain": ["tags.`family`", "tags.`lm_stage`", "metrics.`best_val_ppl`", "metrics.`best_val_ppl_word`",
                 "metrics.`train_seconds`", "tags.`seed`", "tags.`benchmark`", "attributes.`Duration`"],
    "finetune": ["metrics.`test_acc`", "metrics.`dev_acc`", "tags.`method`", "tags.`encoder`", "tags.`seed`",
                 "tags.`benchmark`"],
}
DESCRIPTIONS = {
    "pretrain": ("Language-model pretraining runs (tag `stage=pretrain`), one per family, size and corpus. "
                 "Compare `best_val_ppl` (the best checkpoint's held-out perplexity per token of its own "
                 "tokenizer) within a tokenizer, `best_val_ppl_word` across tokenizers. Each run holds "
                 "`checkpoint/encoder.ckpt`; registered as `<family>-encoder` in the model registry."),
    "finetune": ("Transfer runs (tag `stage=finetune`): an encoder's features under a pair classifier, "
                 "each pretrained encoder beside its random-init twin (`encoder` tag `random-…`). "
                 "`test_acc`/`test_f1` on the test split, `dev_acc` on dev (the epoch selected). "
                 "Benchmarks are parent runs (`stage=benchmark`) with their cells nested below; "
                 "baselines are `stage=baseline`. Group by `method` and `encoder` to average seeds."),
}


def kind_of(experiment_name: str) -> str:
    """``pretrain`` for the pretraining experiment, else ``finetune`` (transfer and benchmarks)."""
    return "pretrain" if experiment_name == "pretrain" else "finetune"


def view_state(columns: list[str], search_filter: str = "", group_by: list[str] | None = None) -> dict:
    """The runs-table state a saved view restores (keys of the UI's search facets and view state)."""
    state = {"searchFilter": search_filter, "orderByKey": "attributes.start_time", "orderByAsc": False,
             "selectedColumns": columns, "groupBy": None}
    if group_by:
        state["groupBy"] = {"aggregateFunction": "average",
                            "groupByKeys": [{"mode": "tag", "groupByData": tag} for tag in group_by]}
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
    set_experiment_tag(client, experiment_id, tag, json.dumps(
        {"name": name, "createdAt": now, "updatedAt": now, "state": json.dumps(state)}))


def set_experiment_tag(client: MlflowClient, experiment_id: str, key: str, value: str) -> None:
    """``set_experiment_tag``, safe against another process writing the same new tag at the same
    moment: a SQL store inserts a new tag, so the second of two concurrent first writes fails on
    the primary key; written again, the tag exists and is updated."""
    try:
        client.set_experiment_tag(experiment_id, key, value)
    except MlflowException:
        client.set_experiment_tag(experiment_id, key, value)


def prepare_experiment(client: MlflowClient, experiment_id: str, experiment_name: str) -> None:
    """Give the experiment its description (unless it has one) and its saved views; hide MLflow's
    empty ``Default`` experiment."""
    kind = kind_of(experiment_name)
    experiment = client.get_experiment(experiment_id)
    if not experiment.tags.get(DESCRIPTION_TAG):
        set_experiment_tag(client, experiment_id, DESCRIPTION_TAG, DESCRIPTIONS[kind])
    save_view(client, experiment_id, COMPARE_VIEW, "Compare runs", view_state(COLUMNS[kind]))
    if kind == "finetune":
        save_view(client, experiment_id, GROUPED_VIEW, "By method and encoder",
                  view_state(COLUMNS[kind], group_by=["method", "encoder"]))
    hide_empty_default(client)


def benchmark_view(client: MlflowClient, experiment_id: str, benchmark: str) -> str:
    """The saved view of one benchmark's runs (its parent, cells and baselines); returns its key."""
    key = f"benchmark-{benchmark}"
    save_view(client, experiment_id, key, f"Benchmark {benchmark}",
              view_state(COLUMNS["finetune"], search_filter=f"tags.benchmark = '{benchmark}'"))
    return key


def hide_empty_default(client: MlflowClient) -> None:
    """MLflow creates experiment 0, ``Default``, with every new store (its SQL store does so on
    first connection, the server too). The harness never logs there: delete it while it is empty,
    so the experiment list holds only the harness's experiments. A Default with runs stays."""
    try:
        default = client.get_experiment("0")
    except Exception:  # noqa: BLE001 - a store without experiment 0
        return
    if (default.name == "Default" and default.lifecycle_stage == "active"
            and not client.search_runs(["0"], max_results=1)):
        try:
            client.delete_experiment("0")
        except MlflowException:  # another process deleted it first
            pass
