"""The graded baselines: the word-overlap cosine (TF-IDF fitted on train sentences, no label used)
against sklearn and a hand computation, TF-IDF + ridge against sklearn's ridge over the same pair
features, the one registry a task's names index, and a graded summary's baseline rows scored by
scipy on the predictions."""

import numpy as np
import pytest
from scipy.stats import pearsonr, spearmanr
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import Ridge
from sklearn.metrics.pairwise import cosine_similarity
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from benchmarks.tasks.baselines import fit_baseline as fit_benchmark_baseline
from downstream.run import summary_comparisons
from downstream.run.baselines import (
    BASELINES,
    RIDGE_GRID,
    PairFeaturizer,
    fit_baseline,
    overlap_cosine_baseline,
    tfidf_ridge_baseline,
)
from harness.datasets.task import CLASSES, graded
from harness.datasets.types import Pair, PairData
from harness.errors import UserError
from tests.downstream.test_baselines import REWORDINGS, TOPICS

TASK = graded(0, 5)


def graded_pairs(offset: int, count: int) -> list[Pair]:
    """A topic beside a rewording of itself (scores 4–5) or of another topic (scores 0–1.5)."""
    pairs = []
    for index in range(offset, offset + count):
        same = index % 3 != 0
        other = index if same else index + 1 + index % 5  # another topic: 1 to 5 topics on
        sentence2 = REWORDINGS[index % len(REWORDINGS)].format(TOPICS[other % len(TOPICS)])
        score = 4.0 + 0.5 * (index % 3 == 1) + 0.5 * (index % 2) if same else 0.5 * (index % 4)
        pairs.append(Pair(score, (f"p{index}",), TOPICS[index % len(TOPICS)], sentence2))
    return pairs


def graded_data(train: int = 60, evaluation: int = 30) -> PairData:
    pairs = graded_pairs(1000, evaluation)
    return PairData("toy-sts", [], ("id",), graded_pairs(0, train), pairs, pairs, "hash", task=TASK)


def test_the_overlap_cosine_is_sklearns_tfidf_cosine_fitted_on_train_only():
    data = graded_data()
    cosines = overlap_cosine_baseline(data.train, {"dev": data.dev, "test": data.test})
    vectorizer = TfidfVectorizer(token_pattern=r"(?u)\b\w+\b").fit(
        [p.sentence1 for p in data.train] + [p.sentence2 for p in data.train]
    )
    first = vectorizer.transform([p.sentence1 for p in data.test])
    second = vectorizer.transform([p.sentence2 for p in data.test])
    expected = np.array([cosine_similarity(first[k], second[k])[0, 0] for k in range(len(data.test))])
    assert cosines["test"].shape == (len(data.test),)
    np.testing.assert_allclose(cosines["test"], expected, atol=1e-12)
    gold = [pair.label for pair in data.test]
    assert pearsonr(cosines["test"], gold).statistic > 0.8  # the toy scores follow the word overlap


def test_the_overlap_cosine_by_hand():
    train = [Pair(0.0, ("1",), "a b", "a c"), Pair(0.0, ("2",), "b c", "c")]
    cosine = overlap_cosine_baseline(train, {"test": [Pair(0.0, ("3",), "A b", "b d")]})["test"]
    # train sentences: "a b", "b c", "a c", "c" (4 documents); idf = ln(5 / (1 + df)) + 1
    idf = {word: np.log(5 / (1 + df)) + 1 for word, df in {"a": 2, "b": 2, "c": 3}.items()}
    # "A b" → (idf_a, idf_b); "b d" → (0, idf_b) ("d" is no train word): cos = idf_b / |(idf_a, idf_b)|
    assert cosine[0] == pytest.approx(idf["b"] / np.hypot(idf["a"], idf["b"]))
    unseen = overlap_cosine_baseline(train, {"test": [Pair(0.0, ("4",), "x y", "a")]})["test"]
    assert unseen[0] == 0.0  # a sentence of no train word has no vector


