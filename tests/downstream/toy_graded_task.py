"""A toy graded task added the way a user adds one: this one file holding one ``DataSet`` entry,
which ``harness.datasets.registry.register(TOY_OVERLAP)`` adds before the CLI runs (the user's
launcher in ``test_graded_cli.py``; in process, the tests add it for their own duration only, so
that no other test sees it among the data sets); nothing else of the harness changed.

Its pairs are short sentences over a small vocabulary (words the tests' tiny encoders know); each
pair's gold score is 5 × the Jaccard overlap of its two word sets, so it is learnable from the
two sentences alone. Deterministic: the same pairs on every call.
"""

from __future__ import annotations

import hashlib
import random

from harness.datasets.entry import DataSet
from harness.datasets.spec import PairDataSpec
from harness.datasets.task import graded
from harness.datasets.types import SPLITS, Pair, PairData, combine_digests

NAME = "toy-overlap"
TASK = graded(0, 5)
SIZES = {"train": 240, "dev": 80, "test": 80}
WORDS = (
    "the cat sat on mat a dog barked at loudly shares fell percent monday market rose sharply after "
    "report he said so she agreed to plan once"
).split()


def overlap_score(first: str, second: str) -> float:
    """5 × |A ∩ B| / |A ∪ B| of the two sentences' word sets: the gold score, in [0, 5]."""
    a, b = set(first.split()), set(second.split())
    return 5 * len(a & b) / len(a | b)


def toy_pairs(split: str, count: int) -> list[Pair]:
    """``count`` pairs of 4–7 distinct words, the second sharing a random number of the first's."""
    generator = random.Random(f"{NAME}-{split}")
    pairs = []
    for index in range(count):
        first = generator.sample(WORDS, generator.randint(4, 7))
        kept = generator.sample(first, generator.randint(0, len(first)))
        others = [word for word in WORDS if word not in first]
        second = kept + generator.sample(others, generator.randint(1 if kept else 2, 4))
        generator.shuffle(second)
        sentence1, sentence2 = " ".join(first), " ".join(second)
        pairs.append(Pair(overlap_score(sentence1, sentence2), (f"{split}-{index}",), sentence1, sentence2))
    return pairs


def load(spec: PairDataSpec) -> PairData:
    splits = {split: toy_pairs(split, SIZES[split]) for split in SPLITS}
    digests = [
        hashlib.sha256("\n".join(f"{p.sentence1}\t{p.sentence2}\t{p.label}" for p in pairs).encode()).hexdigest()
        for pairs in splits.values()
    ]
    return PairData(
        name=NAME,
        labels=[],
        id_columns=("id",),
        **splits,
        content_hash=combine_digests(digests),
        kind=NAME,
        source="toy",
        task=TASK,
    )


TOY_OVERLAP = DataSet(name=NAME, load=load, default_name=lambda spec: NAME, task=TASK)
