"""Sentence-pair data sets: one interface for every stage, and a strict streaming TSV reader.

A data set is train / dev / test lists of :class:`Pair` (ids, sentence 1, sentence 2, label)
over k >= 2 labels. MRPC (``harness.mrpc``) is one implementation; any tab-separated file is the
other (``load_pair_data(dataset="tsv", train=..., dev=..., test=...)``).

The TSV format: a header row naming ``sentence1``, ``sentence2``, ``label`` and optionally
``id`` (other columns are ignored; without ``id`` a pair's id is its line number); one pair per
line, split on tabs only (quotes are text); UTF-8 with or without BOM; LF, CRLF or CR line ends;
trailing blank lines ignored; surrounding whitespace of every field dropped. Column flags rename
columns or give 0-based indexes; without a header, columns default to the standard order
(sentence1, sentence2, label, id = 0, 1, 2, 3; ids are line numbers unless ``id_column`` is set).

Labels are text; one that is an integer is written canonically ("01" reads as "1"). The label set
comes from train, in this order (the class ids): numeric when every label is an integer, else the
strings sorted by code point. With 2 labels, F1 is the binary F1 of ``positive_label`` (default:
the later label, MRPC's "1"); with more, macro F1.
"""

from __future__ import annotations

import gc
import hashlib
import os
import re
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from harness.errors import UserError

SPLITS = ("train", "dev", "test")
ROLES = ("sentence1", "sentence2", "label", "id")
FLAGS = {role: f"--data.{role}_column" for role in ROLES}
_INTEGER = re.compile(r"[+-]?[0-9]+")
_INDEX = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class Pair:
    """One labelled pair: ``label`` indexes ``PairData.labels``, ``ids`` align with ``PairData.id_columns``."""

    label: int
    ids: tuple[str, ...]
    sentence1: str
    sentence2: str


@dataclass(frozen=True)
class PairData:
    """A pair data set: three splits, the label names (index = class id) and a content hash."""

    name: str  # "mrpc", or the TSV data set's name
    labels: list[str]  # label names; labels[pair.label] is a pair's label
    id_columns: tuple[str, ...]  # names of pair.ids in prediction files: MRPC ("id1", "id2"), TSV ("id",)
    train: list[Pair]
    dev: list[Pair]
    test: list[Pair]
    content_hash: str  # sha256 over the sha256 of each file's normalised text, one hex digest per line
    positive_label: str | None = None  # 2 labels: the class binary F1 is about (default: labels[-1])

    def __post_init__(self):
        if len(self.labels) < 2 or len(set(self.labels)) != len(self.labels):
            raise ValueError(f"a pair data set needs at least 2 distinct labels, got {self.labels}")
        if self.positive_label is None and len(self.labels) == 2:
            object.__setattr__(self, "positive_label", self.labels[-1])
        if self.positive_label is not None and (len(self.labels) != 2 or self.positive_label not in self.labels):
            raise ValueError(f"positive_label {self.positive_label!r} must be one of 2 labels, got {self.labels}")
        for split in SPLITS:
            classes = {pair.label for pair in self.split(split)}
            id_widths = {len(pair.ids) for pair in self.split(split)}
            if not classes <= set(range(len(self.labels))) or id_widths - {len(self.id_columns)}:
                raise ValueError(f"{split} pairs have labels {sorted(classes)} and {sorted(id_widths)} ids; "
                                 f"expected indexes into {self.labels} and {len(self.id_columns)} ids")

    @property
    def num_classes(self) -> int:
        return len(self.labels)

    @property
    def positive_class(self) -> int | None:
        """Class id of ``positive_label`` (None for more than 2 labels)."""
        return None if self.positive_label is None else self.labels.index(self.positive_label)

    @property
    def f1_average(self) -> str:
        """``"binary"`` (F1 of the positive class) for 2 labels, ``"macro"`` for more: sklearn's ``average``."""
        return "binary" if self.num_classes == 2 else "macro"

    def split(self, name: str) -> list[Pair]:
        if name not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {name!r}")
        return getattr(self, name)

    def sentences(self, *splits: str) -> list[str]:
        """Unique sentences of the named splits (default: all), first seen first, sentence1 before sentence2."""
        pairs = (pair for name in splits or SPLITS for pair in self.split(name))
        return list(dict.fromkeys(sentence for pair in pairs for sentence in (pair.sentence1, pair.sentence2)))

    def label_counts(self, split: str) -> dict[str, int]:
        """Pairs per label name in a split, every label listed (0 when absent), in label order."""
        counts = Counter(pair.label for pair in self.split(split))
        return {label: counts[index] for index, label in enumerate(self.labels)}

    def ids_by_column(self, pairs: list[Pair]) -> dict[str, list[str]]:
        """The ids of ``pairs`` as columns named by ``id_columns`` (the first columns of a predictions file)."""
        return {column: [pair.ids[k] for pair in pairs] for k, column in enumerate(self.id_columns)}


