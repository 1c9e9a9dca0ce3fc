"""The strict, streaming reader of tab-separated pair files (the ``tsv`` data set's and the MSR
release's format).

One pair per line, split on tabs only (quotes are text); UTF-8 with or without BOM; LF, CRLF or
CR line ends; trailing blank lines ignored; surrounding whitespace of every field dropped. A
header row names the columns (``sentence1``, ``sentence2``, ``label``, optionally ``id``; other
columns are ignored; without ``id`` a pair's id is its line number); column flags rename columns
or give 0-based indexes. Without a header, columns default to the standard order (sentence1,
sentence2, label, id = 0, 1, 2, 3; ids are line numbers unless ``id_column`` is set).

Labels are text; one that is an integer is written canonically ("01" reads as "1"). The label set
comes from the train file, in this order (the class ids): numeric when every label is an
integer, else the strings sorted by code point. Two labels that differ only by case or spacing
("yes", "Yes") are refused, naming both lines, as are NUL and the characters other readers take
for a line end (U+0085, U+2028 …) in any field. An error quotes a file's first line only when it
reads as a pair file's header (at least three tab-separated fields) in a file of the user running
the reader.

A graded task's file (``score_range``) has a score for a label: a decimal number within the task's
range (:func:`harness.datasets.graded_reader.parse_score`), read as a float; there is no label set.
A format whose rows may carry notes after its last column (STS-B) gives ``min_columns``: every row
needs that many fields, and the fields past them are ignored (still part of the digest).
"""

from __future__ import annotations

import gc
import hashlib
import io
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.datasets.graded_reader import parse_score
from harness.datasets.types import Pair
from harness.errors import UserError

ROLES = ("sentence1", "sentence2", "label", "id")
FLAGS = {role: f"--data.{role}_column" for role in ROLES}
_INTEGER = re.compile(r"[+-]?[0-9]+")
# NUL (ends a C string) and the characters other readers take for a line end (str.splitlines:
# VT, FF, FS, GS, RS, NEL U+0085, U+2028, U+2029): inside a field, another reader of the same file
# would see other pairs than the ones the data set's digest names. (MRPC itself holds a U+0012.)
_CONTROL = re.compile("[\x00\x0b\x0c\x1c-\x1e\x85\u2028\u2029]")
_INDEX = re.compile(r"[0-9]+")


@dataclass(frozen=True)
class PairFile:
    """One file read by :func:`read_pair_tsv`."""

    pairs: list[Pair]
    labels: list[str]  # the label names the pairs index: given, or this file's own in label order
    digest: str  # sha256 hex of the normalised text (BOM stripped, LF line ends, no trailing blank lines)


def canonical_label(label: str) -> str:
    """A label as the data set names it: stripped, an integer without sign or leading zeros."""
    label = label.strip()
    return str(int(label)) if _INTEGER.fullmatch(label) else label


def label_order(labels) -> list[str]:
    """Returns the distinct canonical labels sorted: numerically when all are integers, else as strings."""
    distinct = set(map(canonical_label, labels))
    if all(_INTEGER.fullmatch(label) for label in distinct):
        return sorted(distinct, key=int)
    return sorted(distinct)


def _open(path: Path, flag: str | None):
    """The file as text: UTF-8, BOM stripped, universal newlines (LF, CRLF and CR all read as LF)."""
    named = f"{flag}={path}" if flag else str(path)
    try:
        return open(path, encoding="utf-8-sig", newline=None)
    except FileNotFoundError:
        raise UserError(f"{named}: file not found; give a tab-separated pair file") from None
    except IsADirectoryError:
        raise UserError(f"{named}: is a folder; give a tab-separated pair file") from None
    except OSError as error:
        raise UserError(f"{named}: cannot read ({error.strerror or error})") from None


