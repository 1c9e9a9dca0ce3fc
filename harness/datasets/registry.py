"""The named pair data sets (``--data.dataset``), one entry each, and what every stage asks of the
data set a run uses: reading it from the ``--data.*`` flags, its name, how runs and reports title
its splits and labels, its published anchors.

A data set of its own is a module that defines a :class:`~harness.datasets.entry.DataSet` (see
``harness/datasets/mrpc.py``), imported and listed in :data:`DATASETS`; a test or a plugin may
also :func:`register` one at run time.
"""

from __future__ import annotations

import sys
from dataclasses import replace

from harness.datasets.entry import Anchors, DataSet
from harness.datasets.label_limit import check_label_count
from harness.datasets.mrpc import MRPC
from harness.datasets.overlap import check_split_overlap
from harness.datasets.reader import canonical_label
from harness.datasets.sick import SICK_E, SICK_R
from harness.datasets.spec import PairDataSpec
from harness.datasets.stsb import STSB
from harness.datasets.task import Task
from harness.datasets.tsv import TSV
from harness.datasets.types import SPLITS, PairData
from harness.errors import UserError

DATASETS: dict[str, DataSet] = {entry.name: entry for entry in (MRPC, SICK_E, SICK_R, STSB, TSV)}


def register(entry: DataSet) -> DataSet:
    """Add (or replace) a named data set; returns it."""
    DATASETS[entry.name] = entry
    return entry


def dataset_choices() -> str:
    """The names ``--data.dataset`` takes, as a sentence says them: ``mrpc, sick-e, …, stsb or tsv``."""
    names = sorted(DATASETS)
    return " or ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)


def dataset_entry(name: str) -> DataSet:
    """The entry ``--data.dataset=<name>`` names; an unknown name is a one-line UserError."""
    if name not in DATASETS:
        raise UserError(f"--data.dataset={name}: expected {dataset_choices()}")
    return DATASETS[name]


def task_of(name: str) -> Task:
    """The task of the data set ``--data.dataset=<name>`` names, without reading it."""
    return dataset_entry(name).task


def positive_label_of(labels: list[str], requested: str | int | None) -> str | None:
    """The class binary F1 is about: ``requested`` (checked), else the later of 2 labels; None for more."""
    if requested is None:
        return labels[-1] if len(labels) == 2 else None
    label = canonical_label(str(requested))
    if len(labels) != 2:
        raise UserError(
            f"--data.positive_label={requested}: only for 2-label data sets; this one has "
            f"{len(labels)} labels and reports macro F1"
        )
    if label not in labels:
        raise UserError(f"--data.positive_label={requested}: not a label of the data set ({', '.join(labels)})")
    return label


def load_pair_data(spec: PairDataSpec | None = None, **flags) -> PairData:
    """The pair data set a run's ``--data.*`` flags name (a spec, or the flags as keywords).

    Returns:
        the PairData, named ``--data.name`` (else the entry's default), its positive label
        ``--data.positive_label`` when given, the pairs its splits share counted
        (``split_overlap``); any problem raises a one-line UserError, and so do more labels than
        the harness can report on or splits that share more pairs than ``--data.max_split_overlap``.
    """
    spec = spec if spec is not None else PairDataSpec(**flags)
    entry = dataset_entry(spec.dataset)
    data = entry.load(spec)
    if data.task != entry.task:
        raise ValueError(f"{entry.name}: the entry declares a {entry.task.target} task, its reader {data.task.target}")
    data = replace(data, split_overlap=checked(data, spec))
    if spec.positive_label is not None:
        data = replace(data, positive_label=positive_label_of(data.labels, spec.positive_label))
    return replace(data, name=spec.name) if spec.name else data


