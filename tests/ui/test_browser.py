"""What a user sees in the MLflow 3.17 UI, in a real browser (Debian's headless Chromium through
Selenium): ``mlflow ui`` on a free local port over a fresh store filled by the smoke pipeline
(pretrain → finetune pretrained and random → a three-cell benchmark), opened through the links
the commands printed, and through the links of ``make ui`` on a port of its own. Screenshots land
in ``tests/ui/screenshots/`` (git-ignored)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from harness.server.tracking_server import stop_process_group, wait_healthy
from harness.tracking import ui_address
from harness.tracking.links import summary_lines, ui_base
from harness.tracking.views import COMPARE_VIEW, COMPARED_METRICS
from tests.ui.stores import SCREENSHOTS, Server, free_port, link, pipeline

pytestmark = pytest.mark.slow
WAIT = 60  # seconds for a page to render on a busy 2-core machine (a hang guard, not a measurement)


@pytest.fixture(scope="module")
def store(tmp_path_factory, mrpc_dir) -> dict:
    """The smoke pipeline on a fresh SQLite store, its printed links aimed at the UI served here."""
    directory = tmp_path_factory.mktemp("ui-store")
    uri, port = f"sqlite:///{directory / 'mlflow.db'}", free_port()
    outputs = pipeline(uri, mrpc_dir, directory, ui=f"http://127.0.0.1:{port}")
    server = Server(["ui", "--backend-store-uri", uri], port, directory / "ui.log")
    yield {**outputs, "uri": uri, "url": server.url}
    server.stop()


def page_text(driver) -> str:
    return driver.find_element(By.TAG_NAME, "body").text


def open_and_wait(driver, url: str, *texts: str) -> str:
    """Open ``url`` and wait until every one of ``texts`` is on the page; returns the page text."""
    driver.get(url)
    try:
        WebDriverWait(driver, WAIT).until(lambda d: all(text in page_text(d) for text in texts))
    except TimeoutException:
        missing = [text for text in texts if text not in page_text(driver)]
        driver.save_screenshot(str(SCREENSHOTS / "failed.png"))
        pytest.fail(f"{url}: never showed {missing}; page: {page_text(driver)[:1500]!r}")
    return page_text(driver)


def screenshot(driver, name: str) -> None:
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    print(f"screenshot: {path}")


def test_the_printed_link_opens_the_runs_table_with_test_acc_method_and_encoder(store, chromium):
    """One click from the finetune summary: the runs table (not the GenAI overview), with the
    test_acc column and the method and encoder tags of both the pretrained run and its twin."""
    pretrain_id = store["ids"]["pretrain"]
    client = MlflowClient(store["uri"])
    runs = {name: client.get_run(store["ids"][f"finetune-{name}"]) for name in ("latest", "random")}
    url = link(store["finetune-random"], "runs")
    assert url.startswith(store["url"]) and "workflowType=machine_learning" in url
    text = open_and_wait(
        chromium, url, "test_acc", "method", "encoder", runs["latest"].info.run_name, runs["random"].info.run_name
    )
    for run in runs.values():
        assert run.data.tags["method"] in text and run.data.tags["encoder"] in text
        assert f"{run.data.metrics['test_acc']:.4f}"[:5] in text  # the value, as the column shows it
    assert f"elmo-2x32-{pretrain_id[:8]}" in text and f"random-elmo-2x32-{pretrain_id[:8]}" in text
    assert "Traces 0" not in text  # not the GenAI overview an experiment opens on by default
    screenshot(chromium, "runs-table")


def test_the_benchmark_view_shows_each_methods_results_without_expanding(store, chromium):
    """One row group per method, open, with its cells' test and dev accuracy and F1: no parent row to
    expand, no row of dashes."""
    parent = link(store["benchmark"], "parent").split("/runs/")[1].split("?")[0]
    client = MlflowClient(store["uri"])
    children = client.search_runs([client.get_run(parent).info.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    assert len(children) == 3  # two finetune cells and the majority baseline
    names = [child.info.run_name for child in children]
    text = open_and_wait(
        chromium,
        link(store["benchmark"], "runs"),
        "test_acc",
        "test_f1",
        "dev_acc",
        "dev_f1",
        *names,
        *[f"Group: {child.data.tags['method']}"[:18] for child in children],
    )
    for child in children:
        assert f"{child.data.metrics['test_acc']:.4f}"[:5] in text and child.data.tags["benchmark"] == "tiny"
    screenshot(chromium, "benchmark-by-method")


def test_a_finetune_run_page_lists_its_figures_and_predictions(store, chromium):
    run_page = link(store["finetune-latest"], "run page")
    open_and_wait(chromium, run_page, "elmo-smoke·scalar·pool-mlp·s0", "test_acc")
    artifacts = run_page.replace("?", "/artifacts?")
    open_and_wait(chromium, artifacts, "figures", "predictions", "images")
    for folder, files in (
        ("predictions", ("test.csv", "test.json", "dev.csv")),
        ("figures", ("confusion_matrix.png", "mix_weights.png")),
    ):
        chromium.find_element(By.XPATH, f"//*[normalize-space(text())='{folder}']").click()
        WebDriverWait(chromium, WAIT).until(lambda d, names=files: all(name in page_text(d) for name in names))
    chromium.find_element(By.XPATH, "//*[normalize-space(text())='test.json']").click()  # the table preview
    WebDriverWait(chromium, WAIT).until(lambda d: "sentence1" in page_text(d) and "sentence2" in page_text(d))
    screenshot(chromium, "run-artifacts")


def test_the_compare_links_open_on_the_metrics_of_the_run_and_its_twin(store, chromium):
    """The finetune's and the benchmark's compare links: bar charts of test and dev accuracy and F1
    for the two runs, not a parallel-coordinates plot of checkpoint digests."""
    methods = [
        MlflowClient(store["uri"]).get_run(store["ids"][f"finetune-{name}"]).data.tags["method"]
        for name in ("latest", "random")
    ]
    # The two ran at once: the one that finished second found its twin finished and prints the link.
    second = next(
        store[f"finetune-{name}"] for name in ("random", "latest") if "  compare" in store[f"finetune-{name}"]
    )
    for name, summary in (("compare", second), ("benchmark-compare", store["benchmark"])):
        url = link(summary, "compare")
        assert url.startswith(store["url"]) and "compareRunsMode=CHART" in url
        text = open_and_wait(chromium, url, "Model metrics", *COMPARED_METRICS, *methods)
        assert "Parallel Coordinates" not in text and "checkpoint_sha256" not in text
        assert "train_loss" not in text  # the other metrics' charts are hidden
        screenshot(chromium, name)


def test_make_ui_links_follow_its_port(store, chromium, monkeypatch):
    """``make ui PORT=…`` (``python -m harness.tracking.ui``) on another port: its own links and those later
    summaries print lead there, without MLFLOW_UI_URL."""
    port = free_port()
    monkeypatch.delenv("MLFLOW_UI_URL", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["uri"])
    env = {key: value for key, value in os.environ.items() if key != "MLFLOW_UI_URL"}
    process = subprocess.Popen(
        [sys.executable, "-m", "harness.tracking.ui", "--port", str(port)],
        env=env,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_healthy(url, process)
        client = MlflowClient(store["uri"])
        run = client.get_run(store["ids"]["finetune-latest"])
        lines = summary_lines(run.info.experiment_id, run.info.run_id, COMPARE_VIEW)
        assert ui_base() == url and all(url + "/#/" in line for line in lines[:2]), lines
        open_and_wait(chromium, lines[1].split()[1], "test_acc", run.info.run_name)
        screenshot(chromium, "make-ui-port")
    finally:
        stop_process_group(process, grace=5)
        printed = process.stdout.read()
        ui_address.record_path(store["uri"]).unlink(missing_ok=True)
    assert f"{url}/#/experiments/" in printed, printed[-2000:]
