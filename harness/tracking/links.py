"""Deep links into the MLflow 3.17 UI, printed by every command's summary and by ``make ui``
(:mod:`harness.tracking.ui`).

URL formats, as the UI's own router builds them (checked in headless Chromium):
- runs table: ``<ui>/#/experiments/<id>/runs?workflowType=machine_learning`` (without the
  parameter an experiment opens on its GenAI overview); ``&viewStateShareKey=<key>`` applies a
  saved view (columns, sort, filter, grouping: :mod:`harness.tracking.views`);
- a run: ``<ui>/#/experiments/<id>/runs/<run id>[/<tab>]?workflowType=machine_learning``;
- compare: the runs table in its chart view, ``…/runs?workflowType=machine_learning&viewStateShareKey=
  <key>&compareRunsMode=CHART``, with a saved view of just those runs opening on bar charts of test
  and dev accuracy and F1 (:func:`harness.tracking.views.compare_view`); where the view cannot be saved (a
  user who may only read), the compare page ``<ui>/#/compare-runs?runs=["<id>",...]&experiments=
  ["<id>",...]`` (URL-encoded, with the same ``workflowType``), which opens on a parallel-coordinates
  plot of the first differing params.

``<ui>``: ``$MLFLOW_UI_URL``; else the tracking server itself when ``MLFLOW_TRACKING_URI`` is
http(s); else the address ``make ui HOST=… PORT=…`` last served the local store on
(:mod:`harness.tracking.ui_address`); else ``http://127.0.0.1:5000``, ``make ui``'s default.
"""

from __future__ import annotations

import harness.tracking.mlflow_defaults  # noqa: F401 - first: MLflow's settings precede its import

# isort: split

import json
import os
import socket
from urllib.parse import quote, urlencode, urlparse

from mlflow.exceptions import MlflowException
from mlflow.tracking import MlflowClient

from harness.tracking.runs import tracking_uri
from harness.tracking.ui_address import DEFAULT_HOST, DEFAULT_PORT, link_address, recorded_address
from harness.tracking.views import COMPARE_VIEW, VIEW_PREFIX, compare_view

LOCAL_UI = link_address(DEFAULT_HOST, DEFAULT_PORT)
WORKFLOW = {"workflowType": "machine_learning"}  # the "Model training" view: the runs table


def ui_base(uri: str | None = None) -> str:
    """The address of the UI that shows the runs of tracking URI ``uri``."""
    configured = os.environ.get("MLFLOW_UI_URL", "").strip()
    if configured:
        return configured.rstrip("/")
    uri = uri or tracking_uri()
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/")
    return recorded_address(uri) or LOCAL_UI


def serve_command(base: str) -> str:
    """The ``make ui`` command that serves the local store at ``base`` (its HOST and PORT when
    they are not the defaults)."""
    parsed = urlparse(base)
    host, port = parsed.hostname or DEFAULT_HOST, parsed.port or DEFAULT_PORT
    return (
        "make ui"
        + (f" HOST={host}" if host != DEFAULT_HOST else "")
        + (f" PORT={port}" if port != DEFAULT_PORT else "")
    )


def ui_answers(base: str, timeout: float = 0.5) -> bool:
    """Whether anything accepts a connection at ``base``'s host and port now (a UI started there)."""
    parsed = urlparse(base)
    try:
        with socket.create_connection((parsed.hostname or DEFAULT_HOST, parsed.port or DEFAULT_PORT), timeout):
            return True
    except OSError:
        return False


def serve_hint(base: str) -> str:
    """The line under a local store's links: whether the UI at ``base`` is up, else how to start it
    there (and that a UI on another port makes later links follow it)."""
    if ui_answers(base):
        return f"(the UI at {base} serves them)"
    return (
        f"(no UI answers at {base} now: start it with `{serve_command(base)}`; on another port, later links follow it)"
    )


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
    return (
        f"{base or ui_base()}/#/compare-runs?runs={encoded(run_ids)}&experiments={encoded(experiments)}"
        f"&{urlencode(WORKFLOW)}"
    )


def metrics_compare_link(client: MlflowClient, experiment_id: str, run_ids: list[str], base: str | None = None) -> str:
    """The runs ``run_ids`` side by side on their test and dev accuracy and F1 (the chart view of
    a saved view of them); the plain compare page where the view cannot be saved."""
    try:
        view = compare_view(client, experiment_id, run_ids)
    except MlflowException:  # a user who may read but not edit the experiment
        return compare_link(run_ids, [experiment_id], base)
    return experiment_link(experiment_id, view, base) + "&compareRunsMode=CHART"


def summary_lines(
    experiment_id: str,
    run_id: str,
    view: str | None = None,
    compare: list[str] | None = None,
    compare_label: str = "twin",
) -> list[str]:
    """The ``UI`` lines of a command's one-screen summary: the run, the runs table (in ``view``)
    and, with ``compare`` (run ids), their metrics side by side (saving the view that shows them).
    A local store adds how to start its UI."""
    lines = [
        f"  {'run page':<10} {run_link(experiment_id, run_id)}",
        f"  {'runs':<10} {experiment_link(experiment_id, view)}",
    ]
    if compare and len(compare) > 1:
        link = metrics_compare_link(MlflowClient(tracking_uri()), experiment_id, compare)
        lines.append(f"  {'compare':<10} {link}  (with its {compare_label})")
    return lines + serve_lines()


def serve_lines() -> list[str]:
    """Under a local store's links, whether its UI is up or how to start it (:func:`serve_hint`);
    nothing for a tracking server or an explicit ``MLFLOW_UI_URL``."""
    if tracking_uri().startswith(("http://", "https://")) or os.environ.get("MLFLOW_UI_URL"):
        return []
    return [f"  {'':<10} {serve_hint(ui_base())}"]


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
