"""MRPC, the Microsoft Research Paraphrase Corpus, as a named data set: the MSR release files
read strictly, checked by content, downloaded when missing, split as GLUE splits them (dev = the
408 shipped id pairs of the MSR train file, train = the rest, test = the MSR test file), and the
facts runs and reports show about it (split titles, published anchors)."""

from __future__ import annotations

import http.client
import os
import sys
import urllib.error
import urllib.request
from importlib import resources
from pathlib import Path

from harness.atomic import atomic_write
from harness.datasets.entry import Anchors, DataSet
from harness.datasets.reader import PairFile, read_pair_tsv
from harness.datasets.spec import PairDataSpec, refuse_pair_files
from harness.datasets.types import Pair, PairData, combine_digests
from harness.errors import UserError

TRAIN_FILE = "msr_paraphrase_train.txt"
TEST_FILE = "msr_paraphrase_test.txt"
DEFAULT_BASE_URL = "https://dl.fbaipublicfiles.com/senteval/senteval_data"
HEADER = ("Quality", "#1 ID", "#2 ID", "#1 String", "#2 String")

# (rows, positives, sha256 of the normalised text) of the real MSR release files.
EXPECTED = {
    "train": (TRAIN_FILE, 4076, 2753, "178c3d39a096a887a4afa2fdecc9089ad7d7f74c019a95ce8cdac2b4855ebf4a"),
    "test": (TEST_FILE, 1725, 1147, "0d1a876ed5b29dc9779ec212f0d7a1601caafbc5837cd1200e638f0b0a654562"),
}
DEV_PAIRS = 408  # the GLUE dev id pairs (resources/mrpc_dev_ids.tsv), taken out of the MSR train file
CONTENT_HASH = combine_digests([EXPECTED["train"][3], EXPECTED["test"][3]])  # the release's, as load_mrpc computes it
MAX_DOWNLOAD_BYTES = 50_000_000
HINT_MRPC_DIR = f"set MRPC_DIR to a folder holding {TRAIN_FILE} and {TEST_FILE}"
LABELS = ["0", "1"]  # class 1 = paraphrase, the positive class of F1
ID_COLUMNS = ("id1", "id2")
MSR_FORMAT = dict(
    sentence1_column="#1 String",
    sentence2_column="#2 String",
    label_column="Quality",
    id_column=("#1 ID", "#2 ID"),
    header=HEADER,
    labels=LABELS,
    flag=None,
    labels_from="MRPC's labels",
)
ANCHORS = Anchors(
    split="MSR test",
    rows=(  # (system, test acc, test F1, source) on MSR test: the papers' numbers (None: not published)
        ("majority (always paraphrase)", 66.5, 79.9, "MSR test label distribution"),
        ("GLUE single-task BiLSTM + ELMo", 69.0, 80.8, "Wang et al. 2019, GLUE"),
        ("CBoW (frozen)", 73.4, 81.5, "Wang et al. 2019, GLUE"),
        ("InferSent (frozen)", 74.1, 81.2, "Wang et al. 2019, GLUE"),
        ("InferSent (frozen) + LR", 76.2, 83.1, "Conneau et al. 2017, SentEval"),
        ("OpenAI GPT (12 × 768), fine-tuned", None, 82.3, "Radford et al. 2018, GLUE test"),
        ("BERT-Small (4 × 512), fine-tuned", 76.2, 83.4, "Turc et al. 2019, GLUE test"),
        ("BERT-Medium (8 × 512), fine-tuned", 81.6, 86.6, "Turc et al. 2019, GLUE test"),
    ),
    note=(
        "GLUE rows come from other encoders, corpora and training budgets: context, not targets. GPT's own "
        "ablation (Radford et al. 2018, Table 5) puts the same transformer without pretraining at F1 79.4, a "
        "published pretrained − random gap of about 3 F1 points. TF-IDF + LR "
        "is no published system: the benchmark's own `tfidf-lr` baseline measures it (its row above, where the "
        "matrix runs it)."
    ),
)


