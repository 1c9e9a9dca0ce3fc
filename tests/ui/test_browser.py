"""What a user sees in the MLflow 3.17 UI, in a real browser (Debian's headless Chromium through
Selenium): ``mlflow ui`` on a free local port over a fresh store filled by the smoke pipeline
(pretrain → finetune pretrained and random → a three-cell benchmark), opened through the links
the commands printed. Screenshots land in ``tests/ui/screenshots/`` (git-ignored)."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient
from selenium.common.exceptions import TimeoutException
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

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
    text = open_and_wait(chromium, url, "test_acc", "method", "encoder", runs["latest"].info.run_name,
                         runs["random"].info.run_name)
    for run in runs.values():
        assert run.data.tags["method"] in text and run.data.tags["encoder"] in text
        assert f"{run.data.metrics['test_acc']:.4f}"[:5] in text  # the value, as the column shows it
    assert f"elmo-2x32-{pretrain_id[:8]}" in text and f"random-elmo-2x32-{pretrain_id[:8]}" in text
    assert "Traces 0" not in text  # not the GenAI overview an experiment opens on by default
    screenshot(chromium, "runs-table")


def test_benchmark_children_nest_under_their_parent(store, chromium):
    parent = link(store["benchmark"], "parent").split("/runs/")[1].split("?")[0]
    client = MlflowClient(store["uri"])
    children = client.search_runs([client.get_run(parent).info.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")
    assert len(children) == 3  # two finetune cells and the majority baseline
    open_and_wait(chromium, link(store["benchmark"], "runs"), "tiny·benchmark", "test_acc")

    def rows() -> set[str]:
        return {row.get_attribute("row-id") for row in chromium.find_elements(By.CSS_SELECTOR, "[role='row'][row-id]")}

    assert parent in rows() and not {child.info.run_id for child in children} & rows()  # collapsed under it
    row = chromium.find_element(By.CSS_SELECTOR, f"[role='row'][row-id='{parent}']")
    row.find_element(By.TAG_NAME, "button").click()  # the parent's expander
    WebDriverWait(chromium, WAIT).until(lambda d: {child.info.run_id for child in children} <= rows())
    text = page_text(chromium)
    for child in children:
        assert child.info.run_name in text and child.data.tags["benchmark"] == "tiny"
    screenshot(chromium, "benchmark-nested")


def test_a_finetune_run_page_lists_its_figures_and_predictions(store, chromium):
    run_page = link(store["finetune-latest"], "run page")
    open_and_wait(chromium, run_page, "elmo·scalar·pool-mlp·s0", "test_acc")
    artifacts = run_page.replace("?", "/artifacts?")
    open_and_wait(chromium, artifacts, "figures", "predictions", "images")
    for folder, files in (("predictions", ("test.csv", "test.json", "dev.csv")),
                          ("figures", ("confusion_matrix.png", "mix_weights.png"))):
        chromium.find_element(By.XPATH, f"//*[normalize-space(text())='{folder}']").click()
        WebDriverWait(chromium, WAIT).until(lambda d, names=files: all(name in page_text(d) for name in names))
    chromium.find_element(By.XPATH, "//*[normalize-space(text())='test.json']").click()  # the table preview
    WebDriverWait(chromium, WAIT).until(lambda d: "sentence1" in page_text(d) and "sentence2" in page_text(d))
    screenshot(chromium, "run-artifacts")


def test_the_compare_link_shows_the_pretrained_run_beside_its_twin(store, chromium):
    names = [MlflowClient(store["uri"]).get_run(store["ids"][f"finetune-{name}"]).info.run_name
             for name in ("latest", "random")]
    # The two ran at once: the one that finished second found its twin finished and prints the link.
    second = next(store[f"finetune-{name}"] for name in ("random", "latest") if "  compare" in store[f"finetune-{name}"])
    text = open_and_wait(chromium, link(second, "compare"), "Comparing 2 Runs", *names)
    assert "model.encoder" in text  # the param that differs: the resolved encoder
    screenshot(chromium, "compare")
