"""Control systems that run through the same splits as the pretrained encoders, fitted on train only
(no evaluation pair is seen in fitting or selection), one registry :data:`BASELINES` keyed by the
names a task lists (``Task.baselines``). A benchmark's baseline cells (``benchmarks.tasks.cells``) and
every finetune summary (``downstream.run.summary_comparisons``) score them with the finetune runs'
own code, so a baseline's ``pred`` follows the same rule as a model's.

Tasks of classes (any number of labels): (N, C) class probabilities per evaluation split, columns
in class-id order (2 labels: P(positive) >= 0.5 predicts it; more: the most probable).

- ``majority_baseline``: the class frequencies of train for every pair, so it predicts the
  majority class (the collapse rate).
- ``tfidf_lr_baseline``: TF-IDF similarity and lexical-overlap features of a pair, scored by a
  (multinomial) logistic regression whose L2 strength is chosen by stratified cross-validation on
  train only.

Graded tasks: (N,) scores per evaluation split (on the gold scale, or a cosine); the registry hands
them on as a model's are, mapped onto [0, 1].

- ``overlap_cosine_baseline``: the cosine of the two sentences' word TF-IDF vectors, the vectorizer
  fitted on train sentences, no label used: the unsupervised word-overlap floor of the STS literature.
- ``tfidf_ridge_baseline``: the features of ``tfidf_lr_baseline`` scored by a ridge regression on the
  gold score, its L2 strength chosen by cross-validation on train only.

Pairs are duck-typed: any object with attributes ``label`` (the class id or the gold score),
``sentence1``, ``sentence2``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV, KFold, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

REGULARISATION_GRID = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]  # logistic regression's inverse strength C
RIDGE_GRID = [1.0 / strength for strength in REGULARISATION_GRID]  # ridge's strength alpha, the same span
CROSS_VALIDATION_FOLDS = 5

_WORD_PATTERN = re.compile(r"\w+")
_NUMBER_PATTERN = re.compile(r"\d+(?:[.,]\d+)*")


def _labels(pairs: Sequence) -> np.ndarray:
    return np.asarray([int(pair.label) for pair in pairs], dtype=int)


def majority_baseline(
    train: Sequence, evaluation_sets: dict[str, Sequence], num_classes: int = 2
) -> dict[str, np.ndarray]:
    """The class frequencies of ``train`` as every pair's probabilities.

    Returns:
        ``{split_name: (N, num_classes) probabilities}``; with 2 classes the positive class is
        predicted when its train rate is >= 0.5 (a tie included), with more the most frequent class.
    """
    if len(train) == 0:
        raise ValueError("majority_baseline: the training set is empty")
    prior = np.bincount(_labels(train), minlength=num_classes) / len(train)  # (C,)
    return {name: np.tile(prior, (len(pairs), 1)) for name, pairs in evaluation_sets.items()}


def _words(sentence: str) -> list[str]:
    return _WORD_PATTERN.findall(sentence.lower())


def _jaccard(first: set, second: set) -> float:
    union = first | second
    return len(first & second) / len(union) if union else 1.0


def _row_cosines(first, second) -> np.ndarray:
    """Cosine of matching rows of two L2-normalised sparse matrices."""
    return np.asarray(first.multiply(second).sum(axis=1)).ravel()


class PairFeaturizer:
    """Dense similarity features of a sentence pair; vocabularies fitted on train sentences only.

    Features per pair: cosine of word (1-2 gram) TF-IDF vectors, cosine of character (2-5 gram)
    TF-IDF vectors, Jaccard of word sets, Jaccard of number sets, whether the two sentences
    mention different numbers, length difference ratio, and the containment of the shorter
    sentence's words in the longer one.
    """

    feature_names = [
        "word_tfidf_cosine",
        "char_tfidf_cosine",
        "word_jaccard",
        "number_jaccard",
        "number_mismatch",
        "length_difference_ratio",
        "word_containment",
    ]

    def __init__(self) -> None:
        self.word_vectorizer = TfidfVectorizer(
            lowercase=True, ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"(?u)\b\w+\b"
        )
        self.char_vectorizer = TfidfVectorizer(
            lowercase=True, analyzer="char_wb", ngram_range=(2, 5), sublinear_tf=True
        )

    def fit(self, pairs: Sequence) -> PairFeaturizer:
        """Fit both vectorizers on the sentences of ``pairs``. Returns: self."""
        sentences = [pair.sentence1 for pair in pairs] + [pair.sentence2 for pair in pairs]
        self.word_vectorizer.fit(sentences)
        self.char_vectorizer.fit(sentences)
        return self

    def transform(self, pairs: Sequence) -> np.ndarray:
        """Featurize ``pairs``.

        Returns:
            (N, F) float array, F = ``len(feature_names)``.
        """
        first = [pair.sentence1 for pair in pairs]
        second = [pair.sentence2 for pair in pairs]
        columns = [
            _row_cosines(self.word_vectorizer.transform(first), self.word_vectorizer.transform(second)),
            _row_cosines(self.char_vectorizer.transform(first), self.char_vectorizer.transform(second)),
        ]
        lexical = []
        for sentence1, sentence2 in zip(first, second):
            words1, words2 = set(_words(sentence1)), set(_words(sentence2))
            numbers1 = set(_NUMBER_PATTERN.findall(sentence1))
            numbers2 = set(_NUMBER_PATTERN.findall(sentence2))
            length1, length2 = len(_words(sentence1)), len(_words(sentence2))
            shorter = min(len(words1), len(words2))
            lexical.append(
                [
                    _jaccard(words1, words2),
                    _jaccard(numbers1, numbers2),
                    float(numbers1 != numbers2),
                    abs(length1 - length2) / max(length1, length2, 1),
                    len(words1 & words2) / shorter if shorter else 1.0,
                ]
            )
        lexical_array = np.asarray(lexical, dtype=float).reshape(len(pairs), 5)
        return np.column_stack(columns + [lexical_array])


def tfidf_lr_baseline(
    train: Sequence, evaluation_sets: dict[str, Sequence], num_classes: int = 2, seed: int = 0
) -> dict[str, np.ndarray]:
    """TF-IDF similarity + lexical overlap features scored by logistic regression.

    Vectorizers are fitted on train sentences only; the inverse L2 strength ``C`` is chosen from
    ``REGULARISATION_GRID`` by stratified ``CROSS_VALIDATION_FOLDS``-fold cross-validation
    (accuracy) on train, shuffled with ``seed``. No evaluation pair is seen in fitting or selection.

    Returns:
        ``{split_name: (N, num_classes) probabilities}`` (0 for a class train lacks).
    """
    labels = _labels(train)
    if len(np.unique(labels)) < 2:
        raise ValueError("tfidf_lr_baseline: the training set needs at least 2 classes")
    featurizer = PairFeaturizer().fit(train)
    model = cross_validated_logistic(featurizer.transform(train), labels, seed)
    return {
        name: class_probabilities(model, featurizer.transform(pairs), num_classes)
        for name, pairs in evaluation_sets.items()
    }


def cross_validated_logistic(features: np.ndarray, labels: np.ndarray, seed: int = 0):
    """Standardised (N, F) ``features`` → logistic regression, its inverse L2 strength ``C`` chosen
    from ``REGULARISATION_GRID`` by stratified ``CROSS_VALIDATION_FOLDS``-fold cross-validation
    (accuracy) on these pairs only, shuffled with ``seed``. Returns: the refitted best pipeline."""
    present = np.unique(labels)
    folds = StratifiedKFold(
        n_splits=min(CROSS_VALIDATION_FOLDS, int(np.bincount(labels)[present].min())), shuffle=True, random_state=seed
    )
    search = GridSearchCV(
        make_pipeline(StandardScaler(), LogisticRegression(solver="lbfgs", max_iter=1000, random_state=seed)),
        param_grid={"logisticregression__C": REGULARISATION_GRID},
        scoring="accuracy",
        cv=folds,
    )
    search.fit(features, labels)
    return search.best_estimator_


def class_probabilities(model, features: np.ndarray, num_classes: int) -> np.ndarray:
    """(N, C) probabilities in class-id order from a fitted classifier (0 for a class train lacks)."""
    scores = np.zeros((len(features), num_classes))  # (N, C)
    scores[:, model.classes_] = model.predict_proba(features)
    return scores


def _scores(pairs: Sequence) -> np.ndarray:
    return np.asarray([float(pair.label) for pair in pairs], dtype=float)


def overlap_cosine_baseline(train: Sequence, evaluation_sets: dict[str, Sequence]) -> dict[str, np.ndarray]:
    """The cosine of each pair's word TF-IDF vectors (unigrams, lower-cased), the vocabulary and
    inverse document frequencies from ``train``'s sentences only; no label is used.

    Returns:
        ``{split_name: (N,) cosines}`` in [0, 1] (0 where a sentence has no train word).
    """
    if len(train) == 0:
        raise ValueError("overlap_cosine_baseline: the training set is empty")
    vectorizer = TfidfVectorizer(lowercase=True, token_pattern=r"(?u)\b\w+\b")
    vectorizer.fit([pair.sentence1 for pair in train] + [pair.sentence2 for pair in train])
    return {
        name: _row_cosines(
            vectorizer.transform([pair.sentence1 for pair in pairs]),
            vectorizer.transform([pair.sentence2 for pair in pairs]),
        )
        for name, pairs in evaluation_sets.items()
    }


def tfidf_ridge_baseline(train: Sequence, evaluation_sets: dict[str, Sequence], seed: int = 0) -> dict[str, np.ndarray]:
    """The :class:`PairFeaturizer` features of ``tfidf_lr_baseline`` (vectorizers fitted on train
    sentences) scored by a ridge regression on the gold score (:func:`cross_validated_ridge`).

    Returns:
        ``{split_name: (N,) predicted scores}`` on the gold scores' scale (not clipped to the range).
    """
    scores = _scores(train)
    if len(train) < 2 or np.ptp(scores) == 0:
        raise ValueError("tfidf_ridge_baseline: the training set needs at least 2 different scores")
    featurizer = PairFeaturizer().fit(train)
    model = cross_validated_ridge(featurizer.transform(train), scores, seed)
    return {name: model.predict(featurizer.transform(pairs)) for name, pairs in evaluation_sets.items()}


def cross_validated_ridge(features: np.ndarray, targets: np.ndarray, seed: int = 0):
    """Standardised (N, F) ``features`` → ridge regression on (N,) ``targets``, its L2 strength
    ``alpha`` chosen from ``RIDGE_GRID`` by ``CROSS_VALIDATION_FOLDS``-fold cross-validation (R², the
    squared error) on these pairs only, shuffled with ``seed``. Returns: the refitted best pipeline."""
    folds = KFold(n_splits=min(CROSS_VALIDATION_FOLDS, len(targets)), shuffle=True, random_state=seed)
    search = GridSearchCV(
        make_pipeline(StandardScaler(), Ridge()),
        param_grid={"ridge__alpha": RIDGE_GRID},
        scoring="r2",
        cv=folds,
    )
    search.fit(features, targets)
    return search.best_estimator_


@dataclass(frozen=True)
class Baseline:
    """One control system as summaries and benchmarks name it. ``fit(train, evaluation_sets, data,
    seed)`` returns per split what a model's predictions are and ``predictions_frame`` takes: (N, C)
    class probabilities for a task of classes, (N,) scores on [0, 1] for a graded one (the task's
    range mapped by ``Task.scaled``); ``data``: anything with ``num_classes`` and ``task``."""

    title: str  # its row in a summary
    note: str  # what it is, in a few words
    fit: Callable[..., dict[str, np.ndarray]]


def _ridge_on_unit_scale(train: Sequence, evaluation_sets: dict[str, Sequence], data, seed: int):
    """:func:`tfidf_ridge_baseline`'s scores mapped from the task's range onto [0, 1]."""
    predicted = tfidf_ridge_baseline(train, evaluation_sets, seed)
    return {name: data.task.scaled(scores) for name, scores in predicted.items()}


BASELINES: dict[str, Baseline] = {
    "majority": Baseline(
        "majority class",
        "every pair: the most frequent train label",
        lambda train, evaluation_sets, data, seed: majority_baseline(train, evaluation_sets, data.num_classes),
    ),
    "tfidf-lr": Baseline(
        "TF-IDF + LR",
        "word overlap + logistic regression, same train pairs",
        lambda train, evaluation_sets, data, seed: tfidf_lr_baseline(train, evaluation_sets, data.num_classes, seed),
    ),
    "overlap-cosine": Baseline(  # a cosine in [0, 1] is its own unit-scale score: 0 → low, 1 → high
        "word-overlap cosine",
        "cosine of the sentences' TF-IDF vectors, no training",
        lambda train, evaluation_sets, data, seed: overlap_cosine_baseline(train, evaluation_sets),
    ),
    "tfidf-ridge": Baseline(
        "TF-IDF + ridge", "word overlap + ridge regression, same train pairs", _ridge_on_unit_scale
    ),
}


def fit_baseline(name: str, train: Sequence, evaluation_sets: dict[str, Sequence], data, seed: int = 0):
    """Fit the baseline ``name`` of ``data``'s task (one of ``data.task.baselines``) on ``train``.

    Returns:
        ``{split: (N, C) probabilities}`` (classes) or ``{split: (N,) scores on [0, 1]}`` (graded).
    """
    if name not in data.task.baselines:
        raise ValueError(f"{name}: not a baseline of a {data.task.target} task ({', '.join(data.task.baselines)})")
    return BASELINES[name].fit(train, evaluation_sets, data, seed)
