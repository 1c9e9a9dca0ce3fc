"""Control systems that run through the same MRPC splits as the pretrained encoders.

Two controls, both returning predictions in the project's contract format
(columns ``id1, id2, label, prob, pred``; ``prob`` = P(paraphrase), ``pred = int(prob >= 0.5)``):

- ``majority_baseline``: always the majority class of train (the collapse rate).
- ``tfidf_lr_baseline``: TF-IDF similarity and lexical-overlap features of a pair, scored by a
  logistic regression whose L2 strength is chosen by stratified cross-validation on train only.

Pairs are duck-typed: any object with attributes ``label, id1, id2, sentence1, sentence2``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pandas as pd
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import accuracy_score, f1_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

PREDICTION_COLUMNS = ["id1", "id2", "label", "prob", "pred"]
REGULARISATION_GRID = [0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0]
CROSS_VALIDATION_FOLDS = 5

_WORD_PATTERN = re.compile(r"\w+")
_NUMBER_PATTERN = re.compile(r"\d+(?:[.,]\d+)*")


def _labels(pairs: Sequence) -> np.ndarray:
    return np.asarray([int(pair.label) for pair in pairs], dtype=int)


def _predictions_frame(pairs: Sequence, probabilities: np.ndarray) -> pd.DataFrame:
    """Build the contract predictions table for ``pairs`` given P(paraphrase) per pair."""
    probabilities = np.asarray(probabilities, dtype=float)
    return pd.DataFrame(
        {
            "id1": [pair.id1 for pair in pairs],
            "id2": [pair.id2 for pair in pairs],
            "label": _labels(pairs),
            "prob": probabilities,
            "pred": (probabilities >= 0.5).astype(int),
        },
        columns=PREDICTION_COLUMNS,
    )


def metrics_from_predictions(predictions: pd.DataFrame) -> dict[str, float]:
    """Accuracy and F1 of a predictions table, aware of its label set.

    Labels and predictions within {0, 1}: F1 of the positive class 1 (MRPC's paraphrase). Any other
    label set (k > 2 classes, or names): macro F1 over the labels seen in ``label`` or ``pred``.

    Returns:
        ``{"acc": float, "f1": float}``, both fractions in [0, 1].
    """
    if len(predictions) == 0:
        raise ValueError("metrics_from_predictions: no predictions")
    labels, preds = predictions["label"], predictions["pred"]
    numeric_labels, numeric_preds = pd.to_numeric(labels, errors="coerce"), pd.to_numeric(preds, errors="coerce")
    if numeric_labels.notna().all() and numeric_preds.notna().all():  # numbers, also when read back as text
        labels, preds = numeric_labels.to_numpy(float), numeric_preds.to_numpy(float)
    else:
        labels, preds = labels.astype(str).to_numpy(object), preds.astype(str).to_numpy(object)
    classes = sorted(set(labels.tolist()) | set(preds.tolist()))
    if set(classes) <= {0, 1}:
        f1 = f1_score(labels, preds, labels=[0.0, 1.0], pos_label=1.0, zero_division=0.0)
    else:
        f1 = f1_score(labels, preds, labels=classes, average="macro", zero_division=0.0)
    return {"acc": float(accuracy_score(labels, preds)), "f1": float(f1)}


def majority_baseline(train: Sequence, evaluation_sets: dict[str, Sequence]) -> dict[str, pd.DataFrame]:
    """Predict the majority class of ``train`` for every pair, with prob = train positive rate.

    Ties (positive rate exactly 0.5) predict the positive class, as ``prob >= 0.5`` does.

    Returns:
        ``{split_name: predictions DataFrame}`` with columns ``id1, id2, label, prob, pred``.
    """
    if len(train) == 0:
        raise ValueError("majority_baseline: the training set is empty")
    positive_rate = float(_labels(train).mean())
    return {
        name: _predictions_frame(pairs, np.full(len(pairs), positive_rate))
        for name, pairs in evaluation_sets.items()
    }


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
    train: Sequence, evaluation_sets: dict[str, Sequence], seed: int = 0
) -> dict[str, pd.DataFrame]:
    """TF-IDF similarity + lexical overlap features scored by logistic regression.

    Vectorizers are fitted on train sentences only; the inverse L2 strength ``C`` is chosen from
    ``REGULARISATION_GRID`` by stratified ``CROSS_VALIDATION_FOLDS``-fold cross-validation
    (accuracy) on train, shuffled with ``seed``. No evaluation pair is seen in fitting or selection.

    Returns:
        ``{split_name: predictions DataFrame}`` with columns ``id1, id2, label, prob, pred``.
    """
    labels = _labels(train)
    if len(np.unique(labels)) < 2:
        raise ValueError("tfidf_lr_baseline: the training set needs both classes")
    featurizer = PairFeaturizer().fit(train)
    features = featurizer.transform(train)  # (N, F)
    folds = StratifiedKFold(
        n_splits=min(CROSS_VALIDATION_FOLDS, int(np.bincount(labels).min())), shuffle=True, random_state=seed
    )
    search = GridSearchCV(
        make_pipeline(StandardScaler(), LogisticRegression(solver="lbfgs", max_iter=1000, random_state=seed)),
        param_grid={"logisticregression__C": REGULARISATION_GRID},
        scoring="accuracy",
        cv=folds,
    )
    search.fit(features, labels)
    model = search.best_estimator_
    return {
        name: _predictions_frame(pairs, model.predict_proba(featurizer.transform(pairs))[:, 1])
        for name, pairs in evaluation_sets.items()
    }
