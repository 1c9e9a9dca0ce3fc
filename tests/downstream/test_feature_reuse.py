"""Feature stores in a benchmark worker: concurrent builds of the same features compute them once
(a lock per cache folder and key), and inside ``reuse_between_cells`` a file's checksum is verified
once per version of the file and each sentence list tokenised once; outside, every build does both."""

from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import downstream.data.features as features
from downstream.data.features import FeatureStore
from harness.training.worker_reuse import reuse_between_cells

_spec = importlib.util.spec_from_file_location("feature_tests", Path(__file__).with_name("test_features.py"))
feature_tests = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(feature_tests)
SENTENCES, make_encoder = feature_tests.SENTENCES, feature_tests.make_encoder


def slow_calls(encoder, monkeypatch, seconds: float = 0.3) -> list[int]:
    calls = []
    original = encoder.embed_layers

    def slow(sentences):
        calls.append(len(sentences))
        time.sleep(seconds)
        return original(sentences)

    monkeypatch.setattr(encoder, "embed_layers", slow)
    return calls


def test_two_concurrent_builds_of_the_same_features_compute_them_once(tmp_path, monkeypatch, capsys):
    encoder = make_encoder()
    calls = slow_calls(encoder, monkeypatch)
    stores = []

    def build():
        stores.append(FeatureStore.build(encoder, SENTENCES, tmp_path, batch_size=64, progress=False))

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(0.05)  # the second starts while the first computes
    for thread in threads:
        thread.join()
    assert len(calls) == 1  # one batch of 7 sentences, computed by one builder
    assert sorted(store.cache_hit for store in stores) == [False, True]
    np.testing.assert_array_equal(np.asarray(stores[0].features), np.asarray(stores[1].features))
    assert "another process is computing these features; waiting for it" in capsys.readouterr().err
    assert not list(tmp_path.glob(".*.lock"))  # the lock files are not in the cache folder


def test_different_features_do_not_wait_for_each_other(tmp_path, monkeypatch):
    first, second = make_encoder(0, "one"), make_encoder(1, "two")
    for encoder in (first, second):
        slow_calls(encoder, monkeypatch, seconds=0.5)
    started = time.perf_counter()
    threads = [
        threading.Thread(target=FeatureStore.build, args=(encoder, SENTENCES, tmp_path), kwargs={"progress": False})
        for encoder in (first, second)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert time.perf_counter() - started < 0.95  # the two 0.5 s computations overlapped


def counting(monkeypatch, encoder) -> dict[str, int]:
    counts = {"checksum": 0, "tokenize": 0}
    checksum, tokenize = features.checksum, encoder.tokenize

    def counted_checksum(array):
        counts["checksum"] += 1
        return checksum(array)

    def counted_tokenize(sentence):
        counts["tokenize"] += 1
        return tokenize(sentence)

    monkeypatch.setattr(features, "checksum", counted_checksum)
    monkeypatch.setattr(encoder, "tokenize", counted_tokenize)
    return counts


def test_a_worker_verifies_a_cache_file_once_and_tokenises_once(tmp_path, monkeypatch):
    encoder = make_encoder(fingerprint="reuse-1")
    FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False)
    monkeypatch.setattr(features, "_VERIFIED", set())  # as in a worker that did not write the cache itself
    counts = counting(monkeypatch, encoder)
    with reuse_between_cells():
        for _ in range(3):
            assert FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False).cache_hit
    assert counts == {"checksum": 1, "tokenize": len(SENTENCES)}  # the first of the three, then neither
    assert FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False).cache_hit  # outside: both again
    assert counts == {"checksum": 2, "tokenize": 2 * len(SENTENCES)}


def test_a_worker_verifies_a_changed_file_again(tmp_path, monkeypatch, capsys):
    encoder = make_encoder(fingerprint="reuse-2")
    key = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False).key
    with reuse_between_cells():
        assert FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False).cache_hit  # verified once
        path = tmp_path / key / "features.npy"
        data = bytearray(path.read_bytes())
        data[-1] ^= 0x01  # a flipped bit that stays finite
        time.sleep(0.01)
        path.write_bytes(bytes(data))
        store = FeatureStore.build(encoder, SENTENCES, tmp_path, progress=False)
    assert not store.cache_hit and "does not match the checksum" in capsys.readouterr().err


@pytest.mark.parametrize("rows", [[0, 3, 1], [3], [6, 5, 4, 2, 1, 0]])
def test_batches_hold_each_sentence_and_zero_padding(rows):
    store = FeatureStore.build(make_encoder(), SENTENCES, None, progress=False)
    layers, mask = store.batch(rows)
    assert layers.shape[:3] == (3, len(rows), max(int(store.lengths[i]) for i in rows))
    for position, index in enumerate(rows):
        length = int(store.lengths[index])
        assert mask[position].sum() == length and bool(mask[position, :length].all())
        assert np.array_equal(layers[:, position, :length].numpy(), store.get(index).numpy())
        assert not layers[:, position, length:].any()


def test_every_train_fraction_reads_the_features_of_the_whole_data_set(mrpc_dir):
    from downstream.data.pair_datamodule import PairDataModule

    whole = PairDataModule(mrpc_dir=str(mrpc_dir), cache_dir="none", max_pairs=200)
    tenth = PairDataModule(
        mrpc_dir=str(mrpc_dir), cache_dir="none", max_pairs=200, train_fraction=0.1, subsample_seed=3
    )
    assert len(tenth.pairs["train"]) == 20 and len(whole.pairs["train"]) == 200
    assert tenth.sentences() == whole.sentences()  # the same store rows, so the same cache key
    trained = {s for p in tenth.pairs["train"] for s in (p.sentence1, p.sentence2)}
    assert trained < set(tenth.sentences())
