"""Deep links into the MLflow 3.17 UI, printed by every command's summary and by ``make ui``.

URL formats, as the UI's own router builds them (checked in headless Chromium):
- runs table: ``<ui>/#/experiments/<id>/runs?workflowType=machine_learning`` (without the
  parameter an experiment opens on its GenAI overview); ``&viewStateShareKey=<key>`` applies a
  saved view (columns, sort, filter, grouping: :mod:`harness.views`);
- a run: ``<ui>/#/experiments/<id>/runs/<run id>[/<tab>]?workflowType=machine_learning``;
- compare: ``<ui>/#/compare-runs?runs=["<id>",...]&experiments=["<id>",...]`` (URL-encoded), and
  the same ``workflowType``, which keeps the side bar on "Model training".

``<ui>``: ``$MLFLOW_UI_URL``; else the tracking server itself when ``MLFLOW_TRACKING_URI`` is
http(s); else ``http://127.0.0.1:5000``, where ``make ui`` serves a local store.
"""

from __future__ import annotations

import harness.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

import json
import os
import sys
from urllib.parse import quote, urlencode

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from harness.store import auth_denial, check_uri
from harness.tracking import tracking_uri
from harness.views import COMPARE_VIEW, VIEW_PREFIX

LOCAL_UI = "http://127.0.0.1:5000"
WORKFLOW = {"workflowType": "machine_learning"}  # the "Model training" view: the runs table


def ui_base(uri: str | None = None) -> str:
    """The address of the UI that shows the runs of tracking URI ``uri``."""
    configured = os.environ.get("MLFLOW_UI_URL", "").strip()
    if configured:
        return configured.rstrip("/")
    uri = uri or tracking_uri()
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/")
    return LOCAL_UI


def experiment_link(experiment_id: str, view: str | None = None, base: str | None = None) -> str:
    """The experiment's runs table, in the saved view ``view`` when given."""
    query = {**WORKFLOW, **({"viewStateShareKey": view} if view else {})}
    return f"{base or ui_base()}/#/experiments/{experiment_id}/runs?{urlencode(query)}"


def run_link(experiment_id: str, run_id: str, base: str | None = None, tab: str = "") -> str:
    """The run's page (``tab``: ``artifacts``, ``model-metrics``, … or its overview)."""
    path = f"{experiment_id}/runs/{run_id}" + (f"/{tab}" if tab else "")
    return f"{base or ui_base()}/#/experiments/{path}?{urlencode(WORKFLOW)}"


def compare_link(run_ids: list[str], experiment_ids: list[str], base: str | None = None) -> str:
    """The compare page of ``run_ids`` (params, metrics, charts side by side)."""
    def encoded(values: list[str]) -> str:
        return quote(json.dumps([str(value) for value in values], separators=(",", ":")), safe="")
    experiments = list(dict.fromkeys(experiment_ids))
    return (f"{base or ui_base()}/#/compare-runs?runs={encoded(run_ids)}&experiments={encoded(experiments)}"
            f"&{urlencode(WORKFLOW)}")


def summary_lines(experiment_id: str, run_id: str, view: str | None = None,
                  compare: list[str] | None = None, compare_label: str = "twin") -> list[str]:
    """The ``UI`` lines of a command's one-screen summary: the run, the runs table (in ``view``)
    and, with ``compare`` (run ids), the compare page. A local store adds how to start its UI."""
    lines = [f"  {'run page':<10} {run_link(experiment_id, run_id)}",
             f"  {'runs':<10} {experiment_link(experiment_id, view)}"]
    if compare and len(compare) > 1:
        lines.append(f"  {'compare':<10} {compare_link(compare, [experiment_id])}  (with its {compare_label})")
    if not tracking_uri().startswith(("http://", "https://")) and not os.environ.get("MLFLOW_UI_URL"):
        lines.append(f"  {'':<10} (serve them with `make ui`)")
    return lines


def store_links(uri: str | None = None, base: str | None = None) -> list[str]:
    """One line per active experiment of the store: its name and its runs-table link."""
    client = MlflowClient(uri or tracking_uri())
    lines = []
    for experiment in client.search_experiments(order_by=["name ASC"]):
        if experiment.name == "Default" and not client.search_runs([experiment.experiment_id], max_results=1):
            continue
        view = COMPARE_VIEW if VIEW_PREFIX + COMPARE_VIEW in experiment.tags else None
        lines.append(f"  {experiment.name:<12} {experiment_link(experiment.experiment_id, view, base)}")
    return lines


def main() -> int:
    """``python -m harness.links [UI address]``: the experiments of the store, as links (``make ui``).
    A server that is down or refuses this client is one line, exit 2."""
    base = sys.argv[1].rstrip("/") if len(sys.argv) > 1 else None
    try:
        check_uri(tracking_uri())
        lines = store_links(base=base)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except MlflowException as error:
        denied = auth_denial(error)
        if not denied:
            raise
        print(f"error: {denied}", file=sys.stderr)
        return 2
    print(f"MLflow UI for {tracking_uri()}:")
    print("\n".join(lines) if lines else "  (no experiments yet: run `make pretrain` or `make finetune`)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
