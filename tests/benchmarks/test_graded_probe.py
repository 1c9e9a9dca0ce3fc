"""The linear probe of a graded task: a ridge regression (strength chosen by cross-validation on train
only) over the same [u; v; |u − v|; u·v] pair features, its outputs a head's (scores on [0, 1]);
checked against sklearn on a toy feature store."""

import numpy as np
from scipy.stats import pearsonr
from sklearn.linear_model import Ridge
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from benchmarks.tasks import linear_probe
from downstream.data.features import FeatureStore
from downstream.run.baselines import RIDGE_GRID
from tests.downstream.test_graded_baselines import TASK, graded_data

LAYERS, DIMENSION = 2, 6


def toy_store(sentences: list[str]) -> FeatureStore:
    """Each token's features at every layer: a seeded vector of its word, so a sentence's vector is
    the mean of its words' and pairs that share words lie close."""
    generator = np.random.default_rng(0)
    words = sorted({word for sentence in sentences for word in sentence.lower().split()})
    vector = dict(zip(words, generator.normal(size=(len(words), DIMENSION))))
    rows = [
        np.repeat(vector[word][None, None, :], LAYERS, axis=1)  # (1, L, D)
        for sentence in sentences
        for word in sentence.lower().split()
    ]
    lengths = np.array([len(sentence.split()) for sentence in sentences])
    return FeatureStore(np.concatenate(rows).astype(np.float16), lengths, "toy", cache_hit=False)  # (tokens, L, D)


def test_a_graded_probe_is_sklearns_ridge_on_the_pair_features_of_a_toy_store(monkeypatch):
    data = graded_data(train=72, evaluation=36)
    store = toy_store(data.sentences())
    monkeypatch.setattr(FeatureStore, "build", classmethod(lambda cls, encoder, sentences, *args, **kwargs: store))
    predicted = linear_probe.probe_probabilities(None, data, None, seed=4)

    vectors = linear_probe.sentence_vectors(store)  # (N, D)
    row = {sentence: index for index, sentence in enumerate(data.sentences())}

    def features(pairs):
        return linear_probe.pair_features(vectors, [row[p.sentence1] for p in pairs], [row[p.sentence2] for p in pairs])

    search = GridSearchCV(
        make_pipeline(StandardScaler(), Ridge()),
        {"ridge__alpha": RIDGE_GRID},
        scoring="r2",
        cv=KFold(5, shuffle=True, random_state=4),
    ).fit(features(data.train), [pair.label / 5 for pair in data.train])  # the scores on [0, 1]
    for split in ("dev", "test"):
        assert predicted[split].shape == (len(data.split(split)),)
        np.testing.assert_allclose(predicted[split], search.predict(features(data.split(split))), atol=1e-10)
    gold = [pair.label for pair in data.test]
    assert pearsonr(TASK.unscaled(predicted["test"]), gold).statistic > 0.5