def test_tfidf_ridge_is_sklearns_ridge_over_the_tfidf_lr_features():
    data = graded_data()
    predicted = tfidf_ridge_baseline(data.train, {"test": data.test}, seed=2)["test"]
    featurizer = PairFeaturizer().fit(data.train)
    search = GridSearchCV(
        make_pipeline(StandardScaler(), Ridge()),
        {"ridge__alpha": RIDGE_GRID},
        scoring="r2",
        cv=KFold(5, shuffle=True, random_state=2),
    ).fit(featurizer.transform(data.train), [pair.label for pair in data.train])
    np.testing.assert_allclose(predicted, search.predict(featurizer.transform(data.test)), atol=1e-10)
    assert pearsonr(predicted, [pair.label for pair in data.test]).statistic > 0.8
    with pytest.raises(ValueError, match="at least 2 different scores"):
        tfidf_ridge_baseline([Pair(3.0, ("1",), "a", "b")] * 4, {"test": data.test})


def test_one_registry_holds_every_tasks_baselines_and_refuses_another_tasks():
    assert set(BASELINES) == set(CLASSES.baselines) | set(TASK.baselines)
    data = graded_data()
    sets = {"dev": data.dev, "test": data.test}
    cosine = fit_baseline("overlap-cosine", data.train, sets, data)
    np.testing.assert_array_equal(cosine["test"], overlap_cosine_baseline(data.train, sets)["test"])
    ridge = fit_baseline("tfidf-ridge", data.train, sets, data, seed=1)  # as a head's outputs: on [0, 1]
    np.testing.assert_allclose(TASK.unscaled(ridge["test"]), tfidf_ridge_baseline(data.train, sets, 1)["test"])
    with pytest.raises(ValueError, match="tfidf-lr: not a baseline of a graded task"):
        fit_baseline("tfidf-lr", data.train, sets, data)
    with pytest.raises(UserError, match=r"^baseline majority: not one of toy-sts's \(overlap-cosine, tfidf-ridge"):
        fit_benchmark_baseline("majority", data)
    assert fit_benchmark_baseline("overlap-cosine", data)["dev"].shape == (len(data.dev),)


def test_a_graded_summary_scores_the_tasks_baselines_with_scipy():
    data = graded_data()
    pairs = {"train": data.train, "dev": data.dev, "test": data.test}
    scores = summary_comparisons.baseline_scores(data, pairs, None)
    assert list(scores) == ["overlap-cosine", "tfidf-ridge"]
    gold = [pair.label for pair in data.test]
    cosines = overlap_cosine_baseline(data.train, {"test": data.test})["test"]
    assert scores["overlap-cosine"] == {
        "test_pearson": pytest.approx(pearsonr(cosines, gold).statistic, abs=1e-12),
        "test_spearman": pytest.approx(spearmanr(cosines, gold).statistic, abs=1e-12),
    }
    lines = summary_comparisons.baseline_lines(scores, TASK)
    pearson, spearman = 100 * scores["overlap-cosine"]["test_pearson"], 100 * scores["overlap-cosine"]["test_spearman"]
    assert lines[0].endswith(
        f" Pearson r {pearson:.1f}  Spearman ρ {spearman:.1f}   word-overlap cosine "
        "(cosine of the sentences' TF-IDF vectors, no training)"
    )
    assert "TF-IDF + ridge" in lines[1]
    assert summary_comparisons.baseline_lines(None, TASK) == []


def test_a_graded_baseline_that_cannot_fit_is_a_reason_in_the_summary(monkeypatch):
    data = graded_data()
    flat = [Pair(2.0, pair.ids, pair.sentence1, pair.sentence2) for pair in data.train]
    scores = summary_comparisons.baseline_scores(data, {"train": flat, "test": data.test}, None)
    assert "at least 2 different scores" in scores["tfidf-ridge"]
    assert summary_comparisons.baseline_lines(scores, TASK)[1].endswith(
        "TF-IDF + ridge: the training set needs at least 2 different scores"
    )
    monkeypatch.setattr(summary_comparisons, "TFIDF_MAX_TRAIN_PAIRS", 10)  # the featurizer's bound holds for ridge
    bounded = summary_comparisons.baseline_scores(data, {"train": data.train, "test": data.test}, None)
    assert "not computed here above 10 train pairs" in bounded["tfidf-ridge"]
    assert isinstance(bounded["overlap-cosine"], dict)


def test_a_fraction_of_a_graded_train_split_is_the_pairs_a_finetune_cell_of_it_trains_on():
    from downstream.data.pair_datamodule import subsample

    data = graded_data(train=90)
    fitted = fit_benchmark_baseline("tfidf-ridge@0.5", data, 0.5, seed=3)["test"]
    expected = fit_baseline("tfidf-ridge", subsample(data.train, 0.5, 3, TASK), {"test": data.test}, data, seed=3)
    np.testing.assert_array_equal(fitted, expected["test"])
