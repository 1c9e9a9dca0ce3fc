"""The ``--data.*`` flags that name a pair data set, declared once: the pretraining and the pair
data modules take them (as keyword arguments, so the flags stay ``--data.dataset``,
``--data.train``, …) and a benchmark config's ``dataset:`` section holds the same keys."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, fields

from harness.datasets.overlap import DEFAULT_MAX_FRACTION
from harness.errors import UserError


@dataclass(frozen=True)
class PairDataSpec:
    """Which pair data set a run reads.

    Args:
        dataset: the named data set (``harness.datasets.registry``): ``mrpc`` (the MSR files and
            the GLUE split), ``sick-e`` (SICK's entailment classes), ``sick-r`` (SICK's relatedness,
            graded 1–5), ``stsb`` (the STS Benchmark, graded 0–5) or ``tsv`` (the three files
            ``train``, ``dev``, ``test``).
        mrpc_dir: folder with the MSR release files (default: ``$MRPC_DIR`` or ``data/mrpc``).
        data_dir: folder with the release files of another named data set (``sick-e``, ``sick-r``,
            ``stsb``; default: its variable, ``$SICK_DIR`` / ``$STSB_DIR``, else ``$DATA_ROOT/<folder>``).
        train: a ``tsv`` data set's train file: tab-separated, a header naming ``sentence1``,
            ``sentence2``, ``label`` and optionally ``id``; its labels are the label set.
        dev: a ``tsv`` data set's dev file (model selection), in the train file's format.
        test: a ``tsv`` data set's test file, in the train file's format.
        sentence1_column: the first sentence's column: another name, or a 0-based index.
        sentence2_column: the second sentence's column: another name, or a 0-based index.
        label_column: the label's column: another name, or a 0-based index.
        id_column: the pair id's column (default: ``id`` when the header has it, else line numbers).
        has_header: whether the first line of each file names the columns.
        positive_label: with 2 labels, the one F1 is about (default: the later one, MRPC's "1").
        name: the data set's name in run names, tags and reports (default: the data set's own;
            a ``tsv`` set's comes from its train file).
        max_split_overlap: the share of the smaller of two splits that may be pairs of the other
            (either order, as a model sees them: case, spacing and invisible characters ignored;
            ``harness.datasets.overlap``): above it the data
            set is refused; 0 allows none, 1 any.
    """

    dataset: str = "mrpc"
    mrpc_dir: str | None = None
    data_dir: str | None = None
    train: str | None = None
    dev: str | None = None
    test: str | None = None
    sentence1_column: str | int = "sentence1"
    sentence2_column: str | int = "sentence2"
    label_column: str | int = "label"
    id_column: str | int | None = None
    has_header: bool = True
    positive_label: str | None = None
    name: str | None = None
    max_split_overlap: float = DEFAULT_MAX_FRACTION


SPEC_KEYS = tuple(field.name for field in fields(PairDataSpec))
PATH_KEYS = ("mrpc_dir", "data_dir", "train", "dev", "test")  # the keys that name files or folders


def given_flags(settings: dict) -> list[str]:
    """The ``--data.*`` flags of ``settings`` (a stage's parsed ``data`` section) that name its pair
    data set where they differ from the defaults, quoted for a shell: what a command that must read
    the same data set (the finetuning of a pretrained encoder) repeats."""
    flags = []
    for field in fields(PairDataSpec):
        value = settings.get(field.name, field.default)
        if value is None or value == field.default:
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        flags.append(f"--data.{field.name}={shlex.quote(text)}")
    return flags


def refuse_pair_files(spec: PairDataSpec, owner: str) -> None:
    """A data set whose splits are fixed (``owner``: "MRPC's") takes no ``--data.train/dev/test``:
    a one-line UserError naming the first one given."""
    given = [split for split in ("train", "dev", "test") if getattr(spec, split) is not None]
    if given:
        raise UserError(
            f"--data.{given[0]}: pair files are read only with --data.dataset=tsv ({owner} splits are fixed)"
        )
