"""The sentences an encoder was pretrained on, kept as 64-bit digests of their seen text
(:func:`harness.datasets.overlap.seen_text`), so that a transfer run can tell which of its dev and
test pairs the encoder has read, for any task, without the text itself being stored.

Each pretraining run logs the digests of its training text (``corpus/seen_sentences.npy``); a run
that continues another (ULMFiT's stage 2) adds those of the run it continues, so one file holds
everything the encoder has read. A pair is *seen* when either of its sentences is among them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from harness.datasets.overlap import seen_text

ARTIFACT_DIR = "corpus"
FILE_NAME = "seen_sentences.npy"
ARTIFACT = f"{ARTIFACT_DIR}/{FILE_NAME}"


def digest(sentence: str) -> int:
    """The 64-bit digest of a sentence's seen text (BLAKE2b): equal for sentences a model sees alike."""
    return int.from_bytes(hashlib.blake2b(seen_text(sentence).encode(), digest_size=8).digest(), "little")


def digests(sentences: Iterable[str]) -> np.ndarray:
    """The sorted, distinct digests of ``sentences`` (uint64)."""
    return np.unique(np.fromiter((digest(sentence) for sentence in sentences), dtype=np.uint64))


def merged(*parts: np.ndarray) -> np.ndarray:
    """The union of digest arrays, sorted and distinct."""
    return np.unique(np.concatenate([np.asarray(part, dtype=np.uint64) for part in parts] or [np.empty(0, np.uint64)]))


def write(folder: Path, values: np.ndarray) -> Path:
    """``values`` saved as ``<folder>/seen_sentences.npy``; returns the file."""
    path = Path(folder) / FILE_NAME
    np.save(path, np.asarray(values, dtype=np.uint64), allow_pickle=False)
    return path


def read(path: Path) -> np.ndarray:
    """A digest file written by :func:`write` (no pickled objects are read)."""
    return np.asarray(np.load(path, allow_pickle=False), dtype=np.uint64)


def seen_pairs(sentences1: Iterable[str], sentences2: Iterable[str], seen: np.ndarray) -> np.ndarray:
    """For each pair, whether either sentence is among the ``seen`` digests: a bool array."""
    first, second = (np.fromiter(map(digest, column), dtype=np.uint64) for column in (sentences1, sentences2))
    return np.isin(first, seen) | np.isin(second, seen)