@dataclass(frozen=True)
class PairFile:
    """One file read by :func:`read_pair_tsv`."""

    pairs: list[Pair]
    labels: list[str]  # the label names the pairs index: given, or this file's own in label order
    digest: str  # sha256 hex of the normalised text (BOM stripped, LF line ends, no trailing blank lines)


def combine_digests(digests: list[str]) -> str:
    """sha256 over hex digests, one per line: a data set's content hash from its files' digests."""
    return hashlib.sha256("".join(digest + "\n" for digest in digests).encode("ascii")).hexdigest()


def _canonical(label: str) -> str:
    label = label.strip()
    return str(int(label)) if _INTEGER.fullmatch(label) else label


def label_order(labels) -> list[str]:
    """Returns the distinct canonical labels sorted: numerically when all are integers, else as strings."""
    distinct = set(map(_canonical, labels))
    if all(_INTEGER.fullmatch(label) for label in distinct):
        return sorted(distinct, key=int)
    return sorted(distinct)


def _open(path: Path, flag: str):
    """The file as text: UTF-8, BOM stripped, universal newlines (LF, CRLF and CR all read as LF)."""
    try:
        return open(path, encoding="utf-8-sig", newline=None)
    except FileNotFoundError:
        raise UserError(f"{flag}={path}: file not found; give a tab-separated pair file") from None
    except IsADirectoryError:
        raise UserError(f"{flag}={path}: is a folder; give a tab-separated pair file") from None
    except OSError as error:
        raise UserError(f"{flag}={path}: cannot read ({error.strerror or error})") from None


@contextmanager
def _collector_paused():
    """Pause CPython's cyclic garbage collector: a read makes millions of small objects and no
    cycles, and collections triggered by them cost about a quarter of the read time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _undecodable(path: Path) -> UserError:
    """The error naming the first line with bytes that are not UTF-8 (an error path: rescans the file)."""
    line = 1
    with path.open("rb") as handle:
        for raw in handle:  # split at b"\n": a UTF-8 sequence never contains that byte
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as error:
                before = raw[: error.start]
                line += before.count(b"\r") - before.count(b"\r\n")  # CR-only line ends before the byte
                byte = raw[error.start]
                return UserError(f"{path}:{line}: not valid UTF-8 (byte {byte:#04x}); re-save the file as UTF-8")
            line += raw.count(b"\n") + raw.count(b"\r") - raw.count(b"\r\n")
    return UserError(f"{path}: not valid UTF-8; re-save the file as UTF-8")


def _column_index(role: str, value, header: list[str] | None, width: int, path: Path) -> int:
    """The 0-based index of one role's column, checked against the header or the first row."""
    flag = FLAGS[role]
    names = [name.strip() for name in header] if header is not None else []
    if isinstance(value, str) and value not in names:
        if _INDEX.fullmatch(value.strip()):  # "2" from the command line: an index
            value = int(value)
        elif header is None and value == role:  # a default name without a header: the standard order
            value = ROLES.index(role)
        elif header is None:
            raise UserError(f"{flag}={value}: a file without a header needs a 0-based column index; "
                            f"give a number or set --data.has_header=true")
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise UserError(f"{flag}={value}: expected a column name or a 0-based index")
    if isinstance(value, int):
        if not 0 <= value < width:
            raise UserError(f"{flag}={value}: column index out of range; {path}:1 has {width} columns "
                            f"(0 to {width - 1})")
        return value
    if names.count(value) != 1:
        problem = "twice" if names.count(value) else "no column"
        raise UserError(f"{path}:1: {problem} {value!r} in the header ({', '.join(names)[:200]}); "
                        f"rename the column or set {flag}")
    return names.index(value)


