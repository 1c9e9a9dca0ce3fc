"""The ``task`` tag (``harness.datasets.registry.task_tags``): on every run of a data set whose run
names carry its name — a benchmark's parent, its baselines and probes, its finetune cells — and on
none of MRPC's, whose runs keep the tags (and cell hashes) they always had."""

import os

import pytest
from mlflow.tracking import MlflowClient

from benchmarks.cell.definition import Cell
from benchmarks.engine.parent_run import open_parent
from benchmarks.tasks.cells import baseline
from harness.datasets.registry import load_pair_data, task_tags
from tests.pair_files import write_sick

MRPC_DIR = os.environ.get("MRPC_DIR", "/work/shared/data/mrpc")


@pytest.mark.skipif(not os.path.isdir(MRPC_DIR), reason="needs the MRPC files")
def test_mrpc_runs_keep_their_tags_and_mrpc_under_another_name_is_tagged():
    assert task_tags(load_pair_data(dataset="mrpc", mrpc_dir=MRPC_DIR)) == {}
    assert task_tags(load_pair_data(dataset="mrpc", mrpc_dir=MRPC_DIR, name="paraphrase")) == {"task": "mrpc"}


def test_a_benchmark_of_another_task_tags_its_parent_and_its_baselines(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    data = load_pair_data(dataset="sick-e", data_dir=str(write_sick(tmp_path / "sick", rows_per_split=9)))
    assert task_tags(data) == {"task": "sick-e"}
    parent = open_parent({"name": "tiny", "experiment": "sick-e"}, "f" * 64, data)
    run_id = baseline(Cell("majority", "baseline", 0), data, "sick-e", parent, "a" * 64, benchmark="tiny")
    client = MlflowClient(uri)  # not mlflow's process-wide URI, which an earlier test may have set
    assert client.get_run(parent).data.tags["task"] == "sick-e"
    assert client.get_run(run_id).data.tags["task"] == "sick-e"
