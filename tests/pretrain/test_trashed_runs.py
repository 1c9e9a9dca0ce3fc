"""A deleted (trashed) pretrain run never resolves: not through ``models:/<name>@<alias>``, a
version, ``runs:/<id>``, ``latest`` or ``--model.random_like``; restored, it works again."""

import shutil
import time

import pytest
from mlflow.tracking import MlflowClient

from downstream.run.cli import resolve_encoder
from harness.errors import UserError
from pretrain.encoders.loading import load_encoder
from pretrain.encoders.registry import register_encoder
from tests.helpers import assert_one_line_error


@pytest.fixture
def store(tmp_path, monkeypatch, save_encoder) -> dict:
    """Two finished, registered ELMo pretrain runs (the newer one behind ``@newest``)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setattr("pretrain.encoders.loading.ENCODER_CACHE", tmp_path / "cache")
    client = MlflowClient(uri)
    experiment = client.create_experiment("pretrain", artifact_location=(tmp_path / "artifacts").as_uri())
    checkpoint, _ = save_encoder("elmo", tmp_path)
    runs = []
    for _ in range(2):
        run = client.create_run(experiment, tags={"stage": "pretrain", "family": "elmo", "lm_stage": "general"})
        staged = tmp_path / "staged" / run.info.run_id
        staged.mkdir(parents=True)
        shutil.copy(checkpoint, staged / "encoder.ckpt")
        client.log_artifact(run.info.run_id, str(staged / "encoder.ckpt"), "checkpoint")
        client.set_terminated(run.info.run_id, "FINISHED")
        register_encoder(client, run.info.run_id, "elmo")
        runs.append(run.info.run_id)
        time.sleep(0.01)  # distinct start times
    return {"client": client, "older": runs[0], "newer": runs[1], "experiment": experiment}


def refused(source: str) -> str:
    return assert_one_line_error(lambda: load_encoder(source))


@pytest.mark.slow
def test_a_trashed_run_behind_an_alias_is_refused_naming_the_alias(store):
    client, newer = store["client"], store["newer"]
    assert load_encoder("models:/elmo-encoder@newest").run_id == newer
    client.delete_run(newer)
    message = refused("models:/elmo-encoder@newest")
    assert message.startswith(f"models:/elmo-encoder@newest: run {newer} is deleted (in the trash of ")
    assert f"mlflow runs restore --run-id {newer}" in message
    assert refused("models:/elmo-encoder/2").startswith(f"models:/elmo-encoder/2: run {newer} is deleted")
    assert refused("models:/elmo-encoder/latest").startswith("models:/elmo-encoder/latest: run ")
    assert refused(f"runs:/{newer}").startswith(f"runs:/{newer}: run {newer} is deleted")
    assert load_encoder("latest").run_id == store["older"]  # latest passes over the trash
    client.restore_run(newer)
    assert load_encoder("models:/elmo-encoder@newest").run_id == newer


@pytest.mark.slow
def test_the_random_control_of_a_trashed_run_is_refused_too(store):
    store["client"].delete_run(store["older"])
    with pytest.raises(UserError) as raised:
        resolve_encoder("random", f"runs:/{store['older']}", seed=0)
    assert str(raised.value).startswith(f"--model.encoder=random: run {store['older']} is deleted")


@pytest.mark.slow
def test_runs_of_a_deleted_experiment_are_refused_and_latest_finds_none(store):
    store["client"].delete_experiment(store["experiment"])
    assert refused(f"runs:/{store['older']}").startswith(f"runs:/{store['older']}: run {store['older']} is deleted")
    assert "no finished pretrain run" in refused("latest")