def checked(data: PairData, spec: PairDataSpec) -> dict[str, int]:
    """The label count and the split overlap of a freshly read data set (one line on stderr when its
    splits share pairs below the threshold). Returns the overlap params."""
    names = {
        split: f"--data.{split}={getattr(spec, split)}" if getattr(spec, split) else split_title(data, split)
        for split in SPLITS
    }
    check_label_count(data.labels, names["train"])
    splits = {split: data.split(split) for split in SPLITS}
    release = DATASETS[data.kind].release_overlap.get(data.content_hash)
    overlap = check_split_overlap(splits, None if release else spec.max_split_overlap, names)
    if release and overlap.counts != dict(release):
        raise ValueError(f"{data.kind}: the release's split overlap is {dict(release)}, counted {overlap.counts}")
    if any(overlap.counts.values()):
        allowed = (
            "as the published release's splits share them"
            if release
            else f"below --data.max_split_overlap={spec.max_split_overlap:g} of the smaller split"
        )
        print(f"{data.name}: pairs shared between splits: {overlap.summary()} ({allowed})", file=sys.stderr)
    return overlap.params()


def dataset_name(spec: PairDataSpec | dict) -> str:
    """The data set's name without reading it: ``--data.name``, else its entry's default."""
    spec = spec if isinstance(spec, PairDataSpec) else PairDataSpec(**spec)
    return str(spec.name) if spec.name else dataset_entry(spec.dataset).default_name(spec)


def split_title(data: PairData, split: str) -> str:
    """How summaries name a split: MRPC's ``GLUE dev`` / ``MSR test``, else ``<name> <split>``."""
    return DATASETS[data.kind].split_titles.get(split) or f"{data.name} {split}"


def class_titles(data: PairData) -> list[str]:
    """How figures name the labels, in label order (MRPC: ``not para.``, ``paraphrase``)."""
    return list(DATASETS[data.kind].class_titles or data.labels)


def run_name_prefix(data: PairData) -> str:
    """``<name>-`` before run names, or nothing for a data set whose runs go without it (MRPC)."""
    entry = DATASETS[data.kind]
    return "" if entry.plain_run_names and data.name == entry.name else f"{data.name}-"


def task_tags(data: PairData) -> dict[str, str]:
    """``{"task": <its entry's name>}`` on the runs of a data set whose run names carry its name:
    every data set but MRPC under its own name, whose runs keep the tags they always had ({})."""
    return {"task": data.kind} if run_name_prefix(data) else {}


def anchors_of(data: PairData) -> Anchors | None:
    """Published results on the data set's test split, for the benchmark report (None: none known)."""
    return DATASETS[data.kind].anchors


def published_anchors(name: str | None) -> Anchors | None:
    """The anchors of the named data set whose name is ``name`` (any case; None: the default data
    set), for reports whose context does not carry the data set's own."""
    entry = DATASETS.get((name or PairDataSpec().dataset).lower())
    return entry.anchors if entry else None


# Whether a run read a release the data set's entry knows (its ``split_sizes`` name the release's
# content hashes: MRPC's MSR files), or other files in its format (an edited label included), so that
# no study pools the two.
RELEASE_PARAM, RELEASE, OWN_FILES = "data_release", "release", "own"


def release_of(data: PairData) -> str:
    """:data:`RELEASE` when ``data``'s content is a release its entry knows, else :data:`OWN_FILES`."""
    return RELEASE if data.content_hash in DATASETS[data.kind].split_sizes else OWN_FILES


def known_release(content_hash: str) -> str | None:
    """The name of the data set whose known release has digest ``content_hash``; None for other data."""
    return next((name for name, entry in DATASETS.items() if content_hash in entry.split_sizes), None)


def known_split_sizes(content_hash: str) -> dict[str, int] | None:
    """``{split: pairs}`` of the data set whose content has digest ``content_hash``, where an entry
    states them (a fixed release such as MRPC); None for any other data."""
    name = known_release(content_hash)
    return dict(DATASETS[name].split_sizes[content_hash]) if name else None


def dataset_params(data: PairData) -> dict[str, str]:
    """The params naming a run's data set: ``dataset``, ``dataset_hash`` (and the entry's second name for
    it), :data:`RELEASE_PARAM` where the entry knows its releases, and the pairs its splits share
    (``overlap_train_dev``, ``overlap_train_test``, ``overlap_dev_test``)."""
    entry = DATASETS[data.kind]
    return {
        "dataset": data.name,
        "dataset_hash": data.content_hash,
        **({entry.hash_param: data.content_hash} if entry.hash_param else {}),
        **({RELEASE_PARAM: release_of(data)} if entry.split_sizes else {}),
        **data.split_overlap,
    }