def default_mrpc_dir() -> Path:
    """``$MRPC_DIR`` if set, else ``<repo root>/data/mrpc``."""
    configured = os.environ.get("MRPC_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    return Path(__file__).resolve().parents[2] / "data" / "mrpc"


def _read(path: Path) -> PairFile:
    if not path.exists():
        raise UserError(f"{path}: file not found; {HINT_MRPC_DIR}")
    return read_pair_tsv(path, **MSR_FORMAT)


def read_msr_file(path: str | os.PathLike) -> list[Pair]:
    """Read one MSR-format file strictly; any bad row raises UserError naming ``file:line``.

    Returns:
        its pairs in file order: label 1 = paraphrase, ids ``(#1 ID, #2 ID)``.
    """
    return _read(Path(path)).pairs


def _check_content(read: PairFile, name: str, which: str) -> None:
    if which not in EXPECTED:
        raise ValueError(f"which must be 'train' or 'test', got {which!r}")
    _, rows, positives, digest = EXPECTED[which]
    found = {
        "rows": (len(read.pairs), rows),
        "positive pairs": (sum(pair.label for pair in read.pairs), positives),
        "sha256": (read.digest, digest),
    }
    for what, (actual, expected) in found.items():
        if actual != expected:
            raise UserError(
                f"{name}: not the MSR {which} file ({what} {actual}, expected {expected}); "
                f"replace it with the original release or {HINT_MRPC_DIR}"
            )


def verify_msr_file(path: str | os.PathLike, which: str) -> None:
    """Check a file's content (rows, positives, hash of normalised text) against the real release."""
    _check_content(_read(Path(path)), str(path), which)


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
    def write(temporary: Path) -> None:
        temporary.write_bytes(data)
        temporary.chmod(0o644)

    atomic_write(path, write)


def _download(directory: Path, which_files: list[str], base_url: str) -> None:
    """Fetch and verify every requested file before writing any of them."""
    downloads = {}
    for which in which_files:
        name = EXPECTED[which][0]
        url = f"{base_url.rstrip('/')}/{name}"
        raw = _fetch(url)
        try:
            _check_content(read_pair_tsv(url, content=raw, **MSR_FORMAT), url, which)
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
        resource = Path(__file__).parents[1] / "resources" / "mrpc_dev_ids.tsv"
    text = resource.read_text(encoding="utf-8")
    return {tuple(line.split("\t")) for line in text.splitlines() if line}


def load_mrpc(
    directory: str | os.PathLike | None = None, download: bool = True, base_url: str = DEFAULT_BASE_URL
) -> PairData:
    """Read the MSR files and apply the GLUE split.

    ``directory`` defaults to ``default_mrpc_dir()``. Missing files are downloaded (when
    ``download``) only into a folder the caller chose: the repo default ``data/mrpc`` or an explicit
    ``directory`` argument. A folder named by ``$MRPC_DIR`` is never written to: missing files there
    raise UserError. Files present are read strictly but not hash-checked, so MRPC-format files of
    your own work (a line on stderr says they are not the release: :func:`note_own_files`);
    downloads are verified.

    Returns:
        the PairData ``mrpc``: labels ``["0", "1"]`` (positive "1"), ids ``(id1, id2)``, GLUE dev
        in train-file order; content_hash over the sha256 of the normalised train and test texts.
    """
    from_environment = directory is None and bool(os.environ.get("MRPC_DIR", "").strip())
    folder = Path(directory).expanduser() if directory is not None else default_mrpc_dir()
    missing = [which for which in ("train", "test") if not (folder / EXPECTED[which][0]).exists()]
    if missing and from_environment:
        name = EXPECTED[missing[0]][0]
        raise UserError(f"MRPC_DIR={folder}: {name} not found; put the MSR files there or unset MRPC_DIR")
    if missing and not download:
        raise UserError(f"{folder / EXPECTED[missing[0]][0]}: file not found; {HINT_MRPC_DIR} or allow downloads")
    if missing:
        _download(folder, missing, base_url)
    train, test = _read(folder / TRAIN_FILE), _read(folder / TEST_FILE)
    note_own_files(folder, train, test)
    dev_ids = _dev_ids()
    absent = sorted(dev_ids - {pair.ids for pair in train.pairs})
    if absent:
        raise UserError(
            f"{folder / TRAIN_FILE}: {len(absent)} of the GLUE dev id pairs are missing "
            f"(e.g. {absent[0][0]}/{absent[0][1]}); use the full MSR train file"
        )
    return PairData(
        name="mrpc",
        labels=list(LABELS),
        id_columns=ID_COLUMNS,
        train=[pair for pair in train.pairs if pair.ids not in dev_ids],
        dev=[pair for pair in train.pairs if pair.ids in dev_ids],
        test=test.pairs,
        content_hash=combine_digests([train.digest, test.digest]),
        positive_label=LABELS[1],
        kind="mrpc",
        source=str(folder),
        train_file=str(folder / TRAIN_FILE),
    )


_NOTED: set[tuple[str, str]] = set()  # (folder, content hash) already said in this process


def release_difference(train: PairFile, test: PairFile) -> str | None:
    """How read MSR-format files differ from the MSR release (the first file that does); None
    when both are the release's text."""
    for which, read in (("train", train), ("test", test)):
        name, rows, positives, digest = EXPECTED[which]
        if read.digest != digest:
            found = f"{len(read.pairs)} pairs, {sum(pair.label for pair in read.pairs)} positive"
            return f"{name} is not the MSR release's ({found}; the release: {rows}, {positives}; sha256 differs)"
    return None


def note_own_files(folder: Path, train: PairFile, test: PairFile) -> None:
    """One line on stderr (once per folder and content) when the files are not the MSR release:
    own MRPC-format files work, and their runs record ``data_release=own``."""
    difference = release_difference(train, test)
    key = (str(folder), combine_digests([train.digest, test.digest]))
    if difference is None or key in _NOTED:
        return
    _NOTED.add(key)
    print(
        f"note: {folder}: {difference}; read as your own MRPC-format files, its runs record data_release=own "
        f"and a study does not pool them with the release's",
        file=sys.stderr,
    )


def load(spec: PairDataSpec) -> PairData:
    """MRPC as ``--data.dataset=mrpc`` names it: the MSR files of ``--data.mrpc_dir``."""
    refuse_pair_files(spec, "MRPC's")
    return load_mrpc(spec.mrpc_dir)


MRPC = DataSet(
    name="mrpc",
    load=load,
    default_name=lambda spec: "mrpc",
    split_titles={"dev": "GLUE dev", "test": "MSR test"},
    class_titles=("not para.", "paraphrase"),
    anchors=ANCHORS,
    plain_run_names=True,
    hash_param="mrpc_hash",
    split_sizes={
        CONTENT_HASH: {"train": EXPECTED["train"][1] - DEV_PAIRS, "dev": DEV_PAIRS, "test": EXPECTED["test"][1]}
    },
    findable=lambda: all((default_mrpc_dir() / name).is_file() for name in (TRAIN_FILE, TEST_FILE)),
)
