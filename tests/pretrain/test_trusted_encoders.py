"""``latest`` and ``models:/…`` pick runs only inside the trusted experiments (``pretrain`` and
``$ENCODER_EXPERIMENTS``) where a store is shared; a run elsewhere needs its ``runs:/<id>``.
The team server's two-user case is in tests/ui/test_server.py; here a SQLite store stands in,
made shared by naming the trusted experiments."""

import time

import pytest
from mlflow.tracking import MlflowClient

from harness.errors import UserError
from pretrain.encoders.loading import latest_pretrain_run, resolve
from pretrain.encoders.references import Source
from pretrain.encoders.registry import register_encoder
from pretrain.encoders.trusted import note_untrusted


@pytest.fixture
def store(monkeypatch, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(uri)

    def finished(experiment: str) -> str:
        found = client.get_experiment_by_name(experiment)
        experiment_id = found.experiment_id if found else client.create_experiment(experiment)
        run = client.create_run(experiment_id, tags={"stage": "pretrain", "family": "elmo", "mlflow.user": experiment})
        client.set_terminated(run.info.run_id, "FINISHED")
        time.sleep(0.01)  # distinct start times
        return run.info.run_id

    own = finished("pretrain")
    other = finished("mallory")  # newer, in an experiment anyone could have made
    return {"client": client, "own": own, "other": other}


def test_latest_stays_inside_the_trusted_experiments(monkeypatch, store):
    assert latest_pretrain_run() == store["other"]  # a local store is its user's own: every experiment
    monkeypatch.setenv("ENCODER_EXPERIMENTS", "pretrain")
    assert latest_pretrain_run() == store["own"]
    assert resolve(Source.parse("latest")).target == store["own"]
    monkeypatch.setenv("ENCODER_EXPERIMENTS", "pretrain, mallory")  # a list the user names
    assert latest_pretrain_run() == store["other"]


def test_a_model_version_of_an_untrusted_run_needs_its_run_id(monkeypatch, store, capsys):
    register_encoder(store["client"], store["other"], "elmo")
    monkeypatch.setenv("ENCODER_EXPERIMENTS", "pretrain")
    with pytest.raises(UserError) as raised:
        resolve(Source.parse("models:/elmo-encoder@newest"))
    message = str(raised.value)
    assert "\n" not in message and "experiment 'mallory', run by mallory" in message
    assert f"runs:/{store['other']}" in message and "ENCODER_EXPERIMENTS" in message
    note_untrusted(store["client"], store["client"].get_run(store["other"]), f"runs:/{store['other']}")
    assert "experiment 'mallory', run by mallory" in capsys.readouterr().err  # named explicitly: used, and said
    register_encoder(store["client"], store["own"], "elmo")
    assert resolve(Source.parse("models:/elmo-encoder@newest")).target == store["own"]
