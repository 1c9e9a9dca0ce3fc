"""What the MLflow UI is given: run names, encoder labels, the params kept, deep links and saved
views (fast: a throw-away SQLite store, no browser; the browser test is tests/ui/test_browser.py)."""

import json
import socket
from urllib.parse import parse_qs, unquote, urlparse

import pandas as pd
import pytest
from mlflow.tracking import MlflowClient

from benchmarks.report.parent_view import report_sections, summary_metrics, twin_pairs
from harness.tracking import links, ui, ui_address
from harness.tracking.links import compare_link, experiment_link, run_link, summary_lines, ui_base
from harness.tracking.naming import encoder_label, finetune_run_name, metric_key, pretrain_run_name, twin_label
from harness.tracking.params import comparable_params
from harness.tracking.runs import ensure_experiment
from harness.tracking.views import COMPARED_METRICS, DESCRIPTION_TAG, VIEW_PREFIX, benchmark_view


def test_run_names_start_with_what_differs_and_fit_the_column():
    names = [
        finetune_run_name(kind, mode, mix, "pool-mlp", 1.0, 0)
        for kind in ("elmo", "random")
        for mode, mix in (("frozen", "scalar"), ("frozen", "layer:1"), ("gradual", "scalar"))
    ]
    assert names[0] == "elmo·scalar·pool-mlp·s0" and names[5] == "random·gradual·scalar·pool-mlp·s0"
    assert len({name[:14] for name in names}) == len(names)  # distinct within the ~14 characters shown
    assert finetune_run_name("elmo", "frozen", "scalar", "pool-mlp", 0.1, 3) == "elmo·scalar·pool-mlp@0.1·s3"
    assert finetune_run_name("gpt", "full", None, "cls", 1.0, 1) == "gpt·full·cls·s1"  # no mix with GPT's head
    config = {"num_layers": 2, "hidden_size": 256}
    assert pretrain_run_name("elmo", config, "adaptive", "mrpc", False, 0) == "elmo·2x256·adaptive·mrpc·s0"
    assert (
        pretrain_run_name("ulmfit", {"num_layers": 3, "embedding_size": 400}, None, "text", True, 1)
        == "ulmfit·3x400·text·task·s1"
    )


def test_encoder_labels_tell_encoders_apart_and_pair_twins():
    run = "3f9a2c1d0e8b4c5aa1b2c3d4e5f60718"
    pretrained = encoder_label("elmo", {"num_layers": 2, "hidden_size": 256}, run)
    assert pretrained == "elmo-2x256-3f9a2c1d"
    assert encoder_label("elmo", {"num_layers": 2, "hidden_size": 64}, run) != pretrained  # other size
    assert encoder_label("elmo", {"num_layers": 2, "hidden_size": 256}, "0" * 32) != pretrained  # other run
    random = encoder_label("elmo", {"num_layers": 2, "hidden_size": 256}, run, random=True)
    assert random == "random-elmo-2x256-3f9a2c1d"
    assert twin_label(pretrained) == random and twin_label(random) == pretrained
    assert encoder_label("gpt", {"num_layers": 4, "hidden_size": 8}, None) == "gpt-4x8-file"


def test_params_keep_what_a_user_compares():
    flat = {
        "model.hidden_size": 256,
        "model.layer_norm": False,
        "model.random_like": None,
        "data.corpus": "mrpc",
        "data.extra_corpus": [],
        "tags": {},
        "run_name": None,
        "experiment_name": "mrpc",
        "data.cache_dir": "/x",
        "trainer.max_epochs": 20,
        "trainer.max_steps": -1,
        "trainer.barebones": False,
        "trainer.accumulate_grad_batches": 4,
        "trainer.precision": "bf16-mixed",
        "trainer.devices": "auto",
        "trainer.enable_progress_bar": False,
        "trainer.deterministic": True,
        "encoder_random_seed": None,
        "train_pairs": 3668,
    }
    assert comparable_params(flat) == {
        "model.hidden_size": 256,
        "model.layer_norm": False,
        "data.corpus": "mrpc",
        "trainer.max_epochs": 20,
        "trainer.accumulate_grad_batches": 4,
        "trainer.precision": "bf16-mixed",
        "trainer.deterministic": True,
        "train_pairs": 3668,
    }


