"""LitPairClassifier in process: a frozen encoder, the mixes, the random control, evaluation
and determinism, on a few dozen real MRPC pairs and a tiny biLM checkpoint."""

from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from sklearn.metrics import accuracy_score, f1_score

from downstream.data.pair_datamodule import PairDataModule
from downstream.run.cli import encoder_kind, pair_classifier, pretrain_run_tag
from downstream.run.evaluation import PREDICTION_COLUMNS, predictions_frame, split_metrics
from downstream.run.lit_pair import LitPairClassifier
from harness.datasets.mrpc import ID_COLUMNS, LABELS
from harness.datasets.types import Pair, PairData
from harness.errors import UserError
from pretrain.encoders.loading import load_encoder
from tests.helpers import mrpc_train_sentences, save_tiny_bilm

MAX_PAIRS = 64
HEAD = {"head": "pool-mlp", "hidden_size": 16, "dropout": 0.1, "learning_rate": 1e-2}


@pytest.fixture(scope="module")
def mrpc_dir(real_mrpc_dir) -> Path:
    return real_mrpc_dir


@pytest.fixture(scope="module")
def checkpoint(mrpc_dir, tmp_path_factory) -> Path:
    return save_tiny_bilm(mrpc_train_sentences(mrpc_dir), tmp_path_factory.mktemp("encoder"))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("features")


def make_data(model: LitPairClassifier, mrpc_dir: Path, cache_dir: Path) -> PairDataModule:
    data = PairDataModule(
        mrpc_dir=str(mrpc_dir), batch_size=16, max_pairs=MAX_PAIRS, cache_dir=str(cache_dir), subsample_seed=0
    )
    data.attach(model.encoder)
    return data


def make_trainer(root: Path, epochs: int = 2) -> pl.Trainer:
    return pl.Trainer(
        max_epochs=epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        default_root_dir=root,
    )


def fit(checkpoint: Path, mrpc_dir: Path, cache_dir: Path, root: Path, seed: int, **kwargs):
    pl.seed_everything(seed, verbose=False)
    model = pair_classifier(encoder=str(checkpoint), **{**HEAD, **kwargs})
    data = make_data(model, mrpc_dir, cache_dir)
    trainer = make_trainer(root)
    trainer.fit(model, datamodule=data)
    return model, data, trainer


@pytest.fixture(scope="module")
def fitted(checkpoint, mrpc_dir, cache_dir, tmp_path_factory):
    return fit(checkpoint, mrpc_dir, cache_dir, tmp_path_factory.mktemp("fit"), seed=7)


# ── the encoder stays frozen and outside the module ─────────────────────────────────────────


def test_training_never_touches_the_encoder(checkpoint, mrpc_dir, cache_dir, tmp_path):
    pl.seed_everything(1, verbose=False)
    model = pair_classifier(encoder=str(checkpoint), **HEAD)
    encoder = model.encoder.model
    before = {name: p.detach().clone() for name, p in encoder.named_parameters()}
    head_before = [p.detach().clone() for p in model.head.parameters()]
    assert before and all(not p.requires_grad for p in encoder.parameters())

    trainer = make_trainer(tmp_path)
    trainer.fit(model, datamodule=make_data(model, mrpc_dir, cache_dir))

    assert trainer.global_step == 2 * MAX_PAIRS // 16
    after = dict(encoder.named_parameters())
    assert after.keys() == before.keys()
    for name, parameter in after.items():
        assert not parameter.requires_grad, name
        assert parameter.grad is None, name
        assert torch.equal(parameter, before[name]), name
    assert not encoder.training
    # the head did learn, so the run above really trained something
    assert any(not torch.equal(p, q) for p, q in zip(model.head.parameters(), head_before))

    encoder_ids = {id(p) for p in encoder.parameters()}
    assert not encoder_ids & {id(p) for p in model.parameters()}
    optimised = {id(p) for group in trainer.optimizers[0].param_groups for p in group["params"]}
    assert not encoder_ids & optimised
    keys = list(model.state_dict())
    assert keys and not [key for key in keys if key.startswith(("encoder", "model.", "classifier.encoder"))], keys
    assert {".".join(key.split(".")[:2]) for key in keys} <= {
        "classifier.mix",
        "classifier.head",
        "classifier.standardizer",
    }  # its statistics: buffers


