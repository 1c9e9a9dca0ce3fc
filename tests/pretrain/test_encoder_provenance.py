"""`latest` takes the newest FINISHED pretraining that is not a smoke run (a toy that tests the
pipeline), and a smoke run only when nothing else finished, saying so; a stage describes the
encoder it resolved by its run, family, size, corpus, end time and held-out perplexity."""

import pytest
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from harness.tracking.naming import pretrain_run_name
from harness.tracking.runs import ensure_experiment
from pretrain.encoders.loading import latest_pretrain_run
from pretrain.encoders.provenance import encoder_summary, origin_of


@pytest.fixture
def client(tmp_path, monkeypatch) -> MlflowClient:
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("ENCODER_EXPERIMENTS", raising=False)
    return MlflowClient(uri)


def pretraining(client: MlflowClient, status: str = "FINISHED", smoke: bool = False, start: int = 0) -> str:
    tags = {"stage": "pretrain", "family": "elmo", **({"smoke": "true"} if smoke else {})}
    run = client.create_run(ensure_experiment("pretrain"), start_time=1_700_000_000_000 + start, tags=tags)
    run_id = run.info.run_id
    for key, value in {"model.num_layers": 2, "model.hidden_size": 32, "data.corpus": "mrpc+reuters"}.items():
        client.log_param(run_id, key, value)
    client.log_metric(run_id, "best_val_ppl", 512.34)
    if status != "RUNNING":
        client.set_terminated(run_id, status, end_time=1_700_000_600_000 + start)
    return run_id


def test_latest_prefers_a_finished_real_encoder_to_a_newer_smoke_one(client, capsys):
    real = pretraining(client, start=0)
    pretraining(client, smoke=True, start=10)
    assert latest_pretrain_run() == real
    assert "smoke" not in capsys.readouterr().out


def test_latest_counts_finished_runs_only(client):
    finished = pretraining(client, start=0)
    for later, status in enumerate(("RUNNING", "KILLED", "FAILED"), start=1):
        pretraining(client, status=status, start=later)
    assert latest_pretrain_run() == finished


def test_latest_takes_a_smoke_encoder_only_when_nothing_else_finished_and_says_so(client, capsys):
    pretraining(client, status="RUNNING", start=20)  # `make pretrain` still running
    smoke = pretraining(client, smoke=True, start=10)
    assert latest_pretrain_run() == smoke
    note = capsys.readouterr().out
    assert note.startswith("note: latest: only smoke pretrain runs are finished") and smoke in note


def test_latest_with_nothing_finished_is_one_line(client):
    pretraining(client, status="KILLED")
    with pytest.raises(UserError, match="no finished pretrain run"):
        latest_pretrain_run()


def test_an_encoder_is_described_by_run_family_size_corpus_time_and_perplexity(client):
    smoke = origin_of(pretraining(client, smoke=True))
    text = smoke.describe()
    assert text.startswith(f"elmo 2x32, run {smoke.run_id}, corpus mrpc+reuters, finished 2023-11-14 22:")
    assert "val_ppl 512.3" in text and "a smoke run" in text
    assert "smoke" not in origin_of(pretraining(client)).describe()
    assert origin_of("0" * 32) is None and origin_of(None) is None


def test_the_random_twin_is_described_as_the_twin_of_the_run_it_copies(client):
    class Twin:
        is_random, random_seed, source, family, config = True, 7, "random", "elmo", {}

    origin = origin_of(pretraining(client))
    assert encoder_summary(Twin(), origin) == f"random twin (untrained, seed 7) of {origin.describe()}"


def test_a_smoke_pretraining_says_so_in_its_name():
    config = {"num_layers": 2, "hidden_size": 32}
    assert pretrain_run_name("elmo", config, "full", "mrpc", False, 0, smoke=True) == "elmo·2x32·full·mrpc·smoke·s0"
    assert pretrain_run_name("elmo", config, "full", "mrpc", False, 0) == "elmo·2x32·full·mrpc·s0"
