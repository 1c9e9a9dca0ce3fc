"""The MSR Paraphrase Corpus: a strict reader, content checks, download and the GLUE split.

``load_mrpc`` returns the MSR rows (``Pair`` with ``id1, id2``); ``load_mrpc_data`` is MRPC as one
implementation of the pair-data-set interface (``harness.pairdata.PairData``).
"""

from __future__ import annotations

import codecs
import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from harness import pairdata
from harness.errors import UserError

TRAIN_FILE = "msr_paraphrase_train.txt"
TEST_FILE = "msr_paraphrase_test.txt"
DEFAULT_BASE_URL = "https://dl.fbaipublicfiles.com/senteval/senteval_data"
HEADER = "Quality\t#1 ID\t#2 ID\t#1 String\t#2 String"

# (rows, positives, sha256 of normalised_text) of the real MSR release files.
EXPECTED = {
    "train": (TRAIN_FILE, 4076, 2753, "178c3d39a096a887a4afa2fdecc9089ad7d7f74c019a95ce8cdac2b4855ebf4a"),
    "test": (TEST_FILE, 1725, 1147, "0d1a876ed5b29dc9779ec212f0d7a1601caafbc5837cd1200e638f0b0a654562"),
}
MAX_DOWNLOAD_BYTES = 50_000_000
HINT_MRPC_DIR = f"set MRPC_DIR to a folder holding {TRAIN_FILE} and {TEST_FILE}"
LABELS = ["0", "1"]  # class 1 = paraphrase, the positive class of F1
ID_COLUMNS = ("id1", "id2")


@dataclass(frozen=True)
class Pair:
    """One row of an MSR file (the interface's pair is ``harness.pairdata.Pair``)."""

    label: int  # 1 = paraphrase
    id1: str
    id2: str
    sentence1: str
    sentence2: str


@dataclass(frozen=True)
class MRPCSplits:
    train: list[Pair]  # GLUE train: MSR train minus the dev ids
    dev: list[Pair]  # GLUE dev: the shipped dev id pairs, in train-file order
    test: list[Pair]  # MSR test (= GLUE test, with labels)
    content_hash: str  # sha256 over the normalised text of both files