def test_encoder_from_a_checkpoint_path(checkpoint):
    model = pair_classifier(encoder=str(checkpoint), **HEAD)
    assert (model.encoder.num_layers, model.encoder.dim) == (3, 16)
    assert model.encoder.source == str(checkpoint)
    assert pretrain_run_tag(model.encoder) == f"file:{checkpoint}"
    assert encoder_kind(model.encoder) == "elmo"


# ── mixes ────────────────────────────────────────────────────────────────────────────────────


def test_layer_out_of_range_is_a_user_error(checkpoint):
    with pytest.raises(UserError, match="--model.mix=layer:9") as raised:
        pair_classifier(encoder=str(checkpoint), mix="layer:9", **HEAD)
    assert "\n" not in str(raised.value)
    assert "layer:2" in str(raised.value)  # says what would work


def test_average_mix_has_no_trainable_parameters(checkpoint):
    model = pair_classifier(encoder=str(checkpoint), mix="average", **HEAD)
    assert list(model.mix.parameters()) == []
    head = {id(p) for p in model.head.parameters()}
    assert all(id(p) in head for p in model.parameters() if p.requires_grad)
    metrics = model.mix_metrics()
    assert metrics == {
        "mix_weight_0": pytest.approx(1 / 3),
        "mix_weight_1": pytest.approx(1 / 3),
        "mix_weight_2": pytest.approx(1 / 3),
        "mix_gamma": 1.0,
    }


@pytest.mark.parametrize("mix, weights", [("layer:1", [0.0, 1.0, 0.0]), ("top", [0.0, 0.0, 1.0])])
def test_single_layer_mixes_are_one_hot(checkpoint, mix, weights):
    model = pair_classifier(encoder=str(checkpoint), mix=mix, **HEAD)
    metrics = model.mix_metrics()
    assert [metrics[f"mix_weight_{k}"] for k in range(3)] == weights
    assert metrics["mix_gamma"] == 1.0
    assert list(model.mix.parameters()) == []


def test_scalar_mix_logs_softmax_weights_and_gamma(checkpoint):
    model = pair_classifier(encoder=str(checkpoint), mix="scalar", **HEAD)
    assert {id(p) for p in model.mix.parameters()} <= {id(p) for p in model.parameters()}
    with torch.no_grad():
        model.mix.layer_scalars.copy_(torch.tensor([0.3, -1.2, 2.0]))
        model.mix.gamma_scale.fill_(0.7)
    metrics = model.mix_metrics()
    assert set(metrics) == {"mix_weight_0", "mix_weight_1", "mix_weight_2", "mix_gamma"}
    weights = [metrics[f"mix_weight_{k}"] for k in range(3)]
    assert sum(weights) == pytest.approx(1.0, abs=1e-6)
    assert weights == pytest.approx(torch.softmax(torch.tensor([0.3, -1.2, 2.0]), 0).tolist())
    assert metrics["mix_gamma"] == pytest.approx(0.7)


def test_scalar_mix_weights_after_training_sum_to_one(fitted):
    model, _, _ = fitted
    metrics = model.mix_metrics()
    assert sum(metrics[f"mix_weight_{k}"] for k in range(3)) == pytest.approx(1.0, abs=1e-6)
    assert model.mix.layer_scalars.requires_grad


# ── the random control ───────────────────────────────────────────────────────────────────────


def random_control(checkpoint: Path, seed: int) -> LitPairClassifier:
    torch.manual_seed(seed)
    return pair_classifier(encoder="random", random_like=str(checkpoint), **HEAD)


def test_random_control_copies_the_architecture_not_the_weights(checkpoint):
    trained = load_encoder(checkpoint)
    model = random_control(checkpoint, seed=3)
    control = model.encoder
    assert pretrain_run_tag(control) == "random"
    assert encoder_kind(control) == "random" and control.source == "random"
    assert control.config == trained.config
    assert control.tokenizer.vocab == trained.tokenizer.vocab
    assert (control.num_layers, control.dim) == (trained.num_layers, trained.dim)
    weights, trained_weights = control.model.state_dict(), trained.model.state_dict()
    assert weights.keys() == trained_weights.keys()
    assert all(weights[key].shape == trained_weights[key].shape for key in weights)
    assert not all(torch.equal(weights[key], trained_weights[key]) for key in weights)
    assert control.fingerprint != trained.fingerprint  # a feature cache of its own
    assert all(not p.requires_grad for p in control.model.parameters()) and not control.model.training