def _columns(columns: dict, header: list[str] | None, width: int, path: Path) -> dict[str, int | None]:
    """Role -> column index (``id``: None when ids are line numbers)."""
    if columns["id"] is None:
        names = [name.strip() for name in header] if header is not None else []
        columns = {**columns, "id": "id" if "id" in names else None}
    indexes = {role: None if value is None else _column_index(role, value, header, width, path)
               for role, value in columns.items()}
    taken = {}
    for role, index in indexes.items():
        if index is not None and taken.setdefault(index, role) != role:
            raise UserError(f"{FLAGS[role]}: column {index} of {path} is already the {taken[index]} column; "
                            f"give each of {', '.join(ROLES)} its own column")
    return indexes


def read_pair_tsv(
    path: str | os.PathLike, labels: list[str] | None = None, *,
    sentence1_column: str | int = "sentence1", sentence2_column: str | int = "sentence2",
    label_column: str | int = "label", id_column: str | int | None = None, has_header: bool = True,
    flag: str = "--data.train",
) -> PairFile:
    """Read one pair file strictly, streaming it line by line.

    ``labels``: the label set of the data set (dev, test); None reads a train file, whose labels
    become the set (at least 2). ``flag`` names the option that gave ``path`` in error messages.
    Every malformed row raises UserError naming ``file:line``.

    Returns:
        a PairFile: pairs in file order, the label names they index, the normalised text's sha256.
    """
    path = Path(path)
    columns = {"sentence1": sentence1_column, "sentence2": sentence2_column, "label": label_column, "id": id_column}
    fixed = labels is not None
    found = list(labels or [])  # label names; a pair's label indexes this list
    index_of = {label: index for index, label in enumerate(found)}  # raw label text -> index
    digest, hashing = hashlib.sha256(), []  # normalised text, hashed in chunks of lines
    rows = ([], [], [], [])  # label index, ids, sentence1, sentence2: one Pair per row at the end
    first_line = {}  # id -> line of its first use
    width = indexes = blank = None
    with _open(path, flag) as handle, _collector_paused():
        try:
            for number, line in enumerate(handle, start=1):  # each line ends in "\n" except maybe the last
                if line.isspace():
                    blank = blank or number
                    continue
                if blank is not None:
                    raise UserError(f"{path}:{blank}: blank line before the end of the file; delete it")
                if len(hashing) == 4096:
                    digest.update("".join(hashing).encode("utf-8"))
                    hashing.clear()
                hashing.append(line)
                fields = line.split("\t")  # quoting off: a '"' is just a character
                if width is None:
                    width = len(fields)
                    indexes = _columns(columns, fields if has_header else None, width, path)
                    first, second, label_at, id_at = (indexes[role] for role in ROLES)
                    if has_header:
                        continue
                if len(fields) != width:
                    raise UserError(f"{path}:{number}: expected {width} tab-separated fields, found {len(fields)} "
                                    f"(quotes are text here: a tab always separates fields)")
                sentence1, sentence2 = fields[first].strip(), fields[second].strip()
                if not sentence1 or not sentence2:
                    role = "sentence1" if not sentence1 else "sentence2"
                    raise UserError(f"{path}:{number}: empty {role} (column {indexes[role]}); "
                                    f"every pair needs two sentences")
                label = index_of.get(fields[label_at])
                if label is None:
                    label = _new_label(fields[label_at], found, index_of, fixed, f"{path}:{number}")
                if id_at is None:
                    identifier = str(number)
                else:
                    identifier = fields[id_at].strip()
                    if not identifier:
                        raise UserError(f"{path}:{number}: empty id (column {id_at}); give every pair an id "
                                        f"or drop the column")
                    if first_line.setdefault(identifier, number) != number:
                        raise UserError(f"{path}:{number}: id {identifier!r} already used at line "
                                        f"{first_line[identifier]}; ids must be unique within a file")
                rows[0].append(label)
                rows[1].append((identifier,))
                rows[2].append(sentence1)
                rows[3].append(sentence2)
        except UnicodeDecodeError:
            raise _undecodable(path) from None
        if width is None:
            raise UserError(f"{flag}={path}: file is empty; give a tab-separated pair file")
        if not rows[0]:
            raise UserError(f"{flag}={path}: no pairs after the header")
        if not hashing[-1].endswith("\n"):  # the last line: normalised text ends in one line end
            hashing.append("\n")
        digest.update("".join(hashing).encode("utf-8"))
        if not fixed:
            found, rows = _sorted_labels(found, rows, f"{flag}={path}")
        pairs = list(map(Pair, *rows))
    return PairFile(pairs=pairs, labels=found, digest=digest.hexdigest())


