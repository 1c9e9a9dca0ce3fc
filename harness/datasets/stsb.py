"""STS-B, the STS Benchmark (SemEval STS 2012–2017: news, captions, forums), as a named data set:
graded similarity 0–5 scored by Pearson and Spearman, its three release files read strictly and
checked against the release by content.

The files have no header and are read with quoting off (sentences hold ``"`` that is no CSV
quoting); the columns are genre, source file, year, id, score, sentence 1, sentence 2, and some
rows carry two notes after them, which are ignored. The id alone is not unique (test: 1,379 rows,
828 ids): a pair is identified by (genre, file, year, id), the four id columns of its predictions.
"""

from __future__ import annotations

import os
from pathlib import Path

from harness.datasets.entry import Anchors, DataSet
from harness.datasets.reader import read_pair_tsv
from harness.datasets.release_folder import default_folder, files_present, release_files, say_differing
from harness.datasets.spec import PairDataSpec, refuse_pair_files
from harness.datasets.task import graded
from harness.datasets.types import SPLITS, PairData, combine_digests
from harness.errors import UserError

NAME = "stsb"
FILES = {"train": "sts-train.csv", "dev": "sts-dev.csv", "test": "sts-test.csv"}
ID_COLUMNS = ("genre", "file", "year", "id")
STSB_FORMAT = dict(
    sentence1_column=5,
    sentence2_column=6,
    label_column=4,
    id_column=(0, 1, 2, 3),
    has_header=False,
    min_columns=7,  # columns past the seventh are the source's notes
)
TASK = graded(0, 5)
# (pairs, sha256 of the normalised text) of each release file; for these ASCII, LF-terminated files the
# normalised text is the file itself, so the digests are the release's SHA-256.
RELEASE = {
    "train": (5749, "0f71910b59aa1ad973c5897f0791f3b0965a92b8f82b1a95f3eea9f4162fda82"),
    "dev": (1500, "5d7e944d8b02734b07bfdb5df67db3420c64bed153fcaa1ba47ad03480cf4234"),
    "test": (1379, "affe45928a66ee5a708531233c95b7dacbbdc57f974f002a3d32ea0180cf816a"),
}
CONTENT_HASH = combine_digests([RELEASE[split][1] for split in SPLITS])
# The pairs (as harness.datasets.overlap compares them) the release's own splits share: kept, as the
# literature's split keeps them, counted and said.
RELEASE_OVERLAP = {"train/dev": 7, "train/test": 12, "dev/test": 4}
HINT = (
    "set STSB_DIR (or DATA_ROOT, or --data.data_dir) to the folder of sts-train.csv, sts-dev.csv and "
    "sts-test.csv (the STS Benchmark release, ixa2.si.ehu.eus/stswiki)"
)
ANCHORS = Anchors(
    split="STS-B test",
    metrics=TASK.metrics,
    rows=(  # (system, test Pearson × 100, test Spearman × 100, source); None: not published
        ("InferSent (frozen) + regressor", 75.8, None, "Conneau et al. 2017, SentEval"),
        ("all-MiniLM-L6-v2, cosine (zero-shot)", None, 82.0, "MTEB, STSBenchmark"),
    ),
    note=(
        "STS-B's news genre holds MSRpar pairs drawn from the MSR Paraphrase corpus: an encoder pretrained on MRPC "
        "text has seen some of its test sentences (the pretraining run's contamination_stsb_* params). The "
        "word-overlap cosine (`overlap-cosine`, no training) is the floor to read any system against."
    ),
)


def default_stsb_dir() -> Path | None:
    """``$STSB_DIR`` if set, else ``$DATA_ROOT/stsb`` if ``DATA_ROOT`` is set, else None."""
    return default_folder("STSB_DIR", "stsb")


def load_stsb(directory: str | os.PathLike | None = None) -> PairData:
    """Read the three STS-B files of ``directory`` (default :func:`default_stsb_dir`) strictly.

    Returns:
        the PairData ``stsb``: scores 0–5, ids (genre, file, year, id), train / dev / test;
        content_hash over the normalised files' sha256. A folder whose content differs from the
        release is read and said in one line on stderr (its runs are tagged ``data_release=own``).
    """
    folder = Path(directory).expanduser() if directory is not None else default_stsb_dir()
    if folder is None:
        raise UserError(f"--data.dataset={NAME}: no STS-B folder given; {HINT}")
    read = {
        split: read_pair_tsv(path, flag=None, score_range=TASK.score_range, **STSB_FORMAT)
        for split, path in release_files(folder, FILES, HINT).items()
    }
    data = PairData(
        name=NAME,
        labels=[],
        id_columns=ID_COLUMNS,
        train=read["train"].pairs,
        dev=read["dev"].pairs,
        test=read["test"].pairs,
        content_hash=combine_digests([read[split].digest for split in SPLITS]),
        kind=NAME,
        source=str(folder),
        train_file=str(folder / FILES["train"]),
        task=TASK,
    )
    digests = {split: read[split].digest for split in SPLITS}
    say_differing(NAME, folder, FILES, digests, RELEASE, "STS Benchmark", data.content_hash)
    return data


def findable() -> bool:
    """Whether the three files are in the default folder (``$STSB_DIR``, ``$DATA_ROOT/stsb``)."""
    return files_present(default_stsb_dir(), FILES)


def load(spec: PairDataSpec) -> PairData:
    """STS-B as ``--data.dataset=stsb`` names it: the files of ``--data.data_dir`` (or ``$STSB_DIR``)."""
    refuse_pair_files(spec, "STS-B's")
    return load_stsb(spec.data_dir)


STSB = DataSet(
    name=NAME,
    load=load,
    default_name=lambda spec: NAME,
    task=TASK,
    split_titles={"dev": "STS-B dev", "test": "STS-B test"},
    anchors=ANCHORS,
    split_sizes={CONTENT_HASH: {split: RELEASE[split][0] for split in SPLITS}},
    release_overlap={CONTENT_HASH: RELEASE_OVERLAP},
    findable=findable,
)
