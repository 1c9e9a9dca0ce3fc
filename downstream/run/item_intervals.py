"""One run's uncertainty over its test items, for its end-of-run summary: a 95% interval of its
test accuracy (Wilson's score interval of a proportion) and of its F1 (a percentile bootstrap over
the items, seeded). It says how far another draw of test items of the same kind could move the
numbers of this one run; the seed's and the pretraining run's share is a benchmark's to measure.

F1 is the data set's: binary F1 of the positive label, or macro F1 over the labels present among a
resample's gold labels and predictions (what :func:`downstream.run.evaluation.split_metrics`
computes on the whole split).

A graded task's run gets a percentile bootstrap over the items of its test Pearson and Spearman
correlations (each replicate scipy's correlation of a resample; :func:`correlation_interval`), not a
Wilson interval, which is for a proportion."""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import binomtest, pearsonr, spearmanr

CONFIDENCE = 0.95
RESAMPLES = 1000  # bootstrap replicates of F1
BOOTSTRAP_SEED = 0
CHUNK = 200  # replicates drawn at once: a (CHUNK, items) count matrix


def accuracy_interval(correct: int, items: int) -> tuple[float, float]:
    """Wilson's 95% score interval of ``correct`` of ``items``."""
    interval = binomtest(correct, items).proportion_ci(confidence_level=CONFIDENCE, method="wilson")
    return float(interval.low), float(interval.high)


def f1_replicates(
    labels: np.ndarray,
    predictions: np.ndarray,
    positive: str | None,
    resamples: int = RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> np.ndarray:
    """F1 of ``resamples`` resamples of the items with replacement, shape (resamples,): binary F1
    of ``positive``, or (``positive`` None) macro F1 over each resample's labels."""
    classes = [positive] if positive is not None else sorted(set(labels) | set(predictions))
    gold = labels[:, None] == np.array(classes)[None, :]  # (N, C)
    said = predictions[:, None] == np.array(classes)[None, :]  # (N, C)
    counts_of = {"tp": gold & said, "fp": ~gold & said, "fn": gold & ~said}
    items = len(labels)
    generator = np.random.default_rng(seed)
    scores = []
    for start in range(0, resamples, CHUNK):
        weights = generator.multinomial(items, np.full(items, 1 / items), size=min(CHUNK, resamples - start))  # (R, N)
        tp, fp, fn = (weights @ counts_of[name].astype(np.int64) for name in ("tp", "fp", "fn"))  # (R, C) each
        denominator = 2 * tp + fp + fn
        f1 = np.divide(2 * tp, denominator, out=np.zeros(tp.shape), where=denominator > 0)  # (R, C)
        if positive is not None:
            scores.append(f1[:, 0])
        else:
            present = denominator > 0
            scores.append((f1 * present).sum(axis=1) / np.maximum(present.sum(axis=1), 1))
    return np.concatenate(scores)


def f1_interval(frame: pd.DataFrame, positive: str | None) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of F1 over bootstrap resamples of ``frame``'s items."""
    labels, predictions = frame["label"].astype(str).to_numpy(), frame["pred"].astype(str).to_numpy()
    replicates = f1_replicates(labels, predictions, positive)
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return float(low), float(high)


def interval_line(frame: pd.DataFrame, positive: str | None, f1_kind: str = "") -> str:
    """``95% interval over these pairs: acc <low>–<high> (Wilson), F1 <low>–<high> (bootstrap ×1000)``
    of the test split's predictions ``frame``."""
    correct = int((frame["label"].astype(str) == frame["pred"].astype(str)).sum())
    acc_low, acc_high = accuracy_interval(correct, len(frame))
    f1_low, f1_high = f1_interval(frame, positive)
    return (
        f"95% interval over these pairs: acc {acc_low:.3f}–{acc_high:.3f} (Wilson), "
        f"F1{f1_kind} {f1_low:.3f}–{f1_high:.3f} (bootstrap ×{RESAMPLES})"
    )


CORRELATIONS = {"pearson": pearsonr, "spearman": spearmanr}


def correlation_replicates(
    gold: np.ndarray, predicted: np.ndarray, metric: str, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED
) -> np.ndarray:
    """``metric`` (``pearson`` or ``spearman``, scipy's) of ``resamples`` resamples of the (N,) items
    with replacement, shape (resamples,); NaN for a resample whose gold or predicted scores are constant."""
    correlate = CORRELATIONS[metric]
    generator = np.random.default_rng(seed)
    items = len(gold)
    scores = np.full(resamples, np.nan)
    for replicate in range(resamples):
        chosen = generator.integers(0, items, size=items)  # (N,) item indices of one resample
        if np.ptp(gold[chosen]) > 0 and np.ptp(predicted[chosen]) > 0:
            scores[replicate] = correlate(predicted[chosen], gold[chosen]).statistic
    return scores


def correlation_interval(frame: pd.DataFrame, metric: str) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of ``metric`` over bootstrap resamples of ``frame``'s items
    (a graded predictions file: gold ``label``, predicted ``pred``); NaN when no resample has one."""
    gold, predicted = frame["label"].to_numpy(dtype=float), frame["pred"].to_numpy(dtype=float)
    replicates = correlation_replicates(gold, predicted, metric)
    replicates = replicates[np.isfinite(replicates)]
    if not len(replicates):
        return float("nan"), float("nan")
    tail = 100 * (1 - CONFIDENCE) / 2
    low, high = np.percentile(replicates, [tail, 100 - tail])
    return float(low), float(high)


def correlation_line(frame: pd.DataFrame) -> str:
    """``95% interval over these pairs: Pearson r <low>–<high>, Spearman ρ <low>–<high> (bootstrap
    ×1000)``, × 100 as the summary prints correlations, of a graded test split's predictions ``frame``."""
    pearson, spearman = correlation_interval(frame, "pearson"), correlation_interval(frame, "spearman")
    return (
        f"95% interval over these pairs: Pearson r {100 * pearson[0]:.1f}–{100 * pearson[1]:.1f}, "
        f"Spearman ρ {100 * spearman[0]:.1f}–{100 * spearman[1]:.1f} (bootstrap ×{RESAMPLES})"
    )