def test_random_control_is_deterministic_per_seed(checkpoint):
    first, again, other = (random_control(checkpoint, seed).encoder for seed in (3, 3, 4))
    first_weights, again_weights, other_weights = (e.model.state_dict() for e in (first, again, other))
    assert all(torch.equal(first_weights[key], again_weights[key]) for key in first_weights)
    assert not all(torch.equal(first_weights[key], other_weights[key]) for key in first_weights)
    assert first.fingerprint == again.fingerprint != other.fingerprint
    sentences = ["He said so.", "Shares fell 3 percent on Monday."]
    assert torch.equal(first.embed_layers(sentences)[0], again.embed_layers(sentences)[0])


# ── user errors ──────────────────────────────────────────────────────────────────────────────


def test_missing_checkpoint_is_a_user_error(tmp_path):
    missing = tmp_path / "missing.ckpt"
    with pytest.raises(UserError) as raised:
        pair_classifier(encoder=str(missing), **HEAD)
    message = str(raised.value)
    assert message.startswith("--model.encoder=") and str(missing) in message and "\n" not in message


def test_missing_random_like_checkpoint_is_a_user_error(tmp_path):
    missing = tmp_path / "missing.ckpt"
    with pytest.raises(UserError, match="--model.encoder=random") as raised:
        pair_classifier(encoder="random", random_like=str(missing), **HEAD)
    assert str(missing) in str(raised.value)


def test_a_file_that_is_not_a_checkpoint_is_a_user_error(tmp_path):
    junk = tmp_path / "notes.ckpt"
    junk.write_text("not a checkpoint\n")
    with pytest.raises(UserError, match="--model.encoder="):
        pair_classifier(encoder=str(junk), **HEAD)


# ── evaluation ───────────────────────────────────────────────────────────────────────────────


def mrpc_like(pairs: list[Pair]) -> PairData:
    """MSR-format pairs as MRPC's PairData (every split the same pairs)."""
    return PairData("mrpc", LABELS, ID_COLUMNS, pairs, pairs, pairs, "h", kind="mrpc")


def test_predictions_frame_sorts_by_pair_and_thresholds_at_one_half():
    pairs = [Pair(label, (str(10 + i), str(20 + i)), f"a{i}", "b") for i, label in enumerate([1, 0, 1, 1, 0])]
    data = mrpc_like(pairs)
    indices = torch.tensor([3, 0, 4, 1, 2])  # the order a loader might return them in
    paraphrase = torch.tensor([0.5, 0.9, 0.49999, 0.2, 0.7])
    frame = predictions_frame(data, data.dev, torch.stack([1 - paraphrase, paraphrase], dim=1), indices)
    assert list(frame.columns) == PREDICTION_COLUMNS
    assert frame["id1"].tolist() == ["10", "11", "12", "13", "14"]
    assert frame["id2"].tolist() == ["20", "21", "22", "23", "24"]
    assert frame["label"].tolist() == ["1", "0", "1", "1", "0"]
    assert frame["prob"].tolist() == pytest.approx([0.9, 0.2, 0.7, 0.5, 0.49999])
    assert frame["pred"].tolist() == ["1", "0", "1", "1", "0"]
    assert frame["sentence1"].tolist() == ["a0", "a1", "a2", "a3", "a4"]
    assert frame.to_csv(index=False).splitlines()[1].startswith("10,20,1,0.89999")  # labels as MRPC's 0/1
    assert frame.to_csv(index=False).splitlines()[1].endswith(",1,a0,b")
    metrics = split_metrics(frame, "dev", data)
    assert metrics == {"dev_acc": 1.0, "dev_f1": 1.0}


