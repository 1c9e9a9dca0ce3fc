"""`--model.standardize`: frozen features z-scored per layer and dimension with statistics of the
training pairs' tokens only, zero at padding, kept in the checkpoint, the same for both arms."""

import numpy as np
import pytest
import torch

from downstream.data.features import FeatureStore
from downstream.model.pair_classifier import PairClassifier
from downstream.model.standardization import FeatureStandardizer
from downstream.run.cli import pair_classifier
from downstream.run.lit_pair import LitPairClassifier
from pretrain.encoders.loading import load_encoder
from tests.downstream.test_lit_pair import HEAD, checkpoint, fit, make_data, make_trainer, mrpc_dir


def synthetic_store(lengths: list[int], layers: int = 3, dim: int = 5, seed: int = 0) -> FeatureStore:
    rng = np.random.default_rng(seed)
    features = rng.normal(4.0, 3.0, size=(sum(lengths), layers, dim)).astype(np.float16)  # (total, L, D)
    features[:, 1, -1] = 0.0  # a zero-padded (constant) dimension, as a narrower AWD-LSTM layer has
    return FeatureStore(features, np.array(lengths), key="synthetic", cache_hit=False)


def test_statistics_are_those_of_the_chosen_sentences_tokens_only():
    store = synthetic_store([3, 0, 5, 2, 4])
    standardizer = FeatureStandardizer(3, 5)
    standardizer.fit(store, [2, 0, 2, 1])  # repeated and empty rows count once / not at all
    tokens = np.concatenate([store.features[0:3], store.features[3:8]]).astype(np.float64)  # rows 0 and 2
    np.testing.assert_allclose(standardizer.mean.numpy(), tokens.mean(axis=0), rtol=1e-5, atol=1e-5)
    std = tokens.std(axis=0)
    expected = np.where(std > 1e-6, 1 / np.maximum(std, 1e-6), 1.0)
    np.testing.assert_allclose(standardizer.scale.numpy(), expected, rtol=1e-5)
    assert standardizer.scale[1, -1] == 1.0 and standardizer.mean[1, -1] == 0.0  # constant: centred, not divided


def test_standardised_training_tokens_have_zero_mean_unit_variance_and_padding_stays_zero():
    store = synthetic_store([3, 5, 2, 4])
    standardizer = FeatureStandardizer(3, 5)
    standardizer.fit(store, [0, 1, 2, 3])
    layers, mask = store.batch([0, 1, 2, 3])  # (L, B, T, D), (B, T)
    out = standardizer(layers, mask)
    real = out.permute(1, 2, 0, 3)[mask]  # (N, L, D)
    varying = real[:, :, :-1]
    assert torch.allclose(varying.mean(0), torch.zeros(3, 4), atol=1e-3)
    assert torch.allclose(varying.std(0, unbiased=False), torch.ones(3, 4), atol=1e-3)
    assert torch.equal(out.permute(1, 2, 0, 3)[~mask], torch.zeros(int((~mask).sum()), 3, 5))
    # padding invariance: a sentence standardised alone equals it inside the padded batch
    alone, alone_mask = store.batch([2])
    assert torch.allclose(standardizer(alone, alone_mask)[:, 0, :2], out[:, 2, :2])


def test_using_it_unfitted_is_an_error():
    store = synthetic_store([2])
    with pytest.raises(RuntimeError, match="never computed"):
        FeatureStandardizer(3, 5)(*store.batch([0]))


@pytest.mark.parametrize("finetune, head", [("full", "pool-mlp"), ("gradual", "attn")])
def test_only_frozen_features_can_be_standardised(checkpoint, finetune, head):
    encoder = load_encoder(str(checkpoint))
    with pytest.raises(ValueError, match="standardize=true: needs finetune=frozen"):
        PairClassifier(encoder, "scalar", head, finetune, standardize=True)


def test_a_fit_takes_statistics_from_its_training_subset_and_its_checkpoint_keeps_them(checkpoint, mrpc_dir, tmp_path):
    model, data, trainer = fit(checkpoint, mrpc_dir, tmp_path / "features", tmp_path / "fit", seed=3, standardize=True)
    train_rows = data.train_rows()
    row = {sentence: index for index, sentence in enumerate(data.sentences())}
    assert train_rows == sorted({row[s] for p in data.pairs["train"] for s in (p.sentence1, p.sentence2)})
    assert len(train_rows) < len(data.store)  # the store also holds dev and test sentences: not taken
    expected = FeatureStandardizer(data.store.num_layers, data.store.dim)
    expected.fit(data.store, train_rows)
    standardizer = model.classifier.standardizer
    assert bool(standardizer.fitted)
    assert torch.equal(standardizer.mean, expected.mean) and torch.equal(standardizer.scale, expected.scale)

    path = tmp_path / "model.ckpt"
    trainer.save_checkpoint(path)
    state = torch.load(path, map_location="cpu", weights_only=True)["state_dict"]
    assert torch.equal(state["classifier.standardizer.mean"], expected.mean)
    reloaded = pair_classifier(encoder=str(checkpoint), **HEAD, standardize=True)
    reloaded.load_state_dict(state)
    assert torch.equal(reloaded.predictions(data.loader("dev"))[0], model.predictions(data.loader("dev"))[0])
    # a further fit of the reloaded model keeps the statistics it was trained with
    make_trainer(tmp_path / "again", epochs=1).fit(reloaded, datamodule=make_data(reloaded, mrpc_dir, tmp_path / "f2"))
    assert torch.equal(reloaded.classifier.standardizer.mean, expected.mean)


def test_the_random_twin_gets_the_same_transform(checkpoint, mrpc_dir, tmp_path):
    torch.manual_seed(0)
    twin = pair_classifier(encoder="random", random_like=str(checkpoint), **HEAD, standardize=True)
    assert isinstance(twin, LitPairClassifier) and twin.classifier.standardizer is not None
    data = make_data(twin, mrpc_dir, tmp_path / "features")
    make_trainer(tmp_path / "fit", epochs=1).fit(twin, datamodule=data)
    layers, mask = data.store.batch(data.train_rows())
    out = twin.classifier.standardizer(layers, mask).permute(1, 2, 0, 3)[mask]  # (N, L, D)
    assert torch.allclose(out.mean(0), torch.zeros_like(out[0]), atol=1e-3)
