"""``--data.dataset=tsv``: any sentence-pair task as three tab-separated files (``--data.train``,
``--data.dev``, ``--data.test``) read by :func:`harness.datasets.reader.read_pair_tsv`; the label
set comes from train, and each split must have content of its own."""

from __future__ import annotations

from pathlib import Path

from harness.datasets.entry import DataSet
from harness.datasets.reader import read_pair_tsv
from harness.datasets.spec import PairDataSpec
from harness.datasets.types import SPLITS, PairData, combine_digests
from harness.errors import UserError


def dataset_name(train: Path) -> str:
    """A TSV data set's default name: the train file's stem, or its folder's name when the stem is ``train``."""
    if train.stem.lower() == "train" and train.resolve().parent.name:
        return train.resolve().parent.name
    return train.stem


def load(spec: PairDataSpec) -> PairData:
    """The three pair files of ``spec``, labels from train; a problem is a one-line UserError."""
    files = {split: getattr(spec, split) for split in SPLITS}
    for split, path in files.items():
        if path is None:
            raise UserError(f"--data.{split}: required with --data.dataset=tsv (a tab-separated pair file)")
    columns = dict(
        sentence1_column=spec.sentence1_column,
        sentence2_column=spec.sentence2_column,
        label_column=spec.label_column,
        id_column=spec.id_column,
        has_header=spec.has_header,
    )
    read = {"train": read_pair_tsv(files["train"], flag="--data.train", **columns)}
    for split in ("dev", "test"):
        read[split] = read_pair_tsv(files[split], read["train"].labels, flag=f"--data.{split}", **columns)
    for later, earlier in (("dev", "train"), ("test", "train"), ("test", "dev")):
        if read[later].digest == read[earlier].digest:
            raise UserError(
                f"--data.{later}={files[later]}: same content as --data.{earlier}={files[earlier]}; "
                f"each split needs its own pairs"
            )
    return PairData(
        name=dataset_name(Path(files["train"])),
        labels=read["train"].labels,
        id_columns=("id",),
        train=read["train"].pairs,
        dev=read["dev"].pairs,
        test=read["test"].pairs,
        content_hash=combine_digests([read[split].digest for split in SPLITS]),
        kind="tsv",
        source=str(files["train"]),
        train_file=str(files["train"]),
    )


TSV = DataSet(name="tsv", load=load, default_name=lambda spec: dataset_name(Path(spec.train)) if spec.train else "tsv")