@contextmanager
def _collector_paused():
    """Pause CPython's cyclic garbage collector: a read makes millions of small objects and no
    cycles, and the collections they trigger are a large share of the read time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _undecodable(raw_lines, name: str) -> UserError:
    """The error naming the first line with bytes that are not UTF-8 (an error path: rescans the bytes)."""
    line = 1
    for raw in raw_lines:  # split at b"\n": a UTF-8 sequence never contains that byte
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as error:
            before = raw[: error.start]
            line += before.count(b"\r") - before.count(b"\r\n")  # CR-only line ends before the byte
            byte = raw[error.start]
            return UserError(f"{name}:{line}: not valid UTF-8 (byte {byte:#04x}); re-save the file as UTF-8")
        line += raw.count(b"\n") + raw.count(b"\r") - raw.count(b"\r\n")
    return UserError(f"{name}: not valid UTF-8; re-save the file as UTF-8")


def shown_header(names: list[str], path: Path) -> str:
    """The header's names for an error message, or why they are not shown: a first line with fewer
    than three fields is not a pair file's header, and another user's file is not echoed."""
    try:
        own = not isinstance(path, Path) or path.stat().st_uid == os.getuid()
    except OSError:
        own = False
    if len(names) < 3:
        return f"the first line has {len(names)} tab-separated field(s): not a pair file's header"
    if not own:
        return f"{len(names)} columns; not shown: the file belongs to another user"
    return ", ".join(names)[:200]


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
            raise UserError(
                f"{flag}={value}: a file without a header needs a 0-based column index; "
                f"give a number or set --data.has_header=true"
            )
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise UserError(f"{flag}={value}: expected a column name or a 0-based index")
    if isinstance(value, int):
        if not 0 <= value < width:
            raise UserError(
                f"{flag}={value}: column index out of range; {path}:1 has {width} columns (0 to {width - 1})"
            )
        return value
    if names.count(value) != 1:
        problem = "twice" if names.count(value) else "no column"
        raise UserError(
            f"{path}:1: {problem} {value!r} in the header ({shown_header(names, path)}); "
            f"rename the column or set {flag}"
        )
    return names.index(value)


def _columns(columns: dict, header: list[str] | None, width: int, path: Path) -> tuple[int, int, int, tuple[int, ...]]:
    """The indexes of sentence1, sentence2 and label, and of the id columns (none: ids are line numbers)."""
    ids = columns.pop("id")
    if ids is None:
        names = [name.strip() for name in header] if header is not None else []
        ids = ("id",) if "id" in names else ()
    elif not isinstance(ids, tuple):
        ids = (ids,)
    roles = [*columns, *("id" for _ in ids)]
    indexes = [_column_index(role, value, header, width, path) for role, value in zip(roles, [*columns.values(), *ids])]
    taken = {}
    for role, index in zip(roles, indexes):
        if taken.setdefault(index, role) != role or (role == "id" and indexes.count(index) > 1):
            raise UserError(
                f"{FLAGS[role]}: column {index} of {path} is already the {taken[index]} column; "
                f"give each of {', '.join(ROLES)} its own column"
            )
    return indexes[0], indexes[1], indexes[2], tuple(indexes[3:])


def read_pair_tsv(
    path: str | os.PathLike,
    labels: list[str] | None = None,
    *,
    sentence1_column: str | int = "sentence1",
    sentence2_column: str | int = "sentence2",
    label_column: str | int = "label",
    id_column: str | int | tuple[str | int, ...] | None = None,
    has_header: bool = True,
    header: tuple[str, ...] | None = None,
    flag: str | None = "--data.train",
    labels_from: str = "the train labels",
    content: bytes | None = None,
    score_range: tuple[float, float] | None = None,
    min_columns: int | None = None,
) -> PairFile:
    """Read one pair file strictly, streaming it line by line.

    ``labels``: the label set of the data set (dev, test, a fixed set); None reads a train file,
    whose labels become the set (at least 2), named ``labels_from`` in errors. ``id_column``: one
    column or a tuple of them (MSR's two ids). ``header``: the exact header the format requires.
    ``flag`` names the option that gave ``path`` in error messages. ``content``: the file's bytes
    when they are not on disk (a download; ``path`` names them). ``score_range``: a graded task's
    (low, high): the label column holds scores, read as floats (``labels`` is then ignored).
    ``min_columns``: rows need at least this many fields and the rest are ignored (None: every row
    as wide as the first). Every malformed row raises UserError naming ``file:line``.

    Returns:
        a PairFile: pairs in file order, the label names they index ([] for scores: a pair's label
        is its score), the normalised text's sha256.
    """
    path = Path(path) if content is None else path
    named = f"{flag}={path}" if flag else str(path)
    columns = {"sentence1": sentence1_column, "sentence2": sentence2_column, "label": label_column, "id": id_column}
    graded = score_range is not None
    fixed = labels is not None or graded
    found = [] if graded else list(labels or [])  # label names; a pair's label indexes this list
    folded = {}  # a train label without case and spacing -> (its text, where it was first read)
    index_of = {label: index for index, label in enumerate(found)}  # raw label text -> index
    digest, hashing = hashlib.sha256(), []  # normalised text, hashed in chunks of lines
    rows = ([], [], [], [])  # label index, ids, sentence1, sentence2: one Pair per row at the end
    first_line = {}  # ids -> line of their first use
    width = blank = None
    if content is None:
        opened = _open(path, flag)
    else:
        opened = io.TextIOWrapper(io.BytesIO(content), encoding="utf-8-sig", newline=None)
    with opened as handle, _collector_paused():
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
                control = _CONTROL.search(line)
                if control:
                    column = line[: control.start()].count("\t")
                    raise UserError(
                        f"{path}:{number}: control character U+{ord(control.group()):04X} in column "
                        f"{column}; remove it (NUL and line separators would split or end the pair in "
                        f"other readers)"
                    )
                fields = line.split("\t")  # quoting off: a '"' is just a character
                if width is None:
                    width = len(fields) if min_columns is None else min_columns
                    found_header = [field.strip() for field in fields]
                    if header is not None and found_header != list(header):
                        expected, seen = "\t".join(header), shown_header(found_header, path)
                        raise UserError(f"{path}:1: header must be {expected!r}, found: {seen}")
                    header_fields = fields if has_header else None
                    first, second, label_at, id_at = _columns(dict(columns), header_fields, width, path)
                    single_id = id_at[0] if len(id_at) == 1 else None
                    if has_header:
                        continue
                if len(fields) != width and (min_columns is None or len(fields) < width):
                    expected = f"{width}" if min_columns is None else f"at least {width}"
                    raise UserError(
                        f"{path}:{number}: expected {expected} tab-separated fields, found {len(fields)} "
                        f"(quotes are text here: a tab always separates fields)"
                    )
                sentence1, sentence2 = fields[first].strip(), fields[second].strip()
                if not sentence1 or not sentence2:
                    role, column = ("sentence1", first) if not sentence1 else ("sentence2", second)
                    raise UserError(f"{path}:{number}: empty {role} (column {column}); every pair needs two sentences")
                label = (
                    parse_score(fields[label_at], score_range, f"{path}:{number}", label_at)
                    if graded
                    else index_of.get(fields[label_at])
                )
                if label is None:
                    label = _new_label(
                        fields[label_at], found, index_of, fixed, f"{path}:{number}", labels_from, folded
                    )
                if single_id is not None:
                    identifiers = (fields[single_id].strip(),)
                elif id_at:
                    identifiers = tuple(fields[index].strip() for index in id_at)
                else:
                    identifiers = (str(number),)
                if id_at:
                    if not all(identifiers):
                        column = id_at[identifiers.index("")]
                        raise UserError(
                            f"{path}:{number}: empty id (column {column}); give every pair an id or drop the column"
                        )
                    if first_line.setdefault(identifiers, number) != number:
                        shown = identifiers[0] if len(identifiers) == 1 else "/".join(identifiers)
                        raise UserError(
                            f"{path}:{number}: id {shown!r} already used at line "
                            f"{first_line[identifiers]}; ids must be unique within a file"
                        )
                rows[0].append(label)
                rows[1].append(identifiers)
                rows[2].append(sentence1)
                rows[3].append(sentence2)
        except UnicodeDecodeError:
            raw = io.BytesIO(content) if content is not None else path.open("rb")
            with raw:
                raise _undecodable(raw, str(path)) from None
        if width is None:
            raise UserError(f"{named}: file is empty; give a tab-separated pair file")
        if not rows[0]:
            raise UserError(f"{named}: no pairs after the header")
        if not hashing[-1].endswith("\n"):  # the last line: normalised text ends in one line end
            hashing.append("\n")
        digest.update("".join(hashing).encode("utf-8"))
        if not fixed:
            found, rows = _sorted_labels(found, rows, named)
        pairs = list(map(Pair, *rows))
    return PairFile(pairs=pairs, labels=found, digest=digest.hexdigest())


def _new_label(
    raw: str,
    found: list[str],
    index_of: dict[str, int],
    fixed: bool,
    where: str,
    labels_from: str,
    folded: dict[str, tuple[str, str]] | None = None,
) -> int:
    """Index of a label text not seen before in this file: known in canonical form, new (train) or an
    error; a new train label that differs from a known one only by case or spacing is an error."""
    label = canonical_label(raw)
    if not label:
        raise UserError(f"{where}: empty label; every pair needs one")
    if label not in index_of:
        if fixed:
            known = ", ".join(found)[:200]
            raise UserError(f"{where}: label {label!r} is not among {labels_from} ({known}); fix the row")
        if folded is not None:
            other, first = folded.setdefault(" ".join(label.casefold().split()), (label, where))
            if other != label:
                raise UserError(
                    f"{where}: label {label!r} differs from {other!r} ({first}) only by case or "
                    f"spacing; write each class one way"
                )
        index_of[label] = len(found)
        found.append(label)
    index_of[raw] = index_of[label]
    return index_of[label]


def _sorted_labels(found: list[str], rows: tuple[list, ...], where: str) -> tuple[list[str], tuple[list, ...]]:
    """Put a train file's labels (first-seen order) in label order and renumber its rows."""
    if len(found) < 2:
        raise UserError(
            f"{where}: every pair has label {found[0]!r}; a pair data set needs at least "
            f"2 classes (is {FLAGS['label']} the right column?)"
        )
    order = label_order(found)
    renumber = [order.index(label) for label in found]
    return order, (list(map(renumber.__getitem__, rows[0])), *rows[1:])
