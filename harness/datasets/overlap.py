"""Leakage between the splits of a pair data set: the same pair in train and in dev or test.

The pair is the unit, order-insensitive (``(a, b)`` and ``(b, a)`` are one pair), keyed on what a
model sees: Unicode-compatibility normalised (NFKC), invisible format characters (zero-width space
and joiners, BOM, soft hyphen) dropped, case folded (the word tokenizer lowercases), whitespace
normalised (runs of spaces/tabs are one space; ends stripped); punctuation counts. A
sentence that recurs in several pairs across splits is normal (MRPC: 43 train sentences recur in
GLUE dev, 244 in MSR test) and is not counted. Counts above ``max_fraction`` of the smaller of the
two splits are refused: evaluation on pairs the model was trained on measures memory, not transfer.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from harness.errors import UserError

DEFAULT_MAX_FRACTION = 0.01  # of the smaller split
FLAG = "--data.max_split_overlap"
COMPARED = (("train", "dev"), ("train", "test"), ("dev", "test"))


def seen_text(sentence: str) -> str:
    """The sentence as a model's tokenizer sees it: NFKC, no format characters, case folded, spaces normalised."""
    if sentence.isascii():  # the common case, without a pass over each character
        return " ".join(sentence.lower().split())
    text = unicodedata.normalize("NFKC", sentence)
    text = "".join(character for character in text if unicodedata.category(character) != "Cf")
    return " ".join(text.casefold().split())


def pair_key(sentence1: str, sentence2: str) -> tuple[str, str]:
    """The pair's identity: both sentences as a model sees them (:func:`seen_text`), in sorted order."""
    first, second = seen_text(sentence1), seen_text(sentence2)
    return (first, second) if first <= second else (second, first)


@dataclass(frozen=True)
class SplitOverlap:
    """Pairs of the later split found in the earlier one, per compared couple of splits."""

    counts: dict[str, int]  # "train/dev" -> pairs of dev that are train pairs
    sizes: dict[str, int]  # split -> pairs

    def params(self) -> dict[str, int]:
        """``overlap_train_dev`` … for the run's params."""
        return {f"overlap_{name.replace('/', '_')}": count for name, count in self.counts.items()}

    def summary(self) -> str:
        return ", ".join(f"{name} {count}" for name, count in self.counts.items())


def split_overlap(splits: dict[str, list]) -> SplitOverlap:
    """Count, for each of train/dev, train/test and dev/test, the pairs of the second split that
    are (as :func:`pair_key`) pairs of the first."""
    keys = {name: {pair_key(p.sentence1, p.sentence2) for p in pairs} for name, pairs in splits.items()}
    counts = {
        f"{earlier}/{later}": sum(pair_key(p.sentence1, p.sentence2) in keys[earlier] for p in splits[later])
        for earlier, later in COMPARED
    }
    return SplitOverlap(counts, {name: len(pairs) for name, pairs in splits.items()})


def check_split_overlap(splits: dict[str, list], max_fraction: float | None, names: dict[str, str]) -> SplitOverlap:
    """The overlap of ``splits``; refused (UserError) where it exceeds ``max_fraction`` of the smaller split.

    ``names``: how each split is named in the message (``--data.dev=<file>``). ``max_fraction`` 1 (or
    None) allows any overlap; 0 allows none.
    """
    if max_fraction is not None and not 0.0 <= max_fraction <= 1.0:
        raise UserError(f"{FLAG}={max_fraction}: a fraction of the smaller split, in [0, 1]")
    overlap = split_overlap(splits)
    if max_fraction is None:
        return overlap
    for earlier, later in COMPARED:
        count = overlap.counts[f"{earlier}/{later}"]
        smaller = min(overlap.sizes[earlier], overlap.sizes[later])
        if count and count > max_fraction * smaller:
            raise UserError(
                f"{names[later]}: {count} of its {overlap.sizes[later]} pairs are also pairs of "
                f"{names[earlier]} ({count / smaller:.1%} of the smaller split, either order, case, spacing "
                f"and invisible characters ignored; allowed: {max_fraction:.1%}): remove them from one split, or raise "
                f"{FLAG} to accept the leak"
            )
    return overlap
