"""A cell's predictions file (``cells/<cell_hash>.predictions.csv.gz``): written as the same bytes
for the same predictions, and read back only from beside its cell, only as far as its data set
allows: the rows are bounded by the data set's split sizes (a release such as MRPC states them; any
other data by :data:`DEFAULT_MAX_PAIRS`), never by what the file or its cell claims, so a gzip
bomb or a huge file is refused after a few MB whatever its recorded sha256."""

from __future__ import annotations

import gzip
import hashlib
import io
import zlib
from pathlib import Path

import pandas as pd

from benchmarks.results_files.task_predictions import Predictions
from benchmarks.stats.pairing import ID_COLUMNS
from harness.datasets.registry import known_split_sizes
from harness.errors import UserError

PREDICTIONS_SUFFIX = ".predictions.csv.gz"
SPLITS = ("dev", "test")
TEXT_COLUMNS = ("sentence1", "sentence2")  # data, never written to a results folder
PROBABILITY_DECIMALS = 6
DEFAULT_MAX_PAIRS = 100_000  # a split's pairs at most, for data whose sizes no registry entry states
ROW_BYTES = 512  # a row's split, ids, label and prediction, at most
READ_BYTES = 1 << 20


def predictions_bytes(frames: dict[str, pd.DataFrame]) -> bytes:
    """Dev and test predictions as one gzipped CSV with a ``split`` column, the same bytes for the
    same predictions (no timestamp in the gzip header)."""
    parts = []
    for split in SPLITS:
        frame = frames[split].drop(columns=[column for column in TEXT_COLUMNS if column in frames[split]])
        probabilities = [column for column in frame if column == "prob" or column.startswith("prob_")]
        frame = frame.assign(
            **{column: frame[column].astype(float).round(PROBABILITY_DECIMALS) for column in probabilities}
        )
        parts.append(frame.assign(split=split)[["split", *frame.columns]])
    text = pd.concat(parts, ignore_index=True).to_csv(index=False).encode("utf-8")
    buffer = io.BytesIO()
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as handle:
        handle.write(text)
    return buffer.getvalue()


def split_bounds(data_digest: str) -> dict[str, int]:
    """The most pairs each split of the data with ``data_digest`` can have."""
    sizes = known_split_sizes(data_digest) or {}
    return {split: sizes.get(split, DEFAULT_MAX_PAIRS) for split in SPLITS}


def predictions_path(cells_dir: Path, cell_path: Path, cell_hash: str, recorded: str) -> Path:
    """The predictions file beside the cell: its recorded name must be ``<cell_hash>.predictions.csv.gz``
    (no other folder, no ``..``, no absolute path) and the file a plain file, not a link."""
    expected = f"{cell_hash}{PREDICTIONS_SUFFIX}"
    if recorded != expected:
        raise UserError(
            f"{cell_path}: predictions.file {recorded[:80]!r} is not {expected!r}: a cell's predictions lie beside it"
        )
    path = cells_dir / expected
    if path.is_symlink():
        raise UserError(f"{path}: a link; a results folder holds its predictions files themselves")
    if not path.is_file():
        raise UserError(f"{cell_path}: its predictions file {path} is missing")
    return path


def streamed_sha256(path: Path, most_bytes: int) -> str:
    """sha256 of a file of at most ``most_bytes`` bytes, read in pieces."""
    if path.stat().st_size > most_bytes:
        raise UserError(
            f"{path}: {path.stat().st_size} bytes, more than predictions of this data set can take ({most_bytes})"
        )
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while piece := handle.read(READ_BYTES):
            digest.update(piece)
    return digest.hexdigest()


def bounded_text(path: Path, most_bytes: int) -> bytes:
    """The file's decompressed bytes, refused as soon as they pass ``most_bytes``."""
    try:
        with gzip.open(path, "rb") as handle:
            text = handle.read(most_bytes + 1)
    except (OSError, EOFError, zlib.error) as error:
        raise UserError(f"{path}: not a gzipped predictions file ({type(error).__name__})") from None
    if len(text) > most_bytes:
        raise UserError(
            f"{path}: decompresses to more than the {most_bytes} bytes predictions of this data set can take"
        )
    return text


def check_columns(frame: pd.DataFrame, expected: Predictions, path: Path) -> None:
    """A split column, the data set's id columns, then the task's columns (``label``, its
    probability columns, ``pred`` for classes; ``label``, ``pred`` for a graded score), each value
    one the task allows."""
    ids = [column for column in frame.columns if column in ID_COLUMNS]
    if not ids or list(frame.columns) != ["split", *ids, *expected.columns()]:
        raise UserError(
            f"{path}: columns {', '.join(map(str, frame.columns))[:200]}, not split, the ids, "
            f"{', '.join(expected.columns())}"
        )
    strange = sorted(set(frame["split"]) - set(SPLITS))
    if strange:
        raise UserError(f"{path}: split {strange[0][:40]!r} is not one of {', '.join(SPLITS)}")
    expected.check_values(frame, path)


def read_predictions_file(path: Path, sha256: str, data_digest: str, expected: Predictions) -> dict[str, pd.DataFrame]:
    """``{split: frame}`` of a predictions file whose sha256 must be ``sha256``, of the data with
    ``data_digest`` and the task's predictions ``expected`` (ids, labels and predictions as text);
    every problem is one line."""
    bounds = split_bounds(data_digest)
    row_bytes = ROW_BYTES + expected.number_bytes()
    most_text = row_bytes * (sum(bounds.values()) + 1)
    if streamed_sha256(path, most_text + most_text // 100 + 1024) != sha256:  # gzip never grows text by more
        raise UserError(f"{path}: not the predictions its cell recorded (sha256 differs): truncated or edited")
    text = bounded_text(path, most_text)
    try:
        frame = pd.read_csv(
            io.BytesIO(text),
            dtype={column: str for column in (*ID_COLUMNS, "label", "pred", "split")},
            keep_default_na=False,
        )
    except Exception as error:  # noqa: BLE001 - any unreadable file is one line
        raise UserError(f"{path}: unreadable ({type(error).__name__})") from None
    check_columns(frame, expected, path)
    frames = {split: frame[frame["split"] == split].drop(columns="split").reset_index(drop=True) for split in SPLITS}
    for split, bound in bounds.items():
        if len(frames[split]) > bound:
            raise UserError(f"{path}: {len(frames[split])} {split} rows, more than the data set's {bound}")
    return frames
