"""Pair files for tests: any rows as a tab-separated file (``write_tsv``), and a small 3-label
sentence-pair data set in the generic TSV format for tests that need a second data set
(``from tests.pair_files import write_three_label_set``; no conftest fixture).

Pairs are made from templates so that the label is learnable from the two sentences: an
``entailment`` rewords the first sentence, a ``contradiction`` negates it, a ``neutral`` pair
tells another event about the same subject. Deterministic for a given seed.
"""

from __future__ import annotations

import random
from pathlib import Path

from harness.datasets.overlap import pair_key

LABELS = ("contradiction", "entailment", "neutral")  # the label order: strings sorted
HEADER = ("id", "sentence1", "sentence2", "label")  # id first: columns are found by name
SUBJECTS = [
    "The company",
    "The senator",
    "The team",
    "The hospital",
    "The airline",
    "The museum",
    "Police",
    "The central bank",
    "The school board",
    "The mayor",
    "The studio",
    "Investors",
]
EVENTS = [  # (statement, rewording, negation)
    (
        "reported a large profit this quarter",
        "announced strong quarterly earnings",
        "did not report any profit this quarter",
    ),
    ("approved the new budget on Tuesday", "passed the budget plan on Tuesday", "rejected the new budget on Tuesday"),
    ("hired two hundred workers", "added 200 jobs", "fired two hundred workers"),
    ("opened a new office in Paris", "started operations in Paris", "closed its office in Paris"),
    ("raised prices sharply", "increased its prices steeply", "cut prices sharply"),
    ("won the final match", "took the championship game", "lost the final match"),
    ("agreed to the merger", "accepted the merger deal", "refused the merger"),
    ("expects growth next year", "forecasts expansion for next year", "expects a decline next year"),
]
OPENERS = ["", "On Monday, ", "According to reports, ", "Officials said that "]


def write_tsv(path, rows, header=HEADER, bom=False, newline="\n", trailing_blank=0) -> Path:
    """Write a pair file; a row is a sequence of fields (joined by tabs) or a raw line; header None: none."""
    lines = [] if header is None else ["\t".join(header)]
    lines += [row if isinstance(row, str) else "\t".join(row) for row in rows]
    text = newline.join(lines) + newline + newline * trailing_blank
    path = Path(path)
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))
    return path


def _pair(rng: random.Random, label: str) -> tuple[str, str]:
    subject = rng.choice(SUBJECTS)
    index = rng.randrange(len(EVENTS))
    statement, rewording, negation = EVENTS[index]
    opener = rng.choice(OPENERS)
    first = f"{opener}{subject[0].lower() + subject[1:] if opener else subject} {statement}."
    if label == "entailment":
        second = f"{subject} {rewording}."
    elif label == "contradiction":
        second = f"{subject} {negation}."
    else:
        other = EVENTS[(index + rng.randrange(1, len(EVENTS))) % len(EVENTS)][0]
        second = f"{subject} {other}."
    return first, second


def three_label_rows(count: int, seed: int, prefix: str, taken: set | None = None) -> list[tuple[str, str, str, str]]:
    """``count`` rows ``(id, sentence1, sentence2, label)``, labels in turn (balanced), then shuffled.

    No pair repeats, nor one in ``taken`` (the pairs of the other splits, which it grows): the
    splits of a data set made from it share no pair, as the harness requires of a data set.
    """
    rng = random.Random(seed)
    taken = set() if taken is None else taken
    rows = []
    for number in range(count):
        label = LABELS[number % len(LABELS)]
        first, second = _pair(rng, label)
        while pair_key(first, second) in taken:
            first, second = _pair(rng, label)
        taken.add(pair_key(first, second))
        rows.append((f"{prefix}-{number:04d}", first, second, label))
    rng.shuffle(rows)
    return rows


def write_three_label_set(folder: Path, sizes: tuple[int, int, int] = (240, 60, 60), seed: int = 0) -> dict[str, Path]:
    """Write ``train.tsv``, ``dev.tsv`` and ``test.tsv`` (header ``id sentence1 sentence2 label``)
    into ``folder``; the data set's default name is the folder's name.

    Returns:
        ``{"train": path, "dev": path, "test": path}``.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths, taken = {}, set()
    for offset, (split, count) in enumerate(zip(("train", "dev", "test"), sizes)):
        rows = three_label_rows(count, seed * 10 + offset, split, taken)
        lines = ["\t".join(HEADER)] + ["\t".join(row) for row in rows]
        paths[split] = folder / f"{split}.tsv"
        paths[split].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return paths


SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


def write_sick(folder: Path, rows_per_split: int = 6) -> Path:
    """A SICK-format folder of made-up pairs: no header, id / A / B / relatedness / entailment."""
    folder.mkdir(parents=True, exist_ok=True)
    labels = ("NEUTRAL", "ENTAILMENT", "CONTRADICTION")
    for number, name in enumerate(SICK_FILES.values()):
        lines = [
            f"{number * 100 + k}\tA man plays the {name[5:9]} number {k}\tSomeone plays thing {number}-{k}\t"
            f"{1 + k % 5}.0\t{labels[k % 3]}\n"
            for k in range(rows_per_split)
        ]
        (folder / name).write_text("".join(lines), encoding="ascii")
    return folder


STSB_FILES = {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}


def write_stsb(folder: Path, rows_per_split: int = 6) -> Path:
    """An STS-B-format folder of made-up pairs: no header, genre / file / year / id / score / sentence 1 /
    sentence 2, every third row with two notes after them; the same id under two genres (the id alone
    is not a pair's key) and a ``"`` that is no quoting."""
    folder.mkdir(parents=True, exist_ok=True)
    for number, name in enumerate(STSB_FILES.values()):
        lines = []
        for k in range(rows_per_split):
            genre, source = ("main-news", "MSRpar") if k % 2 else ("main-captions", "MSRvid")
            notes = "\tnote one\tnote two" if k % 3 == 0 else ""
            lines.append(
                f"{genre}\t{source}\t2012test\t{k // 2:04d}\t{k % 6:.3f}\t"
                f'A "man plays the {name[4:8]} number {k}\tSomeone plays thing {number}-{k}{notes}\n'
            )
        (folder / name).write_text("".join(lines), encoding="ascii")
    return folder
