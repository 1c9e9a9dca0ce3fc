"""Long text reaches MLflow whole: a benchmark's description holds whole paragraphs and names the
report artifact, a long param or tag is an artifact the value names; MLflow never cuts one (it
keeps 6,000 characters of a param and 8,000 of a tag, with only a warning in the log)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
from mlflow.tracking import MlflowClient
from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH, MAX_TAG_VAL_LENGTH

from benchmarks.report import parent_view
from harness.tracking.params import log_params
from harness.tracking.views import DESCRIPTION_TAG


@pytest.fixture
def run(tmp_path):
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run_id = client.create_run(client.create_experiment("long")).info.run_id
    return client, run_id


def long_report(paragraphs: int = 120) -> str:
    body = "\n\n".join(f"Paragraph {k}: " + "the gap and its interval, in words. " * 3 for k in range(paragraphs))
    return f"# Benchmark 'long'\n\n## Results\n\n{body}\n"


def test_a_long_report_is_never_cut_in_the_description(run, tmp_path, monkeypatch, caplog):
    client, run_id = run
    report = tmp_path / "report.md"
    report.write_text(long_report())
    monkeypatch.setattr(parent_view, "benchmark_view", lambda *args: "view")
    with caplog.at_level(logging.WARNING):
        parent_view.describe_parent(client, run_id, "long", parent_view.pd.DataFrame(), report, Path("c.yaml"))
    note = client.get_run(run_id).data.tags[DESCRIPTION_TAG]
    assert not [record for record in caplog.records if "truncated" in record.getMessage()]
    assert len(note) <= MAX_TAG_VAL_LENGTH and note.endswith("`report.md` among this run's artifacts.\n")
    kept = note.rsplit("\n\n", 1)[0]
    assert kept.split("\n\n") == report.read_text().split("\n\n")[: len(kept.split("\n\n"))]  # whole paragraphs
    short = long_report(3)
    assert parent_view.note_text(short) == short


def test_a_long_param_is_an_artifact_the_param_names(run, caplog):
    client, run_id = run
    corpus = ",".join(f"/data/corpora/file-{k:05d}.txt" for k in range(400))  # ~11,000 characters
    assert len(corpus) > MAX_PARAM_VAL_LENGTH
    logger = SimpleNamespace(experiment=client, run_id=run_id)
    with caplog.at_level(logging.WARNING):
        log_params(logger, {"data": {"corpus": corpus, "batch_size": 32}})
    params = client.get_run(run_id).data.params
    assert not [record for record in caplog.records if "truncated" in record.getMessage()]
    assert params["data.batch_size"] == "32"
    assert params["data.corpus"].endswith("the whole value is the artifact params/data.corpus.txt)")
    path = client.download_artifacts(run_id, "params/data.corpus.txt")
    assert Path(path).read_text() == corpus
    log_params(logger, {"data": {"corpus": corpus, "batch_size": 32}})  # a resumed fit: the same values
    assert "harness.changed_params" not in client.get_run(run_id).data.tags