def test_links_have_the_ui_formats(monkeypatch):
    monkeypatch.setattr(links, "ui_answers", lambda base: False)  # whatever this machine serves on 5000
    monkeypatch.delenv("MLFLOW_UI_URL", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:////tmp/nowhere/mlflow.db")
    assert ui_base() == "http://127.0.0.1:5000"
    assert experiment_link("3", "compare") == (
        "http://127.0.0.1:5000/#/experiments/3/runs?workflowType=machine_learning&viewStateShareKey=compare"
    )
    assert run_link("3", "abc") == "http://127.0.0.1:5000/#/experiments/3/runs/abc?workflowType=machine_learning"
    fragment = urlparse(compare_link(["a", "b"], ["3", "3"])).fragment
    path, _, query = fragment.partition("?")
    values = parse_qs(query)
    assert path == "/compare-runs" and json.loads(unquote(values["runs"][0])) == ["a", "b"]
    assert json.loads(values["experiments"][0]) == ["3"]
    lines = summary_lines("3", "abc", "compare")
    assert [line.split()[0] for line in lines] == ["run", "runs", "(no"] and "`make ui`" in lines[-1]
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://team-host:5001/")
    assert ui_base() == "http://team-host:5001" and "make ui" not in "\n".join(summary_lines("3", "abc"))
    monkeypatch.setenv("MLFLOW_UI_URL", "https://mlflow.example.org/")
    assert run_link("1", "r").startswith("https://mlflow.example.org/#/experiments/1/runs/r")


@pytest.mark.slow
def test_experiments_get_a_description_and_saved_views_and_default_goes(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(uri)
    assert client.get_experiment("0").name == "Default"  # MLflow makes it with every new store
    finetune, pretrain = ensure_experiment("mrpc"), ensure_experiment("pretrain")
    assert client.get_experiment("0").lifecycle_stage == "deleted"
    tags = client.get_experiment(finetune).tags
    assert "test_acc" in tags[DESCRIPTION_TAG] and "random" in tags[DESCRIPTION_TAG]
    compare = json.loads(tags[VIEW_PREFIX + "compare"])
    state = json.loads(compare["state"])
    assert {"metrics.`test_acc`", "tags.`method`", "tags.`encoder`"} <= set(state["selectedColumns"])
    assert state["groupBy"] is None  # benchmark children stay nested under their parent
    grouped = json.loads(json.loads(tags[VIEW_PREFIX + "by-method"])["state"])["groupBy"]
    assert [key["groupByData"] for key in grouped["groupByKeys"]] == ["method", "encoder"]
    pretrain_state = json.loads(json.loads(client.get_experiment(pretrain).tags[VIEW_PREFIX + "compare"])["state"])
    assert "metrics.`best_val_ppl`" in pretrain_state["selectedColumns"]
    client.set_experiment_tag(finetune, DESCRIPTION_TAG, "ours")  # a description edited in the UI stays
    ensure_experiment("mrpc")
    assert client.get_experiment(finetune).tags[DESCRIPTION_TAG] == "ours"
    key = benchmark_view(client, finetune, "quick")
    view = json.loads(json.loads(client.get_experiment(finetune).tags[VIEW_PREFIX + key])["state"])
    assert view["searchFilter"] == "tags.benchmark = 'quick' and tags.stage != 'benchmark'"  # cells, not the parent
    assert [key["groupByData"] for key in view["groupBy"]["groupByKeys"]] == ["method"]  # a row per method


def test_a_default_experiment_with_runs_stays(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(uri)
    client.create_run("0")
    ensure_experiment("mrpc")
    assert client.get_experiment("0").lifecycle_stage == "active"


def test_parent_summary_metrics_description_and_twin_pairs():
    results = pd.DataFrame(
        {
            "method": ["elmo-scalar-pool-mlp@0.1", "random(elmo)-top-pool-mlp", "majority"],
            "test_acc_mean": [0.70, 0.66, 0.665],
            "test_acc_std": [0.01, float("nan"), 0.0],
            "gap_vs_random": [0.04, float("nan"), float("nan")],
            "n_seeds": [2, 2, 1],
        }
    )
    metrics = summary_metrics(results)
    assert metrics["elmo-scalar-pool-mlp_0.1/test_acc_mean"] == 0.70
    assert metrics["elmo-scalar-pool-mlp_0.1/gap_vs_random"] == 0.04
    assert "random_elmo_-top-pool-mlp/test_acc_std" not in metrics  # NaN is left out
    assert metric_key("elmo-layer:1-pool-mlp") == "elmo-layer:1-pool-mlp"  # colons are fine in MLflow keys
    report = (
        "# Benchmark report: quick\n\n- date: x\n\n## Results\n\n| a |\n\n## Remarks\n\n- r\n\n## How to read\n\n- h\n"
    )
    assert report_sections(report) == "# Benchmark report: quick\n\n## Results\n\n| a |\n\n## Remarks\n\n- r\n"
    runs = pd.DataFrame(
        {
            "run_id": ["p1", "r1", "p0", "r0", "b"],
            "method": ["m", "rm", "m", "rm", "majority"],
            "seed": [1, 1, 0, 0, 0],
            "control": ["rm", "", "rm", "", "rm"],
            "kind": ["pretrained", "random", "pretrained", "random", "baseline"],
        }
    )
    assert twin_pairs(runs) == [("m", "p0", "r0")]  # the first seed both have; no "majority vs its twin"


@pytest.mark.parametrize("name", ["elmo-scalar-pool-mlp@0.1", "random(elmo)-x", "a b/c:d"])
def test_metric_keys_are_accepted_by_mlflow(tmp_path, name):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.create_run("0")
    client.log_metric(run.info.run_id, f"{metric_key(name)}/test_acc_mean", 0.5)
    assert client.get_run(run.info.run_id).data.metrics == {f"{metric_key(name)}/test_acc_mean": 0.5}


@pytest.mark.slow
def test_the_parent_logs_holm_and_the_gap_vs_tfidf_as_metrics_mlflow_accepts(tmp_path):
    results = pd.DataFrame(
        {
            "method": ["gpt-attn@0.1", "tfidf-lr"],
            "p_value_vs_random": [0.01, float("nan")],
            "p_adjusted": [0.04, float("nan")],
            "gap_vs_tfidf": [0.03, float("nan")],
            "gap_vs_tfidf_ci_low": [-0.01, float("nan")],
            "gap_vs_tfidf_ci_high": [0.07, float("nan")],
            "p_vs_tfidf": [0.12, float("nan")],
        }
    )
    metrics = summary_metrics(results)
    assert metrics == {
        "gpt-attn_0.1/p_value_vs_random": 0.01,
        "gpt-attn_0.1/p_adjusted": 0.04,
        "gpt-attn_0.1/gap_vs_tfidf": 0.03,
        "gpt-attn_0.1/gap_vs_tfidf_ci_low": -0.01,
        "gpt-attn_0.1/gap_vs_tfidf_ci_high": 0.07,
        "gpt-attn_0.1/p_vs_tfidf": 0.12,
    }
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.create_run("0").info.run_id
    for key, value in metrics.items():
        client.log_metric(run, key, value)
    assert client.get_run(run).data.metrics == metrics


def test_a_view_written_by_two_processes_at_once_is_written_again(tmp_path):
    """Two cells creating the same experiment on a server: the second first write of a new tag
    fails on the SQL primary key (seen on PostgreSQL); the view is then written as an update."""
    from mlflow.exceptions import MlflowException

    from harness.tracking.views import save_view

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment_id = client.create_experiment("raced")
    calls = []
    real = client.set_experiment_tag

    def first_write_loses_the_race(*args):
        calls.append(args)
        if len(calls) == 1:
            real(*args)  # the other process's write lands first …
            raise MlflowException("duplicate key value violates unique constraint")  # … and ours fails
        real(*args)

    client.set_experiment_tag = first_write_loses_the_race
    save_view(client, experiment_id, "compare", "Compare runs", {"searchFilter": ""})
    assert len(calls) == 2
    assert json.loads(client.get_experiment(experiment_id).tags[VIEW_PREFIX + "compare"])["name"] == "Compare runs"


@pytest.fixture
def records(tmp_path, monkeypatch):
    """A fresh SQLite store and a place for UI address records, no MLFLOW_UI_URL."""
    monkeypatch.setattr(ui_address, "RECORDS", tmp_path / "records")
    monkeypatch.delenv("MLFLOW_UI_URL", raising=False)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return uri


def test_links_follow_the_host_and_port_make_ui_serves_the_store_on(records, monkeypatch, capsys):
    assert ui_base() == "http://127.0.0.1:5000"  # never served: make ui's default
    experiment = ensure_experiment("mrpc")
    started = []
    monkeypatch.setattr(ui.os, "execve", lambda path, command, env: started.append((command, env)))
    assert ui.main(["--host", "0.0.0.0", "--port", "5061"]) == 0
    ((command, env),) = started
    assert command[command.index("--port") + 1] == "5061" and command[command.index("--host") + 1] == "0.0.0.0"
    assert command[command.index("--backend-store-uri") + 1] == records
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "false"
    printed = capsys.readouterr().out
    assert f"http://127.0.0.1:5061/#/experiments/{experiment}/runs?" in printed  # every interface: loopback here
    assert ui_base() == "http://127.0.0.1:5061"  # what later commands link to
    lines = summary_lines(experiment, "abc", "compare")
    assert all("http://127.0.0.1:5061/#/" in line for line in lines[:2]) and "`make ui PORT=5061`" in lines[-1]
    ui_address.record_address(records, ui_address.link_address("::1", 5062))
    assert ui_base() == "http://[::1]:5062" and "`make ui HOST=::1 PORT=5062`" in summary_lines("1", "r")[-1]
    monkeypatch.setenv("MLFLOW_UI_URL", "https://mlflow.example.org")  # an explicit address wins
    assert ui_base() == "https://mlflow.example.org"


def test_the_line_under_the_links_says_whether_a_ui_answers_where_they_point(records):
    with socket.socket() as listener:  # a UI started with make ui PORT=<port>
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        ui_address.record_address(records, ui_address.link_address("127.0.0.1", port))
        served = summary_lines("1", "r")
    stopped = summary_lines("1", "r")
    assert all(line.split()[-1].startswith(f"http://127.0.0.1:{port}/#/") for line in served[:2])
    assert served[-1].strip() == f"(the UI at http://127.0.0.1:{port} serves them)"
    assert (
        stopped[-1]
        .strip()
        .startswith(f"(no UI answers at http://127.0.0.1:{port} now: start it with `make ui PORT={port}`;")
    )


def test_a_compare_link_opens_the_runs_metrics_in_the_chart_view(records):
    client = MlflowClient(records)
    experiment = ensure_experiment("mrpc")
    parent = client.create_run(experiment, tags={"stage": "benchmark"}).info.run_id
    client.log_metric(parent, "elmo/test_acc_mean", 0.7)
    runs = []
    for method, accuracy in (("elmo-scalar-pool-mlp", 0.72), ("random-scalar-pool-mlp", 0.68)):
        run = client.create_run(experiment, tags={"method": method, "mlflow.parentRunId": parent}).info.run_id
        for metric, value in {
            "test_acc": accuracy,
            "test_f1": 0.8,
            "dev_acc": 0.7,
            "dev_f1": 0.81,
            "train_loss": 0.5,
            "mix_weight_0": 0.3,
        }.items():
            client.log_metric(run, metric, value)
        runs.append(run)
    lines = summary_lines(experiment, runs[0], "compare", compare=runs)
    link = next(line for line in lines if line.split()[0] == "compare").split()[1]
    path, _, query = urlparse(link).fragment.partition("?")
    values = {key: value[0] for key, value in parse_qs(query).items()}
    assert path == f"/experiments/{experiment}/runs" and values["compareRunsMode"] == "CHART"
    envelope = json.loads(client.get_experiment(experiment).tags[VIEW_PREFIX + values["viewStateShareKey"]])
    state = json.loads(envelope["state"])
    assert state["searchFilter"] == f"attributes.run_id IN ('{runs[0]}', '{runs[1]}')"
    shown = [chart["metricKey"] for chart in state["compareRunCharts"] if not chart["deleted"]]
    hidden = {chart["metricKey"] for chart in state["compareRunCharts"] if chart["deleted"]}
    assert shown == list(COMPARED_METRICS) and hidden == {"train_loss", "mix_weight_0", "elmo/test_acc_mean"}
    assert {chart["type"] for chart in state["compareRunCharts"]} == {"BAR"}
    assert [key["groupByData"] for key in state["groupBy"]["groupByKeys"]] == ["method"]


def test_the_runs_table_shows_the_task_of_the_experiments_data_set(records, monkeypatch):
    """MRPC's columns stay its accuracy and F1; a graded data set's experiment, benchmark view and
    compare view show Pearson and Spearman instead."""
    from harness.datasets import registry
    from harness.datasets.entry import DataSet
    from harness.datasets.task import graded
    from harness.tracking.views import columns_of

    assert columns_of("finetune")[:4] == [
        "metrics.`test_acc`",
        "metrics.`test_f1`",
        "metrics.`dev_acc`",
        "metrics.`dev_f1`",
    ]
    toy = DataSet(name="toy-graded", load=None, default_name=lambda spec: "toy-graded", task=graded(0, 5))
    monkeypatch.setitem(registry.DATASETS, toy.name, toy)
    client = MlflowClient(records)
    experiment = ensure_experiment("toy-graded")
    graded_metrics = ["test_pearson", "test_spearman", "dev_pearson", "dev_spearman"]

    def metric_columns(key: str) -> list[str]:
        state = json.loads(json.loads(client.get_experiment(experiment).tags[VIEW_PREFIX + key])["state"])
        return [column for column in state["selectedColumns"] if column.startswith("metrics.")]

    assert metric_columns("compare") == metric_columns("by-method") == [f"metrics.`{m}`" for m in graded_metrics]
    description = client.get_experiment(experiment).tags[DESCRIPTION_TAG]
    assert "`test_pearson`/`test_spearman` on the test split, `dev_pearson` on dev" in description
    assert metric_columns(benchmark_view(client, experiment, "tiny", toy.task)) == metric_columns("compare")
    runs = []
    for method in ("elmo-scalar-pool-mlp", "random-scalar-pool-mlp"):
        run = client.create_run(experiment, tags={"method": method}).info.run_id
        for metric in (*graded_metrics, "train_loss"):
            client.log_metric(run, metric, 0.5)
        runs.append(run)
    lines = summary_lines(experiment, runs[0], "compare", compare=runs)
    link = next(line for line in lines if line.split()[0] == "compare").split()[1]
    key = parse_qs(urlparse(link).fragment.partition("?")[2])["viewStateShareKey"][0]
    state = json.loads(json.loads(client.get_experiment(experiment).tags[VIEW_PREFIX + key])["state"])
    assert [chart["metricKey"] for chart in state["compareRunCharts"] if not chart["deleted"]] == graded_metrics
