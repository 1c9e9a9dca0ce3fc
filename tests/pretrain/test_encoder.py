"""``load_encoder``: a checkpoint written by a real Trainer rebuilds the same frozen features."""

import hashlib
import shutil
import time
from pathlib import Path

import pytest
import pytorch_lightning as pl
import torch
from mlflow.tracking import MlflowClient
from torch.utils.data import DataLoader

from harness.errors import UserError
from harness.training.batching import pad_batch
from pretrain import load_encoder
from pretrain.corpus.datamodule import encode_sentences
from pretrain.encoders.checkpoints import slim_checkpoint
from pretrain.encoders.loading import fingerprint_of, latest_pretrain_run, random_encoder
from pretrain.lit_bilm import LitBiLM
from pretrain.tokenization.words import Tokenizer
from tests.helpers import assert_one_line_error

HIDDEN, LAYERS = 8, 2
TRAIN = [
    "the cat sat on the mat .",
    "a dog ran home .",
    'he said "so" .',
    "prices rose 3 percent in 1999 .",
    "the dog sat on a mat .",
    "she ran home with the cat .",
]
SENTENCES = ["The cat ran home.", "A dog said so, with zebras!", "Mat."]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A LitBiLM trained for a few steps (dropout on) and its full and slim checkpoints."""
    directory = tmp_path_factory.mktemp("encoder")
    pl.seed_everything(0, verbose=False)
    tokenizer = Tokenizer.build(TRAIN)
    lit = LitBiLM(vocab_size=len(tokenizer), hidden_size=HIDDEN, num_layers=LAYERS, dropout=0.3, learning_rate=0.01)
    lit.tokenizer = tokenizer
    loader = DataLoader(encode_sentences(tokenizer, TRAIN), batch_size=3, collate_fn=pad_batch)
    trainer = pl.Trainer(
        max_steps=4,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        default_root_dir=directory,
    )
    trainer.fit(lit, loader)
    full = directory / "full.ckpt"
    trainer.save_checkpoint(full)
    slim = directory / "slim.ckpt"
    torch.save(slim_checkpoint(torch.load(full, map_location="cpu", weights_only=False)), slim)
    lit.eval()
    return {"lit": lit, "tokenizer": tokenizer, "full": full, "slim": slim}


@pytest.fixture(scope="module")
def encoder(trained):
    return load_encoder(trained["slim"])


def reference_layers(lit, tokenizer, sentence):
    """(L, words, D) from the in-memory model, one sentence alone, boundaries dropped."""
    ids = torch.tensor([tokenizer.encode(sentence)])
    with torch.no_grad():
        return lit.model.layer_outputs(ids, torch.tensor([ids.shape[1]]))[:, 0, 1:-1]


@pytest.mark.parametrize("which", ["full", "slim"])
def test_round_trip_gives_the_in_memory_features(trained, which):
    encoder = load_encoder(trained[which])
    expected = trained["lit"].model.state_dict()
    loaded = encoder.model.state_dict()
    assert loaded.keys() == expected.keys()
    for key in expected:
        assert torch.equal(loaded[key], expected[key]), key
    assert encoder.tokenizer.vocab == trained["tokenizer"].vocab
    layers, mask = encoder.embed_layers(SENTENCES)
    for b, sentence in enumerate(SENTENCES):
        reference = reference_layers(trained["lit"], trained["tokenizer"], sentence)
        words = len(encoder.tokenize(sentence))
        torch.testing.assert_close(layers[:, b, :words], reference, rtol=0, atol=1e-6)
    file_digest = hashlib.sha256(trained[which].read_bytes()).hexdigest()
    assert encoder.fingerprint == fingerprint_of(file_digest, "elmo", {"type": "word"})
    assert encoder.source == str(trained[which]) and encoder.family == "elmo"


def test_fingerprint_follows_the_model_code(trained, monkeypatch):
    """Feature caches and random twins key on the fingerprint: an edit to the model code (its
    initialisation included) must change it even when the weights file is the same."""
    before = load_encoder(trained["slim"])
    twin_before = random_encoder(before, seed=0)
    monkeypatch.setattr("pretrain.encoders.loading.code_version", lambda family, kind: "edited model code")
    after = load_encoder(trained["slim"])
    assert after.fingerprint != before.fingerprint
    assert random_encoder(after, seed=0).fingerprint != twin_before.fingerprint


def test_slim_checkpoint_has_no_optimiser_state(trained):
    slim = torch.load(trained["slim"], map_location="cpu", weights_only=True)
    assert "optimizer_states" not in slim and "loops" not in slim
    assert slim["state_dict"].keys() == trained["lit"].model.state_dict().keys()
    assert slim["family"] == "elmo" and slim["model_config"]["hidden_size"] == HIDDEN
    assert slim["tokenizer"]["vocab"] == trained["tokenizer"].vocab


def test_embed_layers_shapes_mask_and_alignment(encoder):
    layers, mask = encoder.embed_layers(SENTENCES)
    words = [encoder.tokenize(s) for s in SENTENCES]
    assert words[0] == ["the", "cat", "ran", "home", "."]
    steps = max(len(w) for w in words)
    assert layers.shape == (LAYERS + 1, len(SENTENCES), steps, 2 * HIDDEN)
    assert (encoder.num_layers, encoder.dim) == (LAYERS + 1, 2 * HIDDEN)
    assert layers.dtype == torch.float32 and mask.dtype == torch.bool
    assert mask.tolist() == [[t < len(w) for t in range(steps)] for w in words]
    assert layers[:, ~mask].abs().sum() == 0
    assert (layers[:, mask].abs().sum(-1) > 0).all()
    # layer 0 of each real position is that word's embedding (both halves): features align to tokenize()
    embedding = encoder.model.embedding.weight
    for b, sentence_words in enumerate(words):
        for t, word in enumerate(sentence_words):
            row = embedding[encoder.tokenizer.index.get(word, 1)]
            assert torch.equal(layers[0, b, t], torch.cat([row, row]))


def test_features_do_not_depend_on_the_batch(encoder):
    together, _ = encoder.embed_layers(SENTENCES)
    for b, sentence in enumerate(SENTENCES):
        alone, _ = encoder.embed_layers([sentence])
        words = alone.shape[2]
        torch.testing.assert_close(together[:, b, :words], alone[:, 0], rtol=0, atol=1e-6)


def test_embed_sentences_is_the_mean_over_words_and_layers(encoder):
    vectors = encoder.embed_sentences(SENTENCES)
    assert vectors.shape == (len(SENTENCES), 2 * HIDDEN)
    layers, mask = encoder.embed_layers(SENTENCES)
    for b in range(len(SENTENCES)):
        expected = layers[:, b, mask[b]].mean(dim=(0, 1))  # mean over layers and real words
        torch.testing.assert_close(vectors[b], expected)


def test_encoder_is_frozen_and_deterministic(encoder):
    assert not encoder.model.training
    assert all(not module.training for module in encoder.model.modules())
    assert all(not p.requires_grad for p in encoder.model.parameters())
    assert encoder.config["dropout"] == 0.3  # dropout configured, yet features repeat exactly
    first, _ = encoder.embed_layers(SENTENCES)
    second, _ = encoder.embed_layers(SENTENCES)
    assert torch.equal(first, second)
    assert not first.requires_grad


def test_empty_sentence_has_no_words(encoder):
    layers, mask = encoder.embed_layers(["", "The cat."])
    assert mask.sum(1).tolist() == [0, 3]
    assert layers[:, 0].abs().sum() == 0
    assert torch.equal(encoder.embed_sentences([""]), torch.zeros(1, 2 * HIDDEN))


def test_random_encoder_is_the_untrained_control(encoder):
    state = torch.random.get_rng_state()
    control = random_encoder(encoder, seed=3)
    assert torch.equal(torch.random.get_rng_state(), state)  # the global generator is left alone
    trained_weights, random_weights = encoder.model.state_dict(), control.model.state_dict()
    assert {k: v.shape for k, v in random_weights.items()} == {k: v.shape for k, v in trained_weights.items()}
    assert control.tokenizer.vocab == encoder.tokenizer.vocab
    assert not torch.equal(random_weights["embedding.weight"], trained_weights["embedding.weight"])
    assert all(not p.requires_grad for p in control.model.parameters()) and not control.model.training
    again = random_encoder(encoder, seed=3)
    for key, value in random_weights.items():
        assert torch.equal(again.model.state_dict()[key], value), key
    assert again.fingerprint == control.fingerprint != encoder.fingerprint
    other = random_encoder(encoder, seed=4)
    assert not torch.equal(other.model.state_dict()["embedding.weight"], random_weights["embedding.weight"])
    assert other.fingerprint != control.fingerprint
    layers, _ = control.embed_layers(SENTENCES)
    assert layers.shape == encoder.embed_layers(SENTENCES)[0].shape


# --- errors a user can cause ------------------------------------------------------------------------


def one_line_error(source) -> str:
    return assert_one_line_error(lambda: load_encoder(source))


def test_missing_file(tmp_path):
    assert str(tmp_path / "nope.ckpt") in one_line_error(tmp_path / "nope.ckpt")


def test_not_a_checkpoint(tmp_path):
    text = tmp_path / "notes.ckpt"
    text.write_text("not a checkpoint\n")
    assert str(text) in one_line_error(text)
    folder = tmp_path / "folder.ckpt"
    folder.mkdir()
    assert str(folder) in one_line_error(folder)


def test_checkpoint_without_config_and_vocabulary(tmp_path, trained):
    foreign = tmp_path / "foreign.ckpt"
    torch.save({"state_dict": trained["lit"].state_dict()}, foreign)
    assert "not an encoder checkpoint" in one_line_error(foreign)


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A SQLite MLflow store with a finetune run and an unfinished pretrain run."""
    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}"
    client = MlflowClient(uri)
    experiment = client.create_experiment("pretrain")
    finetune = client.create_run(experiment, tags={"stage": "finetune"})
    client.set_terminated(finetune.info.run_id, "FINISHED")
    running = client.create_run(experiment, tags={"stage": "pretrain"})
    return {"uri": uri, "finetune": finetune.info.run_id, "running": running.info.run_id}


