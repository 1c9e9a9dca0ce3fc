"""Feature cache: equality with the encoder, cache hits and misses, atomic writes, corruption, batching."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from downstream.data.features import FeatureStore
from harness.errors import UserError
from pretrain.encoders.loading import random_encoder
from pretrain.encoders.protocol import Encoder
from pretrain.models.bilm import BiLM, BiLMConfig
from pretrain.tokenization.words import Tokenizer

SENTENCES = [
    "He said yes to the plan.",
    "Shares fell 3 percent on Monday after the report.",
    "Prices rose.",
    "",
    "The company said the deal would close next year , pending approval .",
    "Yes.",
    "He agreed to the plan because prices rose sharply.",
]


def make_encoder(seed: int = 0, fingerprint: str = "abc") -> Encoder:
    torch.manual_seed(seed)
    tokenizer = Tokenizer.build(SENTENCES)
    config = {
        "vocab_size": len(tokenizer),
        "hidden_size": 8,
        "num_layers": 2,
        "dropout": 0.0,
        "adaptive_cutoffs": [2000, 8000],
    }
    model = BiLM(BiLMConfig(len(tokenizer), hidden_size=8, num_layers=2, dropout=0.0))
    return Encoder(model, tokenizer, family="elmo", config=config, fingerprint=fingerprint, source="test")


def count_calls(encoder: Encoder, monkeypatch, fail_on_call: int | None = None) -> list[int]:
    """Wrap ``encoder.embed_layers``; returns a list that grows by one per call."""
    calls = []
    original = encoder.embed_layers

    def wrapped(sentences):
        calls.append(len(sentences))
        if fail_on_call is not None and len(calls) == fail_on_call:
            raise RuntimeError("simulated crash")
        return original(sentences)

    monkeypatch.setattr(encoder, "embed_layers", wrapped)
    return calls


def assert_matches_encoder(store: FeatureStore, encoder: Encoder) -> None:
    assert len(store) == len(SENTENCES)
    assert (store.num_layers, store.dim) == (encoder.num_layers, encoder.dim) == (3, 16)
    for index, sentence in enumerate(SENTENCES):
        expected, mask = encoder.embed_layers([sentence])  # (L, 1, T, D)
        expected = expected[:, 0, : int(mask.sum())]  # (L, T_i, D)
        got = store.get(index)
        assert got.dtype == torch.float32 and got.shape == expected.shape
        scale = max(1.0, float(expected.abs().amax())) if expected.numel() else 1.0
        torch.testing.assert_close(got, expected, atol=2e-3 * scale, rtol=0)


def entries(cache_dir: Path) -> list[str]:
    return sorted(path.name for path in cache_dir.iterdir()) if cache_dir.exists() else []


@pytest.mark.parametrize("on_disk", [False, True])
def test_store_matches_encoder_per_sentence(tmp_path, on_disk):
    encoder = make_encoder()
    store = FeatureStore.build(
        encoder, SENTENCES, tmp_path / "cache" if on_disk else None, batch_size=3, progress=False
    )
    assert not store.cache_hit
    assert_matches_encoder(store, encoder)
    assert store.features.dtype == np.float16
    assert store.features.shape == (sum(len(encoder.tokenize(s)) for s in SENTENCES), 3, 16)


def test_batch_size_does_not_change_features(tmp_path):
    encoder = make_encoder()
    one = FeatureStore.build(encoder, SENTENCES, None, batch_size=1, progress=False)
    many = FeatureStore.build(encoder, SENTENCES, None, batch_size=64, progress=False)
    for index in range(len(SENTENCES)):
        torch.testing.assert_close(one.get(index), many.get(index), atol=1e-3, rtol=0)


def test_cache_hit_skips_encoder(tmp_path, monkeypatch):
    encoder = make_encoder()
    first = FeatureStore.build(encoder, SENTENCES, tmp_path, batch_size=3, progress=False)
    calls = count_calls(encoder, monkeypatch)
    second = FeatureStore.build(encoder, SENTENCES, tmp_path, batch_size=3, progress=False)
    assert calls == []
    assert second.cache_hit and not first.cache_hit
    assert second.key == first.key and entries(tmp_path) == [first.key]
    assert isinstance(second.features, np.memmap)
    np.testing.assert_array_equal(np.asarray(second.features), np.asarray(first.features))
    for index in range(len(SENTENCES)):
        assert torch.equal(second.get(index), first.get(index))


def test_memmap_is_read_only(tmp_path):
    FeatureStore.build(make_encoder(), SENTENCES, tmp_path, progress=False)
    store = FeatureStore.build(make_encoder(), SENTENCES, tmp_path, progress=False)
    assert store.cache_hit
    with pytest.raises(ValueError):
        store.features[0, 0, 0] = 1.0
    copy = store.get(0)
    copy += 1  # get() returns a copy: the cache is untouched
    assert not torch.equal(copy, store.get(0))


@pytest.mark.parametrize("change", ["fingerprint", "random_encoder", "sentences", "dtype"])
def test_changed_inputs_miss_and_recompute(tmp_path, monkeypatch, change):
    encoder = make_encoder()
    first = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False)
    sentences, dtype = list(SENTENCES), torch.float16
    if change == "fingerprint":
        other = make_encoder(fingerprint="def")
    elif change == "random_encoder":
        other = random_encoder(encoder, seed=1)
    else:
        other = make_encoder()
        if change == "sentences":
            sentences = sentences[::-1]
        else:
            dtype = torch.float32
    calls = count_calls(other, monkeypatch)
    second = FeatureStore.build(other, sentences, tmp_path, dtype=dtype, progress=False)
    assert calls and not second.cache_hit
    assert second.key != first.key
    assert entries(tmp_path) == sorted([first.key, second.key])
    if change == "random_encoder":
        assert not torch.allclose(second.get(0), first.get(0))
    if change == "sentences":
        torch.testing.assert_close(second.get(0), first.get(len(SENTENCES) - 1), atol=1e-3, rtol=0)


def test_crash_mid_write_leaves_nothing(tmp_path, monkeypatch):
    encoder = make_encoder()
    calls = count_calls(encoder, monkeypatch, fail_on_call=2)
    with pytest.raises(RuntimeError, match="simulated crash"):
        FeatureStore.build(encoder, SENTENCES, tmp_path, batch_size=2, progress=False)
    assert len(calls) == 2
    assert entries(tmp_path) == []  # no <key> dir, no .<key>.tmp-<pid> dir
    monkeypatch.undo()
    store = FeatureStore.build(encoder, SENTENCES, tmp_path, batch_size=2, progress=False)
    assert not store.cache_hit and entries(tmp_path) == [store.key]
    assert_matches_encoder(store, encoder)


@pytest.mark.parametrize(
    "damage", ["delete_meta", "truncate_features", "wrong_meta", "garbage_meta", "delete_features"]
)
def test_corrupt_cache_is_rebuilt(tmp_path, monkeypatch, damage):
    encoder = make_encoder()
    key = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False).key
    folder = tmp_path / key
    if damage == "delete_meta":
        (folder / "meta.json").unlink()
    elif damage == "truncate_features":
        data = (folder / "features.npy").read_bytes()
        (folder / "features.npy").write_bytes(data[: len(data) // 2])
    elif damage == "wrong_meta":
        meta = json.loads((folder / "meta.json").read_text())
        meta["n_sentences"] += 1
        (folder / "meta.json").write_text(json.dumps(meta))
    elif damage == "garbage_meta":
        (folder / "meta.json").write_text("{not json")
    else:
        (folder / "features.npy").unlink()
    calls = count_calls(encoder, monkeypatch)
    store = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False)
    assert calls and not store.cache_hit
    assert entries(tmp_path) == [key]
    assert_matches_encoder(store, encoder)
    monkeypatch.undo()
    assert FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False).cache_hit


def test_batch_shapes_padding_and_empty_sentence():
    encoder = make_encoder()
    store = FeatureStore.build(encoder, SENTENCES, None, progress=False)
    indices = [2, 3, 1, 5]  # "Prices rose.", "", the longest of these, "Yes."
    lengths = [len(encoder.tokenize(SENTENCES[i])) for i in indices]
    assert lengths[1] == 0
    layers, mask = store.batch(indices)
    assert layers.shape == (3, 4, max(lengths), 16) and layers.dtype == torch.float32
    assert mask.dtype == torch.bool and mask.tolist() == [[t < n for t in range(max(lengths))] for n in lengths]
    assert not mask[1].any()
    assert torch.all(layers.permute(1, 2, 0, 3)[~mask] == 0)  # (B, T, L, D) at padding
    for row, index in enumerate(indices):
        assert torch.equal(layers[:, row, : lengths[row]], store.get(index))
    assert store.get(3).shape == (3, 0, 16)
    empty_layers, empty_mask = store.batch([3])
    assert empty_layers.shape == (3, 1, 0, 16) and empty_mask.shape == (1, 0)
    with pytest.raises(IndexError):
        store.batch([len(SENTENCES)])


def test_only_empty_sentences_on_disk(tmp_path):
    store = FeatureStore.build(make_encoder(), ["", ""], tmp_path, progress=False)
    assert len(store) == 2 and store.features.shape == (0, 3, 16)
    assert FeatureStore.build(make_encoder(), ["", ""], tmp_path, progress=False).cache_hit


def test_a_cache_holding_nan_is_rebuilt_once(tmp_path, monkeypatch, capsys):
    """A damaged cache of the right size and shape passes every structural check; its bytes must
    be checked too (the checksum), or a run trains on NaN (train_loss nan, test accuracy at chance)."""
    encoder = make_encoder()
    key = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False).key
    features = np.lib.format.open_memmap(tmp_path / key / "features.npy", mode="r+")
    features[3, 1, :4] = np.nan
    features[-1, 0, 0] = np.inf
    features.flush()
    del features
    calls = count_calls(encoder, monkeypatch)
    store = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False)
    assert calls and not store.cache_hit
    assert (
        "does not match the checksum in its meta.json (its bytes changed on disk): rebuilding it"
        in capsys.readouterr().err
    )
    assert entries(tmp_path) == [key]
    assert_matches_encoder(store, encoder)
    assert np.isfinite(np.asarray(store.features)).all()


def test_a_mismatch_that_survives_a_rebuild_is_a_user_error(tmp_path, monkeypatch):
    encoder = make_encoder()
    key = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False).key
    original = np.lib.format.open_memmap

    def poisoned(path, mode="r", *args, **kwargs):  # a disk that returns NaN whatever was written
        array = original(path, mode, *args, **kwargs)
        return np.full_like(np.asarray(array), np.nan) if mode == "r" else array

    monkeypatch.setattr(np.lib.format, "open_memmap", poisoned)
    with pytest.raises(UserError) as raised:
        FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False)
    message = str(raised.value)
    assert "\n" not in message and str(tmp_path / key) in message
    assert "still does not match its checksum after a rebuild" in message


@pytest.mark.parametrize("on_disk", [False, True])
def test_an_encoder_that_gives_nan_is_a_user_error(tmp_path, on_disk):
    encoder = make_encoder()
    with torch.no_grad():
        encoder.model.embedding.weight[5:] = float("nan")
    with pytest.raises(UserError) as raised:
        FeatureStore.build(encoder, SENTENCES, tmp_path / "cache" if on_disk else None, progress=False)
    message = str(raised.value)
    assert "\n" not in message and message.startswith("encoder test gives NaN/inf features for sentence")
    assert not (tmp_path / "cache").exists() or entries(tmp_path / "cache") == []
