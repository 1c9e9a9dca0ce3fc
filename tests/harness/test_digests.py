"""Checkpoint digests on a local SQLite store: a pretrain run's recorded sha256 is checked on every
download (``runs:/``, ``models:/``, ``latest``); an encoder checkpoint replaced in the artifact
store (same path, other bytes: the weights negated) is refused in one line naming the run; a
damaged cached copy heals; a finetune run's ``best.ckpt`` is checked against its run the same way.
(The same attack through a team server's artifact API: tests/ui/test_server.py.)"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from mlflow.tracking import MlflowClient

from harness.digests import DIGEST_PARAM, check_run_checkpoint, record_digest, sha256_of
from harness.errors import UserError
from pretrain import load_encoder
from pretrain.encoders.registry import register_encoder
from tests.helpers import assert_one_line_error


@pytest.fixture(scope="module")
def stored_run(tmp_path_factory, save_encoder):
    """A SQLite store with one finished pretrain run whose ``checkpoint/encoder.ckpt`` and digest
    were logged the way ExportEncoder logs them, registered as ``elmo-encoder``."""
    tmp_path = tmp_path_factory.mktemp("digests")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("pretrain", artifact_location=(tmp_path / "artifacts").as_uri())
    genuine, _ = save_encoder("elmo", tmp_path)
    run_id = client.create_run(experiment, tags={"stage": "pretrain", "family": "elmo"}).info.run_id
    staged = tmp_path / "staged" / "encoder.ckpt"
    staged.parent.mkdir()
    shutil.copy(genuine, staged)
    record_digest(client, run_id, staged)
    client.log_artifact(run_id, str(staged), "checkpoint")
    client.set_terminated(run_id, "FINISHED")
    register_encoder(client, run_id, "elmo")
    stored = tmp_path / "artifacts" / run_id / "artifacts" / "checkpoint" / "encoder.ckpt"
    assert stored.is_file()
    return {
        "uri": uri,
        "client": client,
        "run_id": run_id,
        "stored": stored,
        "genuine": genuine,
        "tmp": tmp_path,
        "cache": tmp_path / "cache" / run_id / "encoder.ckpt",
    }


@pytest.fixture
def store(stored_run, monkeypatch):
    """The module's store, its run's artifact genuine again and no cached copy, as this test's store."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", stored_run["uri"])
    monkeypatch.setattr("pretrain.encoders.loading.ENCODER_CACHE", stored_run["tmp"] / "cache")
    shutil.copy(stored_run["genuine"], stored_run["stored"])
    shutil.rmtree(stored_run["tmp"] / "cache", ignore_errors=True)
    return stored_run


def negated(path: Path, target: Path) -> Path:
    """The same checkpoint with every floating-point weight negated: loads fine, computes other features."""
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["state_dict"] = {
        key: -value if value.is_floating_point() else value for key, value in checkpoint["state_dict"].items()
    }
    torch.save(checkpoint, target)
    return target


def one_line(source: str) -> str:
    return assert_one_line_error(lambda: load_encoder(source))


@pytest.mark.slow
def test_a_pretrain_run_records_the_sha256_of_its_checkpoint(store):
    params = store["client"].get_run(store["run_id"]).data.params
    assert params[DIGEST_PARAM] == sha256_of(store["genuine"]) == sha256_of(store["stored"])
    encoder = load_encoder(f"runs:/{store['run_id']}")
    assert encoder.run_id == store["run_id"] and sha256_of(store["cache"]) == params[DIGEST_PARAM]


@pytest.mark.parametrize(
    "source", ["runs:/{run_id}", "models:/elmo-encoder@newest", "models:/elmo-encoder/1", "latest", "latest:elmo"]
)
@pytest.mark.slow
def test_a_checkpoint_replaced_in_the_artifact_store_is_refused_on_download(store, source):
    negated(store["genuine"], store["stored"])  # same path, other bytes
    message = one_line(source.format(run_id=store["run_id"]))
    assert store["run_id"] in message and "checkpoint/encoder.ckpt" in message
    assert "not the checkpoint the run recorded" in message and "refusing to load it" in message
    assert not store["cache"].exists()  # the refused file is not kept for the next load


@pytest.mark.slow
def test_a_replaced_cached_copy_is_downloaded_again_and_a_later_swap_in_the_store_is_still_refused(store):
    genuine = load_encoder(f"runs:/{store['run_id']}")
    negated(store["genuine"], store["cache"])  # someone swaps the local cache
    healed = load_encoder(f"runs:/{store['run_id']}")
    assert healed.fingerprint == genuine.fingerprint and sha256_of(store["cache"]) == sha256_of(store["genuine"])
    negated(store["genuine"], store["stored"])
    store["cache"].unlink()
    assert "refusing to load it" in one_line(f"runs:/{store['run_id']}")


@pytest.mark.slow
def test_the_recorded_digest_cannot_be_changed_afterwards(store):
    other = negated(store["genuine"], store["tmp"] / "other.ckpt")  # a file of its own: the fixture keeps `genuine`
    with pytest.raises(UserError, match=f"run {store['run_id']} already records {DIGEST_PARAM}"):
        record_digest(store["client"], store["run_id"], other)
    record_digest(store["client"], store["run_id"], store["genuine"])  # the same bytes again: fine


@pytest.mark.slow
def test_a_run_without_a_digest_loads_with_a_note(store, capsys):
    client = store["client"]
    run = client.create_run(client.get_experiment_by_name("pretrain").experiment_id, tags={"stage": "pretrain"})
    legacy = store["tmp"] / "legacy" / "encoder.ckpt"
    legacy.parent.mkdir()
    shutil.copy(store["genuine"], legacy)
    client.log_artifact(run.info.run_id, str(legacy), "checkpoint")
    client.set_terminated(run.info.run_id, "FINISHED")
    try:
        assert load_encoder(f"runs:/{run.info.run_id}").run_id == run.info.run_id
        load_encoder(f"runs:/{run.info.run_id}")
    finally:
        client.delete_run(run.info.run_id)  # `latest` of the other tests stays the recorded run
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    assert notes == [
        f"note: run {run.info.run_id} records no {DIGEST_PARAM} (made before checkpoint digests); "
        f"its checkpoint/encoder.ckpt is loaded unchecked"
    ]  # once per run and process


@pytest.mark.slow
def test_a_finetune_runs_best_checkpoint_is_checked_against_its_run(store):
    client, folder = store["client"], store["tmp"] / "checkpoints" / "finetune"
    run_id = client.create_run(client.create_experiment("mrpc"), tags={"stage": "finetune"}).info.run_id
    folder.mkdir(parents=True, exist_ok=True)
    best = folder / run_id / "best.ckpt"
    best.parent.mkdir(parents=True)
    shutil.copy(store["genuine"], best)
    record_digest(client, run_id, best)
    check_run_checkpoint(best, run_id)  # unchanged: fine
    check_run_checkpoint(best.with_name("last.ckpt"), run_id)  # only best.ckpt has a record
    check_run_checkpoint(best, "0" * 32)  # a run this store does not have: nothing to check against
    negated(store["genuine"], best)
    with pytest.raises(UserError, match=rf"^{best}: run {run_id}'s best.ckpt is not the checkpoint the run recorded"):
        check_run_checkpoint(best, run_id)
