"""SICK-E, the entailment task of SICK (Sentences Involving Compositional Knowledge, SemEval-2014
Task 1), as a named data set: the three release files of the SemEval split read strictly (train /
trial as dev / test, as SentEval splits it), three classes scored by accuracy and macro F1, checked
against the release by content.

SICK's graded relatedness (SICK-R) is the same files' fourth column; it needs a graded target and
is not a data set of this registry yet."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from harness.datasets.entry import Anchors, DataSet
from harness.datasets.reader import read_pair_tsv
from harness.datasets.spec import PairDataSpec, refuse_pair_files
from harness.datasets.types import SPLITS, PairData, combine_digests
from harness.errors import UserError

FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}
LABELS = ["CONTRADICTION", "ENTAILMENT", "NEUTRAL"]  # class ids in this order (the reader's, by code point)
# No header line; columns: pair id, sentence A, sentence B, relatedness 1-5, entailment judgement.
SICK_FORMAT = dict(sentence1_column=1, sentence2_column=2, label_column=4, id_column=0, has_header=False)
# (pairs, sha256 of the normalised text) of each file of the SemEval-2014 release; for these ASCII,
# LF-terminated files the normalised text is the file itself, so the digests are the release's SHA-256.
RELEASE = {
    "train": (4500, "f4d128aad59deb5f3d539a97fb8bf23ee111df99c904387b5025c69b7fc31b81"),
    "dev": (500, "5e24b7fb1639e20a9c39f34dd2868e0cd05abbddce749063224a822109b9038c"),
    "test": (4927, "a7b22f10009c0094f213d7ad721152c5d0b63225c9e440fe1d754dbc61b0f21b"),
}
CONTENT_HASH = combine_digests([RELEASE[split][1] for split in SPLITS])
HINT = "set SICK_DIR (or --data.data_dir) to the folder of SICK_train.txt, SICK_trial.txt and SICK_test_annotated.txt"
ANCHORS = Anchors(
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


def default_sick_dir() -> Path | None:
    """``$SICK_DIR`` if set, else ``$DATA_ROOT/sick`` if ``DATA_ROOT`` is set, else None."""
    for variable, tail in (("SICK_DIR", ""), ("DATA_ROOT", "sick")):
        value = os.environ.get(variable, "").strip()
        if value:
            return Path(value).expanduser() / tail
    return None


def load_sick_e(directory: str | os.PathLike | None = None) -> PairData:
    """Read the three SICK files of ``directory`` (default :func:`default_sick_dir`) strictly.

    Returns:
        the PairData ``sick-e``: labels CONTRADICTION / ENTAILMENT / NEUTRAL, ids ``(id,)`` (the
        pair ids), train / trial (dev) / test; content_hash over the normalised files' sha256. A
        folder whose content differs from the release is read (own SICK-format files work) and
        said in one line on stderr.
    """
    folder = Path(directory).expanduser() if directory is not None else default_sick_dir()
    if folder is None:
        raise UserError(f"--data.dataset=sick-e: no SICK folder given; {HINT} (the SemEval-2014 Task 1 release)")
    read = {}
    for split, name in FILES.items():
        path = folder / name
        if not path.is_file():
            raise UserError(f"{path}: file not found; {HINT}")
        read[split] = read_pair_tsv(path, list(LABELS), flag=None, labels_from="SICK's labels", **SICK_FORMAT)
    data = PairData(
        name="sick-e",
        labels=list(LABELS),
        id_columns=("id",),
        train=read["train"].pairs,
        dev=read["dev"].pairs,
        test=read["test"].pairs,
        content_hash=combine_digests([read[split].digest for split in SPLITS]),
        kind="sick-e",
        source=str(folder),
        train_file=str(folder / FILES["train"]),
    )
    differing = [FILES[split] for split in SPLITS if read[split].digest != RELEASE[split][1]]
    if differing:
        print(
            f"sick-e: {folder}: {', '.join(differing)} differ from the SemEval-2014 release (sha256); "
            f"read as given, under its own content hash {data.content_hash[:12]}",
            file=sys.stderr,
        )
    return data


def load(spec: PairDataSpec) -> PairData:
    """SICK-E as ``--data.dataset=sick-e`` names it: the files of ``--data.data_dir`` (or ``$SICK_DIR``)."""
    refuse_pair_files(spec, "SICK's")
    return load_sick_e(spec.data_dir)


SICK_E = DataSet(
    name="sick-e",
    load=load,
    default_name=lambda spec: "sick-e",
    split_titles={"dev": "SICK trial", "test": "SICK test"},
    class_titles=("contradiction", "entailment", "neutral"),
    anchors=ANCHORS,
    split_sizes={CONTENT_HASH: {split: RELEASE[split][0] for split in SPLITS}},
    release_overlap={CONTENT_HASH: {"train/dev": 7, "train/test": 81, "dev/test": 11}},
)