def default_mrpc_dir() -> Path:
    """``$MRPC_DIR`` if set, else ``<repo root>/data/mrpc``."""
    configured = os.environ.get("MRPC_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path(__file__).resolve().parent.parent / "data" / "mrpc"


def _read_bytes(path: Path) -> bytes:
    if path.is_dir():
        raise UserError(f"{path}: is a folder, expected an MSR paraphrase file")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: file not found; {HINT_MRPC_DIR}") from None
    except OSError as error:
        raise UserError(f"{path}: cannot read ({error.strerror or error}); check the file") from None


def _decode(raw: bytes, name: str) -> str:
    """UTF-8 (BOM optional) with line endings normalised to LF; trailing newlines kept."""
    if raw.startswith(codecs.BOM_UTF8):
        raw = raw[len(codecs.BOM_UTF8):]
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        before = raw[: error.start].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        line = before.count(b"\n") + 1
        byte = raw[error.start]
        raise UserError(f"{name}:{line}: not valid UTF-8 (byte {byte:#04x}); re-save the file as UTF-8") from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _normalise(text: str) -> str:
    return text.rstrip("\n") + "\n"


def _parse(text: str, name: str) -> list[Pair]:
    """Parse decoded, LF-normalised text; every check runs before anything is returned."""
    if not text.strip():
        raise UserError(f"{name}: file is empty; expected the MSR header and tab-separated pairs")
    lines = text.rstrip("\n").split("\n")
    if lines[0] != HEADER:
        raise UserError(f"{name}:1: header must be {HEADER!r}, found {lines[0][:80]!r}")
    pairs = []
    for line_number, line in enumerate(lines[1:], start=2):
        where = f"{name}:{line_number}"
        if not line.strip():
            raise UserError(f"{where}: blank line before the end of the file; delete it")
        fields = line.split("\t")  # quoting off: a '"' is just a character
        if len(fields) != 5:
            raise UserError(f"{where}: expected 5 tab-separated fields, found {len(fields)}")
        label, id1, id2, sentence1, sentence2 = fields
        if label not in ("0", "1"):
            raise UserError(f"{where}: label must be 0 or 1, found {label[:20]!r}")
        if not id1.strip() or not id2.strip():
            raise UserError(f"{where}: empty #1 ID or #2 ID")
        if not sentence1.strip() or not sentence2.strip():
            raise UserError(f"{where}: empty #1 String or #2 String")
        pairs.append(Pair(int(label), id1, id2, sentence1, sentence2))
    if not pairs:
        raise UserError(f"{name}: no pairs after the header; expected tab-separated rows")
    return pairs


def _read(path: Path) -> tuple[str, list[Pair]]:
    """Normalised text and parsed pairs of one file."""
    text = _decode(_read_bytes(path), str(path))
    return _normalise(text), _parse(text, str(path))


def read_msr_file(path: str | os.PathLike) -> list[Pair]:
    """Read one MSR-format file strictly; any bad row raises UserError naming ``file:line``."""
    return _read(Path(path))[1]


def normalised_text(path: str | os.PathLike) -> str:
    """Decoded text, BOM stripped, CRLF/CR -> LF, trailing blank lines dropped, ending in one LF."""
    path = Path(path)
    return _normalise(_decode(_read_bytes(path), str(path)))


def _check_content(text: str, pairs: list[Pair], name: str, which: str) -> None:
    if which not in EXPECTED:
        raise ValueError(f"which must be 'train' or 'test', got {which!r}")
    _, rows, positives, digest = EXPECTED[which]
    found = {
        "rows": (len(pairs), rows),
        "positive pairs": (sum(pair.label for pair in pairs), positives),
        "sha256": (hashlib.sha256(text.encode("utf-8")).hexdigest(), digest),
    }
    for what, (actual, expected) in found.items():
        if actual != expected:
            raise UserError(
                f"{name}: not the MSR {which} file ({what} {actual}, expected {expected}); "
                f"replace it with the original release or {HINT_MRPC_DIR}"
            )


def verify_msr_file(path: str | os.PathLike, which: str) -> None:
    """Check a file's content (rows, positives, hash of normalised text) against the real release."""
    text, pairs = _read(Path(path))
    _check_content(text, pairs, str(path), which)


def _fetch(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=60) as response:
            raw = response.read(MAX_DOWNLOAD_BYTES + 1)
    except urllib.error.HTTPError as error:
        reason = f"HTTP {error.code} {error.reason}"
        error.close()
    except urllib.error.URLError as error:
        reason = str(error.reason)
    except (OSError, ValueError, http.client.HTTPException) as error:
        reason = str(error) or type(error).__name__
    else:
        if len(raw) <= MAX_DOWNLOAD_BYTES:
            return raw
        reason = f"larger than {MAX_DOWNLOAD_BYTES} bytes"
    reason = " ".join(reason.split())
    raise UserError(f"{url}: download failed ({reason}); check the network or {HINT_MRPC_DIR}")


def _write_atomically(path: Path, data: bytes) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        os.fchmod(descriptor, 0o644)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _download(directory: Path, which_files: list[str], base_url: str) -> None:
    """Fetch and verify every requested file before writing any of them."""
    downloads = {}
    for which in which_files:
        name = EXPECTED[which][0]
        url = f"{base_url.rstrip('/')}/{name}"
        raw = _fetch(url)
        try:
            text = _decode(raw, url)
            _check_content(_normalise(text), _parse(text, url), url, which)
        except UserError as error:
            raise UserError(f"downloaded {name} failed the content check: {error}") from None
        downloads[name] = raw
    try:
        directory.mkdir(parents=True, exist_ok=True)
        for name, raw in downloads.items():
            _write_atomically(directory / name, raw)
    except OSError as error:
        reason = error.strerror or error
        raise UserError(f"{directory}: cannot write the MRPC files ({reason}); {HINT_MRPC_DIR}") from None


def download_mrpc(directory: str | os.PathLike, base_url: str = DEFAULT_BASE_URL) -> None:
    """Download both MSR files into ``directory``, verified by content and written atomically."""
    _download(Path(directory), ["train", "test"], base_url)


def _dev_ids() -> set[tuple[str, str]]:
    try:
        resource = resources.files("harness") / "resources" / "mrpc_dev_ids.tsv"
    except (NotADirectoryError, TypeError):  # harness as a namespace package (no __init__.py)
        resource = Path(__file__).parent / "resources" / "mrpc_dev_ids.tsv"
    text = resource.read_text(encoding="utf-8")
    return {tuple(line.split("\t")) for line in text.splitlines() if line}


def _content_hash(texts: list[str]) -> str:
    return pairdata.combine_digests([hashlib.sha256(text.encode("utf-8")).hexdigest() for text in texts])


def load_mrpc(
    directory: str | os.PathLike | None = None, download: bool = True, base_url: str = DEFAULT_BASE_URL
) -> MRPCSplits:
    """Read the MSR files and apply the GLUE split.

    ``directory`` defaults to ``default_mrpc_dir()``. Missing files are downloaded (when
    ``download``) only into a folder the caller chose: the repo default ``data/mrpc`` or an explicit
    ``directory`` argument. A folder named by ``$MRPC_DIR`` is never written to: missing files there
    raise UserError. Files present are read strictly but not hash-checked, so MRPC-format files of
    your own work; downloads are verified. content_hash = sha256 over the sha256 hex digests of the
    normalised train and test texts, one per line.
    """
    from_environment = directory is None and bool(os.environ.get("MRPC_DIR", "").strip())
    folder = Path(directory) if directory is not None else default_mrpc_dir()
    missing = [which for which in ("train", "test") if not (folder / EXPECTED[which][0]).exists()]
    if missing and from_environment:
        name = EXPECTED[missing[0]][0]
        raise UserError(f"MRPC_DIR={folder}: {name} not found; put the MSR files there or unset MRPC_DIR")
    if missing and not download:
        raise UserError(f"{folder / EXPECTED[missing[0]][0]}: file not found; {HINT_MRPC_DIR} or allow downloads")
    if missing:
        _download(folder, missing, base_url)
    train_text, train_pairs = _read(folder / TRAIN_FILE)
    test_text, test_pairs = _read(folder / TEST_FILE)
    dev_ids = _dev_ids()
    train_ids = {(pair.id1, pair.id2) for pair in train_pairs}
    absent = sorted(dev_ids - train_ids)
    if absent:
        raise UserError(
            f"{folder / TRAIN_FILE}: {len(absent)} of the GLUE dev id pairs are missing "
            f"(e.g. {absent[0][0]}/{absent[0][1]}); use the full MSR train file"
        )
    return MRPCSplits(
        train=[pair for pair in train_pairs if (pair.id1, pair.id2) not in dev_ids],
        dev=[pair for pair in train_pairs if (pair.id1, pair.id2) in dev_ids],
        test=test_pairs,
        content_hash=_content_hash([train_text, test_text]),
    )


def to_pair_data(splits: MRPCSplits) -> pairdata.PairData:
    """MRPC's GLUE split as a PairData: labels ``["0", "1"]`` (class id = MSR label), positive "1",
    ids ``(id1, id2)``, the same content hash."""

    def convert(pairs: list[Pair]) -> list[pairdata.Pair]:
        return [pairdata.Pair(pair.label, (pair.id1, pair.id2), pair.sentence1, pair.sentence2) for pair in pairs]

    return pairdata.PairData(name="mrpc", labels=list(LABELS), id_columns=ID_COLUMNS, train=convert(splits.train),
                             dev=convert(splits.dev), test=convert(splits.test), content_hash=splits.content_hash,
                             positive_label=LABELS[1])


def load_mrpc_data(
    directory: str | os.PathLike | None = None, download: bool = True, base_url: str = DEFAULT_BASE_URL
) -> pairdata.PairData:
    """MRPC through the pair-data-set interface: :func:`load_mrpc` (same folder and download rules)
    converted by :func:`to_pair_data`."""
    return to_pair_data(load_mrpc(directory, download=download, base_url=base_url))