def test_unknown_run(monkeypatch, store):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["uri"])
    assert "0123456789abcdef" in one_line_error("runs:/0123456789abcdef")


def test_run_of_another_stage(monkeypatch, store):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["uri"])
    assert "not a pretrain run" in one_line_error(f"runs:/{store['finetune']}")


def test_unfinished_pretrain_run(monkeypatch, store):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["uri"])
    assert "RUNNING" in one_line_error(f"runs:/{store['running']}")


def test_latest_without_finished_pretrain_run(monkeypatch, store):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["uri"])
    assert "latest" in one_line_error("latest")


def test_latest_is_the_newest_finished_pretrain_run_not_made_by_a_benchmark(monkeypatch, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    client = MlflowClient(uri)
    experiment = client.create_experiment("pretrain")
    made = []
    for tags in ({"stage": "pretrain"}, {"stage": "pretrain"}, {"stage": "pretrain", "benchmark": "quick"}):
        run = client.create_run(experiment, tags=tags)
        client.set_terminated(run.info.run_id, "FINISHED")
        made.append(run.info.run_id)
        time.sleep(0.01)  # distinct start times
    assert latest_pretrain_run() == made[1]


@pytest.mark.slow
def test_latest_looks_past_a_page_of_benchmark_runs_and_filters_family_and_stage(monkeypatch, tmp_path):
    """More benchmark-made runs than one search page (200 results) must not hide an older user's
    run, and latest:<family>:<stage> selects by the run's tags."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setattr("pretrain.encoders.loading.SEARCH_PAGE", 2)
    client = MlflowClient(uri)
    experiment = client.create_experiment("pretrain")

    def finished(**tags):
        run = client.create_run(experiment, tags={"stage": "pretrain", **tags})
        client.set_terminated(run.info.run_id, "FINISHED")
        time.sleep(0.01)  # distinct start times
        return run.info.run_id

    general = finished(family="ulmfit", lm_stage="general")
    task = finished(family="ulmfit", lm_stage="task")
    elmo = finished()  # made before families existed: no family tag, an ELMo biLM
    for _ in range(5):
        finished(family="ulmfit", benchmark="quick")
    assert latest_pretrain_run() == elmo
    assert latest_pretrain_run("ulmfit") == task
    assert latest_pretrain_run("ulmfit", "general") == general
    assert latest_pretrain_run("elmo") == elmo
    with pytest.raises(UserError, match="no finished gpt pretrain run"):
        latest_pretrain_run("gpt")


@pytest.mark.slow
def test_a_damaged_download_is_fetched_again_once_then_named(monkeypatch, tmp_path, trained):
    """Downloads land in a temporary folder and are renamed into place; a cached copy that no
    longer reads is deleted and downloaded again once; if the run's artifact itself is damaged,
    the error names the file. Runs made before families (checkpoint/bilm.ckpt) still load."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setattr("pretrain.encoders.loading.ENCODER_CACHE", tmp_path / "cache")
    client = MlflowClient(uri)
    experiment = client.create_experiment("pretrain", artifact_location=(tmp_path / "artifacts").as_uri())

    def pretrain_run(artifact_path: str, payload: Path) -> str:
        run = client.create_run(experiment, tags={"stage": "pretrain"})
        staged = tmp_path / "staged" / run.info.run_id
        staged.mkdir(parents=True)
        shutil.copy(payload, staged / Path(artifact_path).name)
        client.log_artifact(run.info.run_id, str(staged / Path(artifact_path).name), str(Path(artifact_path).parent))
        client.set_terminated(run.info.run_id, "FINISHED")
        return run.info.run_id

    run_id = pretrain_run("checkpoint/encoder.ckpt", trained["slim"])
    cached = tmp_path / "cache" / run_id / "encoder.ckpt"
    first = load_encoder(f"runs:/{run_id}")
    assert cached.is_file() and not list((tmp_path / "cache").glob(".*tmp*"))
    cached.write_bytes(cached.read_bytes()[:100])  # a damaged cached copy
    again = load_encoder(f"runs:/{run_id}")
    assert again.fingerprint == first.fingerprint and cached.stat().st_size == trained["slim"].stat().st_size

    broken = tmp_path / "broken.ckpt"
    broken.write_bytes(trained["slim"].read_bytes()[:100])
    bad_run = pretrain_run("checkpoint/encoder.ckpt", broken)
    message = one_line_error(f"runs:/{bad_run}")
    assert str(tmp_path / "cache" / bad_run / "encoder.ckpt") in message and "unreadable twice" in message

    legacy = pretrain_run("checkpoint/bilm.ckpt", trained["slim"])
    assert load_encoder(f"runs:/{legacy}").fingerprint == first.fingerprint