def test_split_metrics_equal_sklearn_on_a_trained_model(fitted):
    model, data, _ = fitted
    for split in ("dev", "test"):
        probabilities, indices = model.predictions(data.loader(split))
        frame = predictions_frame(data.pair_data, data.pairs[split], probabilities, indices)
        assert list(frame.columns) == PREDICTION_COLUMNS
        assert len(frame) == len(data.pairs[split]) == MAX_PAIRS
        assert frame["id1"].tolist() == [p.ids[0] for p in data.pairs[split]]
        assert frame["label"].tolist() == [str(p.label) for p in data.pairs[split]]
        assert ((frame["prob"] >= 0) & (frame["prob"] <= 1)).all()
        assert (frame["pred"] == (frame["prob"] >= 0.5).astype(int).astype(str)).all()
        metrics = split_metrics(frame, split, data.pair_data)
        assert set(metrics) == {f"{split}_acc", f"{split}_f1"}
        assert metrics[f"{split}_acc"] == accuracy_score(frame["label"], frame["pred"])
        assert metrics[f"{split}_f1"] == f1_score(frame["label"], frame["pred"], pos_label="1")
        assert all(0.0 <= value <= 1.0 for value in metrics.values())


def test_split_metrics_f1_is_zero_without_positive_predictions():
    pairs = [Pair(i % 2, (str(i), str(i + 1)), "a", "b") for i in range(4)]
    data = mrpc_like(pairs)
    frame = predictions_frame(data, data.test, torch.tensor([[0.9, 0.1]]).repeat(4, 1), torch.arange(4))
    assert split_metrics(frame, "test", data) == {"test_acc": 0.5, "test_f1": 0.0}


# ── determinism ──────────────────────────────────────────────────────────────────────────────


def test_same_seed_same_model(fitted, checkpoint, mrpc_dir, cache_dir, tmp_path):
    model, data, trainer = fitted
    again, again_data, again_trainer = fit(checkpoint, mrpc_dir, cache_dir, tmp_path / "again", seed=7)
    assert again_data.store.cache_hit  # the same features, read back from the cache
    for name in ("dev_acc", "dev_f1"):
        assert float(again_trainer.callback_metrics[name]) == float(trainer.callback_metrics[name])
    for split in ("dev", "test"):
        first = model.predictions(data.loader(split))
        second = again.predictions(again_data.loader(split))
        assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])
    for (name, p), q in zip(model.state_dict().items(), again.state_dict().values()):
        assert torch.equal(p, q), name

    other, other_data, _ = fit(checkpoint, mrpc_dir, cache_dir, tmp_path / "other", seed=8)
    assert not np.array_equal(
        model.predictions(data.loader("dev"))[0].numpy(), other.predictions(other_data.loader("dev"))[0].numpy()
    )


# ── the data module ──────────────────────────────────────────────────────────────────────────


def test_train_fraction_subsamples_the_capped_train_split(mrpc_dir):
    full = PairDataModule(mrpc_dir=str(mrpc_dir), max_pairs=200, cache_dir="none", subsample_seed=0)
    half = PairDataModule(mrpc_dir=str(mrpc_dir), max_pairs=200, train_fraction=0.5, cache_dir="none", subsample_seed=0)
    assert len(half.pairs["train"]) == 100
    assert {p.ids for p in half.pairs["train"]} <= {p.ids for p in full.pairs["train"]}
    assert abs(sum(p.label for p in half.pairs["train"]) - sum(p.label for p in full.pairs["train"]) / 2) <= 1
    assert half.pairs["dev"] == full.pairs["dev"] and half.pairs["test"] == full.pairs["test"]
    again = PairDataModule(
        mrpc_dir=str(mrpc_dir), max_pairs=200, train_fraction=0.5, cache_dir="none", subsample_seed=0
    )
    assert again.pairs["train"] == half.pairs["train"]


@pytest.mark.parametrize("fraction", [0.0, 1.5, 0.001, 0.004])
def test_unusable_train_fraction_is_a_user_error(mrpc_dir, fraction):
    with pytest.raises(UserError, match="--data.train_fraction=") as raised:
        PairDataModule(mrpc_dir=str(mrpc_dir), max_pairs=300, train_fraction=fraction, cache_dir="none")
    assert "\n" not in str(raised.value)
