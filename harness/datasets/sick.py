"""SICK (Sentences Involving Compositional Knowledge, SemEval-2014 Task 1) as two named data sets
over the same three release files of the SemEval split, read strictly (train / trial as dev / test,
as SentEval splits it) and checked against the release by content:

- ``sick-e``, the entailment judgement (fifth column): three classes, accuracy and macro F1;
- ``sick-r``, the relatedness score (fourth column): graded 1–5, Pearson and Spearman.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from harness.datasets.entry import Anchors, DataSet
from harness.datasets.reader import read_pair_tsv
from harness.datasets.release_folder import default_folder, files_present, release_files, say_differing
from harness.datasets.spec import PairDataSpec, refuse_pair_files
from harness.datasets.task import CLASSES, Task, graded
from harness.datasets.types import SPLITS, PairData, combine_digests
from harness.errors import UserError

FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
LABELS = ["CONTRADICTION", "ENTAILMENT", "NEUTRAL"]  # class ids in this order (the reader's, by code point)
# No header line; columns: pair id, sentence A, sentence B, relatedness 1-5, entailment judgement.
SICK_FORMAT = dict(sentence1_column=1, sentence2_column=2, id_column=0, has_header=False)
LABEL_COLUMNS = {"sick-e": 4, "sick-r": 3}  # the entailment judgement, the relatedness score
RELATEDNESS = graded(1, 5)
TASKS: dict[str, Task] = {"sick-e": CLASSES, "sick-r": RELATEDNESS}
# The same files with another column as the label are another data set: sick-r's content hash adds this
# digest to the files' (sick-e's is the files' alone), so no cache, cell or results folder takes one for the other.
COLUMN_DIGESTS = {"sick-e": [], "sick-r": [hashlib.sha256(b"sick-r: label = relatedness, column 3").hexdigest()]}
# (pairs, sha256 of the normalised text) of each file of the SemEval-2014 release; for these ASCII,
# LF-terminated files the normalised text is the file itself, so the digests are the release's SHA-256.
RELEASE = {
    "train": (4500, "f4d128aad59deb5f3d539a97fb8bf23ee111df99c904387b5025c69b7fc31b81"),
    "dev": (500, "5e24b7fb1639e20a9c39f34dd2868e0cd05abbddce749063224a822109b9038c"),
    "test": (4927, "a7b22f10009c0094f213d7ad721152c5d0b63225c9e440fe1d754dbc61b0f21b"),
}
CONTENT_HASHES = {
    name: combine_digests([RELEASE[split][1] for split in SPLITS] + extra) for name, extra in COLUMN_DIGESTS.items()
}
CONTENT_HASH = CONTENT_HASHES["sick-e"]
HINT = "set SICK_DIR (or --data.data_dir) to the folder of SICK_train.txt, SICK_trial.txt and SICK_test_annotated.txt"
ENTAILMENT_ANCHORS = Anchors(
    split="SICK test",
    rows=(  # (system, test acc %, test F1 %, source); None: not published
        ("majority (always NEUTRAL)", 56.7, None, "SICK test label distribution (2,793 of 4,927)"),
        ("InferSent (frozen) + LR", 86.3, None, "Conneau et al. 2017, SentEval"),
    ),
    note=(
        "SICK's sentences are short image and video captions; InferSent was trained on SNLI, whose premises are "
        "captions of the same kind: context, not a target for a CPU-pretrained encoder."
    ),
)
RELATEDNESS_ANCHORS = Anchors(
    split="SICK test",
    metrics=RELATEDNESS.metrics,
    rows=(  # (system, test Pearson × 100, test Spearman × 100, source); None: not published
        ("InferSent (frozen) + regressor", 88.4, None, "Conneau et al. 2017, SentEval"),
    ),
    note=(
        "SentEval's regressor is trained on SICK's train split over frozen InferSent (SNLI-trained) embeddings of "
        "captions: context. The word-overlap cosine (`overlap-cosine`, no training) is the floor to read any "
        "system against."
    ),
)


def default_sick_dir() -> Path | None:
    """``$SICK_DIR`` if set, else ``$DATA_ROOT/sick`` if ``DATA_ROOT`` is set, else None."""
    return default_folder("SICK_DIR", "sick")


def load_sick(directory: str | os.PathLike | None = None, name: str = "sick-e") -> PairData:
    """Read the three SICK files of ``directory`` (default :func:`default_sick_dir`) strictly, as
    the data set ``name`` (``sick-e`` or ``sick-r``) reads them.

    Returns:
        the PairData ``name``: ``sick-e`` labels CONTRADICTION / ENTAILMENT / NEUTRAL, ``sick-r``
        scores 1–5 (no label names); ids ``(id,)`` (the pair ids), train / trial (dev) / test;
        content_hash over the normalised files' sha256 (and, for sick-r, its column's digest: the
        two never share a hash). A folder whose content
        differs from the release is read (own SICK-format files work) and said in one line on stderr.
    """
    folder = Path(directory).expanduser() if directory is not None else default_sick_dir()
    if folder is None:
        raise UserError(f"--data.dataset={name}: no SICK folder given; {HINT} (the SemEval-2014 Task 1 release)")
    task = TASKS[name]
    labels = list(LABELS) if not task.graded else []
    column = dict(label_column=LABEL_COLUMNS[name], score_range=task.score_range)
    read = {
        split: read_pair_tsv(path, labels or None, flag=None, labels_from="SICK's labels", **column, **SICK_FORMAT)
        for split, path in release_files(folder, FILES, HINT).items()
    }
    data = PairData(
        name=name,
        labels=labels,
        id_columns=("id",),
        train=read["train"].pairs,
        dev=read["dev"].pairs,
        test=read["test"].pairs,
        content_hash=combine_digests([read[split].digest for split in SPLITS] + COLUMN_DIGESTS[name]),
        kind=name,
        source=str(folder),
        train_file=str(folder / FILES["train"]),
        task=task,
    )
    digests = {split: read[split].digest for split in SPLITS}
    say_differing(name, folder, FILES, digests, RELEASE, "SemEval-2014", data.content_hash)
    return data


def findable() -> bool:
    """Whether the three files are in the default folder (``$SICK_DIR``, ``$DATA_ROOT/sick``)."""
    return files_present(default_sick_dir(), FILES)


def entry(name: str, anchors: Anchors, class_titles: tuple[str, ...] = ()) -> DataSet:
    """The registry entry of ``name``, read by :func:`load_sick` from ``--data.data_dir`` (or ``$SICK_DIR``)."""

    def load(spec: PairDataSpec) -> PairData:
        refuse_pair_files(spec, "SICK's")
        return load_sick(spec.data_dir, name)

    return DataSet(
        name=name,
        load=load,
        default_name=lambda spec: name,
        task=TASKS[name],
        split_titles={"dev": "SICK trial", "test": "SICK test"},
        class_titles=class_titles,
        anchors=anchors,
        split_sizes={CONTENT_HASHES[name]: {split: RELEASE[split][0] for split in SPLITS}},
        release_overlap={CONTENT_HASHES[name]: {"train/dev": 7, "train/test": 81, "dev/test": 11}},
        findable=findable,
    )


SICK_E = entry("sick-e", ENTAILMENT_ANCHORS, ("contradiction", "entailment", "neutral"))
SICK_R = entry("sick-r", RELATEDNESS_ANCHORS)