def _new_label(raw: str, found: list[str], index_of: dict[str, int], fixed: bool, where: str) -> int:
    """Index of a label text not seen before in this file: known in canonical form, new (train) or an error."""
    label = _canonical(raw)
    if not label:
        raise UserError(f"{where}: empty label; every pair needs one")
    if label not in index_of:
        if fixed:
            known = ", ".join(found)[:200]
            raise UserError(f"{where}: label {label!r} is not among the train labels ({known}); "
                            f"fix the row or the train file")
        index_of[label] = len(found)
        found.append(label)
    index_of[raw] = index_of[label]
    return index_of[label]


def _sorted_labels(found: list[str], rows: tuple[list, ...], where: str) -> tuple[list[str], tuple[list, ...]]:
    """Put a train file's labels (first-seen order) in label order and renumber its rows."""
    if len(found) < 2:
        raise UserError(f"{where}: every pair has label {found[0]!r}; a pair data set needs at least "
                        f"2 classes (is {FLAGS['label']} the right column?)")
    order = label_order(found)
    renumber = [order.index(label) for label in found]
    return order, (list(map(renumber.__getitem__, rows[0])), *rows[1:])


def positive_label_of(labels: list[str], requested: str | int | None) -> str | None:
    """The class binary F1 is about: ``requested`` (checked), else the later of 2 labels; None for more."""
    if requested is None:
        return labels[-1] if len(labels) == 2 else None
    label = _canonical(str(requested))
    if len(labels) != 2:
        raise UserError(f"--data.positive_label={requested}: only for 2-label data sets; this one has "
                        f"{len(labels)} labels and reports macro F1")
    if label not in labels:
        raise UserError(f"--data.positive_label={requested}: not a label of the data set ({', '.join(labels)})")
    return label


def dataset_name(train: Path) -> str:
    """A TSV data set's default name: the train file's stem, or its folder's name when the stem is ``train``."""
    if train.stem.lower() == "train" and train.resolve().parent.name:
        return train.resolve().parent.name
    return train.stem


def load_pair_data(
    dataset: str = "mrpc", mrpc_dir: str | None = None,
    train: str | os.PathLike | None = None, dev: str | os.PathLike | None = None, test: str | os.PathLike | None = None,
    sentence1_column: str | int = "sentence1", sentence2_column: str | int = "sentence2",
    label_column: str | int = "label", id_column: str | int | None = None, has_header: bool = True,
    positive_label: str | int | None = None, name: str | None = None,
) -> PairData:
    """The pair data set a run's ``--data.*`` flags name: ``mrpc`` (MSR files + GLUE split, from
    ``mrpc_dir``) or ``tsv`` (three pair files read by :func:`read_pair_tsv`, labels from train).

    Returns:
        the PairData; any problem with the files or flags raises a one-line UserError.
    """
    files = {"train": train, "dev": dev, "test": test}
    if dataset == "mrpc":
        given = [split for split, path in files.items() if path is not None]
        if given:
            raise UserError(f"--data.{given[0]}: pair files are read only with --data.dataset=tsv "
                            f"(MRPC's splits are fixed)")
        from harness.mrpc import load_mrpc_data  # harness.mrpc builds on this module's types

        data = load_mrpc_data(mrpc_dir)
        if positive_label is not None:
            data = replace(data, positive_label=positive_label_of(data.labels, positive_label))
        return replace(data, name=name) if name else data
    if dataset != "tsv":
        raise UserError(f"--data.dataset={dataset}: expected mrpc or tsv")
    for split, path in files.items():
        if path is None:
            raise UserError(f"--data.{split}: required with --data.dataset=tsv (a tab-separated pair file)")
    columns = dict(sentence1_column=sentence1_column, sentence2_column=sentence2_column, label_column=label_column,
                   id_column=id_column, has_header=has_header)
    read = {"train": read_pair_tsv(train, flag="--data.train", **columns)}
    for split in ("dev", "test"):
        read[split] = read_pair_tsv(files[split], read["train"].labels, flag=f"--data.{split}", **columns)
    for later, earlier in (("dev", "train"), ("test", "train"), ("test", "dev")):
        if read[later].digest == read[earlier].digest:
            raise UserError(f"--data.{later}={files[later]}: same content as --data.{earlier}={files[earlier]}; "
                            f"each split needs its own pairs")
    labels = read["train"].labels
    return PairData(name=name or dataset_name(Path(train)), labels=labels, id_columns=("id",),
                    train=read["train"].pairs, dev=read["dev"].pairs, test=read["test"].pairs,
                    content_hash=combine_digests([read[split].digest for split in SPLITS]),
                    positive_label=positive_label_of(labels, positive_label))
