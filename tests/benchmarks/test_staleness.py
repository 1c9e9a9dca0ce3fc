"""Results cannot go stale: a cell's hash covers settings, data and code, and a benchmark reuses
its own children first and only links, never silently adopts, another benchmark's cell."""

import pytest
from mlflow.tracking import MlflowClient

from benchmarks import cells
from benchmarks.cells import file_digests, finished_run, settings_hash
from harness import versioning
from harness.tracking import ensure_experiment


@pytest.fixture
def store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    return MlflowClient(uri)


def finished(client, experiment_id, tags):
    run = client.create_run(experiment_id, tags=tags)
    client.set_terminated(run.info.run_id, "FINISHED")
    return run.info.run_id


def test_the_cell_hash_changes_with_the_code_version(monkeypatch):
    spec = {"kind": "pretrained", "seed": 0, "data": "abc"}
    before = settings_hash(spec)
    monkeypatch.setattr(cells, "source_version", lambda: "other code")
    assert settings_hash(spec) != before
    assert settings_hash({**spec, "data": "abd"}) != settings_hash(spec)


def test_code_version_is_a_content_hash_of_the_sources(tmp_path, monkeypatch):
    for package in versioning.SOURCE_PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "module.py").write_text("x = 1\n")
    monkeypatch.setattr(versioning, "REPO_ROOT", tmp_path)
    versioning.source_version.cache_clear()
    first = versioning.source_version()
    versioning.source_version.cache_clear()
    assert versioning.source_version() == first  # same content, same version
    (tmp_path / "pretrain" / "module.py").write_text("x = 2\n")  # an uncommitted edit counts
    versioning.source_version.cache_clear()
    assert versioning.source_version() != first
    (tmp_path / "README.md").write_text("docs only\n")  # a change that computes nothing does not
    second = versioning.source_version()
    versioning.source_version.cache_clear()
    assert versioning.source_version() == second
    versioning.source_version.cache_clear()


def test_corpus_files_named_by_arguments_enter_the_hash(tmp_path):
    corpus = tmp_path / "text.txt"
    corpus.write_text("one sentence\n")
    first = file_digests([f"--data.extra_corpus=[{corpus}]", "--trainer.max_epochs=3"])
    corpus.write_text("an edited sentence\n")
    assert list(first) == [str(corpus)] and file_digests([f"--data.extra_corpus=[{corpus}]"]) != first


@pytest.mark.slow
def test_a_benchmark_reuses_its_own_child_before_another_benchmarks(store):
    experiment_id = ensure_experiment("mrpc")
    other = finished(store, experiment_id, {"cell_hash": "h1", "mlflow.parentRunId": "parent-a"})
    own = finished(store, experiment_id, {"cell_hash": "h1", "mlflow.parentRunId": "parent-b"})
    newer_other = finished(store, experiment_id, {"cell_hash": "h1", "mlflow.parentRunId": "parent-a"})
    assert finished_run("mrpc", "h1", "parent-b") == own
    assert finished_run("mrpc", "h1", "parent-c") == newer_other  # found elsewhere: the caller links it
    assert finished_run("mrpc", "h2", "parent-b") is None
    assert other != newer_other
